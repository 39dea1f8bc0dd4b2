"""What users plug into Trident streams: functions, filters, aggregators, and the tuple view
they receive. Names and contracts follow Storm's Trident API."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from squall.reliability.batch import field_index_of


class TridentTuple:
    """A Trident tuple as a function sees it: the requested fields only (`t[0]`, `t["word"]`)."""

    __slots__ = ("values", "fields", "_fi")

    def __init__(self, values: list, fields: tuple[str, ...]):
        self.values = values
        self.fields = fields
        self._fi = field_index_of(fields)

    def __getitem__(self, key: int | str) -> Any:
        if type(key) is str:
            try:
                return self.values[self._fi[key]]
            except KeyError:
                raise KeyError(f"no field {key!r} in this tuple; its fields are {list(self.fields)}") from None
        return self.values[key]

    def get_value_by_field(self, name: str) -> Any:
        return self[name]

    def get_value(self, i: int) -> Any:
        return self.values[i]

    def select(self, fields: Sequence[str]) -> list:
        return [self[f] for f in fields]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)

    def __repr__(self) -> str:
        return f"TridentTuple({dict(zip(self.fields, self.values))!r})"


Report = Callable[[BaseException | str], None]  # a bolt's report_error


class TridentCollector:
    """Collects what a function emits for one input: each emit appends new fields."""

    __slots__ = ("out", "report")

    def __init__(self, report: Report | None = None) -> None:
        self.out: list[list] = []
        self.report = report  # the bolt's report_error; None outside a topology

    def emit(self, values: Sequence[Any]) -> None:
        self.out.append(list(values))

    def report_error(self, error: BaseException | str) -> None:
        """As Storm: the error is the task's to see (an error record), and the batch goes on."""
        if self.report is None:
            raise error if isinstance(error, BaseException) else RuntimeError(error)
        self.report(error)


class Operation:
    def prepare(self, conf: dict, context: Any) -> None:  # noqa: B027 - optional hook
        """Called once per task before the first tuple."""

    def cleanup(self) -> None:  # noqa: B027
        pass


class BaseFunction(Operation):
    """`execute(tuple, collector)`: emit zero or more value lists, appended to the input's fields."""

    def execute(self, tuple: TridentTuple, collector: TridentCollector) -> None:  # noqa: A002
        raise NotImplementedError(f"{type(self).__name__} must define execute(self, tuple, collector)")


class BaseFilter(Operation):
    """`is_keep(tuple) -> bool`."""

    def is_keep(self, tuple: TridentTuple) -> bool:  # noqa: A002
        raise NotImplementedError(f"{type(self).__name__} must define is_keep(self, tuple)")


class CombinerAggregator:
    """init(tuple) -> value; combine(a, b) -> value; zero() -> value. Combined per partition
    before the shuffle, so only one partial value per key and partition crosses the network."""

    def init(self, tuple: TridentTuple) -> Any:  # noqa: A002
        raise NotImplementedError

    def combine(self, a: Any, b: Any) -> Any:
        raise NotImplementedError

    def zero(self) -> Any:
        raise NotImplementedError


class ReducerAggregator:
    """init() -> value; reduce(current, tuple) -> value."""

    def init(self) -> Any:
        raise NotImplementedError

    def reduce(self, curr: Any, tuple: TridentTuple) -> Any:  # noqa: A002
        raise NotImplementedError


class BaseAggregator(Operation):
    """init(batch_id, collector) -> state; aggregate(state, tuple, collector); complete(state, collector)."""

    def init(self, batch_id: Any, collector: TridentCollector) -> Any:
        return None

    def aggregate(self, state: Any, tuple: TridentTuple, collector: TridentCollector) -> Any:  # noqa: A002
        raise NotImplementedError

    def complete(self, state: Any, collector: TridentCollector) -> None:
        raise NotImplementedError


Aggregator = BaseAggregator


class Count(CombinerAggregator):
    def init(self, tuple: TridentTuple) -> int:  # noqa: A002
        return 1

    def combine(self, a: int, b: int) -> int:
        return a + b

    def zero(self) -> int:
        return 0


class Sum(CombinerAggregator):
    def init(self, tuple: TridentTuple) -> Any:  # noqa: A002
        return tuple[0]

    def combine(self, a: Any, b: Any) -> Any:
        return a + b

    def zero(self) -> Any:
        return 0


class QueryFunction(Operation):
    """batch_retrieve(state, tuples) -> one result per tuple; execute(tuple, result, collector)."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list:
        raise NotImplementedError

    def execute(self, tuple: TridentTuple, result: Any, collector: TridentCollector) -> None:  # noqa: A002
        raise NotImplementedError


class MapGet(QueryFunction):
    """Reads the committed value of each tuple's key (its input fields) from a MapState."""

    def batch_retrieve(self, state: Any, tuples: list[TridentTuple]) -> list:
        return state.multi_get([list(t.values) for t in tuples])

    def execute(self, tuple: TridentTuple, result: Any, collector: TridentCollector) -> None:  # noqa: A002
        collector.emit([result])


class StateUpdater(Operation):
    """For partition_persist: update_state(state, tuples, collector)."""

    def update_state(self, state: Any, tuples: list[TridentTuple], collector: TridentCollector) -> None:
        raise NotImplementedError


class FilterNull(BaseFilter):
    """Storm's FilterNull: drops a tuple when any of its input fields is None (e.g. a MapGet
    of a key the state does not hold)."""

    def is_keep(self, tuple: TridentTuple) -> bool:  # noqa: A002
        return all(v is not None for v in tuple.values)
