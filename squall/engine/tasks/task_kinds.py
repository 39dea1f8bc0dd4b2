"""Which task class runs a bolt: a columnar bolt runs in a ColumnarBoltTask, any other bolt in
a BoltTask. The engines ask here, so neither knows the kinds of bolts."""

from __future__ import annotations

from typing import Any

from squall.engine.tasks.bolt_task import BoltTask


def bolt_task_class(obj: Any) -> type[BoltTask]:
    from squall.columnar.bolt import ColumnarBolt  # noqa: PLC0415 - columnar builds on engine
    if isinstance(obj, ColumnarBolt):
        from squall.engine.tasks.columnar_task import ColumnarBoltTask  # noqa: PLC0415
        return ColumnarBoltTask
    return BoltTask
