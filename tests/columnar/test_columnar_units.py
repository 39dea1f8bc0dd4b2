"""Unit tests of the columnar pieces: the vectorized fields grouping gives the tuple path's
task for the same values; bulk anchoring's ordinals; the spout's emit_batch forms; the
collector's checks."""

from __future__ import annotations

import pickle
import zlib

import numpy as np
import pyarrow as pa
import pytest

from squall.api.spout_collector import SpoutOutputCollector
from squall.api.streams import StreamOut
from squall.api.topology import Grouping
from squall.columnar.batch import ColumnBatch
from squall.columnar.collector import ColumnarCollector
from squall.columnar.outputs import column_children
from squall.reliability.anchoring import Anchors, keys_of
from squall.reliability.columns import (
    anchor_rows,
    derivable,
    derived_rows,
    outputs_per_row,
    row_ordinals,
    spout_row_trees,
)
from squall.routing.columns import ColumnRoute
from squall.routing.hashing import fields_hashes
from squall.routing.tuples import make_route


def _rng(name):
    return np.random.default_rng(zlib.crc32(name.encode()))


def _values(rng, kind, n):
    if kind == "str":
        pool = ["", "a", "é", "word", "日本", "x" * 40] + [f"w{i}" for i in range(300)]
        return [None if rng.random() < 0.05 else pool[rng.integers(len(pool))] for _ in range(n)]
    if kind == "int":
        return [None if rng.random() < 0.05 else int(rng.integers(-2**62, 2**62)) if rng.random() < 0.5
                else int(rng.integers(-50, 50)) for _ in range(n)]
    if kind == "float":
        return [None if rng.random() < 0.05 else float(rng.choice([0.0, -0.0, 1.5, 1e300, -2.25]))
                if rng.random() < 0.5 else float(rng.normal()) for _ in range(n)]
    if kind == "bool":
        return [None if rng.random() < 0.1 else bool(rng.integers(2)) for _ in range(n)]
    if kind == "bytes":
        return [bytes(rng.integers(0, 256, rng.integers(0, 6)).astype(np.uint8)) for _ in range(n)]
    return [[int(x) for x in rng.integers(0, 3, rng.integers(0, 3))] for _ in range(n)]  # lists


@pytest.mark.parametrize("kinds", [["str"], ["int"], ["float"], ["bool"], ["bytes"], ["list"], ["str", "int"],
                                   ["int", "str", "bool"]])
@pytest.mark.parametrize("n_tasks", [1, 3, 7])
def test_fields_grouping_on_columns_matches_the_tuple_path(kinds, n_tasks):
    rng = _rng(f"{kinds}{n_tasks}")
    n = 3000
    names = [f"f{i}" for i in range(len(kinds))] + ["other"]
    cols = [_values(rng, k, n) for k in kinds] + [list(range(n))]
    data = pa.RecordBatch.from_arrays([pa.array(c) for c in cols], names=names)
    rows = [list(r) for r in zip(*data.to_pydict().values())]  # the values an ordinary bolt would emit
    tasks = [10 + 3 * i for i in range(n_tasks)]
    keys = names[:-1][::-1]  # key order differs from field order
    route = make_route(Grouping("fields", tuple(keys)), tasks, names, 0)
    want = [route(r)[0] for r in rows]
    col = ColumnRoute("fields", tasks, [names.index(k) for k in keys], None, None)
    row, target = col.children(data)
    got = np.empty(n, np.int64)
    got[row] = target
    assert got.tolist() == want


def test_fields_hash_of_a_dictionary_column_with_nulls():
    arr = pa.array(["a", None, "b", "a"]).dictionary_encode()
    plain = pa.array(["a", None, "b", "a"])
    h1 = fields_hashes(pa.record_batch([arr], names=["k"]), [0])
    h2 = fields_hashes(pa.record_batch([plain], names=["k"]), [0])
    assert h1.tolist() == h2.tolist()


def test_shuffle_on_columns_continues_the_tuple_counter():
    tasks = [4, 5, 6]
    tup = make_route(Grouping("shuffle"), tasks, ["k"], 1)
    col = ColumnRoute("shuffle", tasks, [], tup, None)
    first = [tup([i])[0] for i in range(2)]
    row, target = col.children(pa.record_batch({"k": list(range(5))}))
    got = np.empty(5, np.int64)
    got[row] = target
    assert first + got.tolist() + [tup([0])[0]] == [tasks[(1 + i) % 3] for i in range(8)]


def test_row_ordinals_count_per_input_row_across_emits():
    first = np.array([2, 0, 2, 2, 1])
    assert row_ordinals(first).tolist() == [0, 0, 1, 2, 0]
    base = outputs_per_row(first, None, 4)
    assert base.tolist() == [1, 1, 3, 0]
    assert row_ordinals(np.array([2, 3]), base).tolist() == [3, 0]
    assert outputs_per_row(np.array([2, 3]), base, 4).tolist() == [1, 1, 4, 1]
    assert row_ordinals(np.array([0, 0, 1, 1, 1, 5, 5])).tolist() == [0, 1, 0, 1, 2, 0, 1]  # in order: no sort
    assert row_ordinals(np.array([], np.int64)).tolist() == []


def _so(direct=False):
    return StreamOut("c", "default", ("k",), direct, [], set(), 0)


@pytest.mark.parametrize("roots", ["in order", "shuffled", "all one", "two per input row"])
def test_derived_edges_balance_and_are_made_again_by_the_receiver(roots):
    """Split-like emits (one root per input row, one child per output row, in any order): the
    edges balance each input's out-ack value, and the batches that travel leave their edge
    values out and make exactly the same ones again when unpickled. Input rows with two roots
    get the per-child edges, which travel."""
    rng = np.random.default_rng(zlib.crc32(roots.encode()))
    n = 400
    derived = roots != "two per input row"
    root = np.arange(1000, 1000 + n, dtype=np.uint64) // np.uint64(2 if roots != "all one" else 10_000)
    if roots == "shuffled":
        rng.shuffle(root)
    per_row = 1 if derived else 2
    anchors = Anchors(np.arange(0, per_row * n + 1, per_row, dtype=np.int64), np.repeat(root, per_row),
                      rng.integers(1, 1 << 62, per_row * n, dtype=np.uint64))
    anchor_row = np.repeat(np.arange(n), rng.integers(0, 6, n))
    if roots == "shuffled":
        rng.shuffle(anchor_row)
    m = len(anchor_row)
    words = pa.RecordBatch.from_arrays([pa.array([f"w{i % 17}" for i in range(m)])], names=["word"])
    route = ColumnRoute("fields", [3, 4, 5], [0], None, None)
    child_row, child_target = route.children(words)
    out_ack = np.zeros(n, np.uint64)
    assert derivable(anchors, anchor_row, child_row) == derived
    if derived:
        children, derive, _ = derived_rows(anchors, anchor_row, child_row, child_target, out_ack, 12345, 0)
    else:
        children, derive = anchor_rows(anchors, keys_of(anchors, 1), anchor_row, row_ordinals(anchor_row),
                                       child_row, child_target, out_ack), None
    assert children.off.tolist() == list(range(0, per_row * m + 1, per_row))
    assert len(set(children.val.tolist())) == m  # no two children share an edge
    balance = out_ack.copy()  # each child's edge went into out_ack once, and to the child once per root
    np.bitwise_xor.at(balance, anchor_row[child_row], children.val[::per_row])
    assert not balance.any(), "an input's out-ack value is not the XOR of its children's edges"
    sent = column_children("split", 1, _so(), words, child_row, child_target, children, derive)
    assert sorted(t for t, _ in sent) == [3, 4, 5]
    for target, b in sent:
        blob = pickle.dumps(b, 5)
        if derive:  # the same batch with its edge values travelling: 8 bytes a row more
            salt, b.anc_derive = b.anc_derive, None
            assert len(pickle.dumps(b, 5)) - len(blob) >= 8 * len(b)
            b.anc_derive = salt
        back = pickle.loads(blob)
        assert back.anc_root.tolist() == b.anc_root.tolist() and back.anc_val.tolist() == b.anc_val.tolist()
        assert back.anc_derive == (derive[target] if derive else None)


@pytest.mark.parametrize("shared", [False, True])
def test_spout_batches_derive_their_edges_and_init_values_balance(shared):
    """A spout's column emit, a root per row or one for all rows: each root's init value is the
    XOR of its children's edges, and the batches travel without those edges and make the same
    ones again when unpickled."""
    m = 1000
    words = pa.RecordBatch.from_arrays([pa.array([f"w{i % 13}" for i in range(m)])], names=["word"])
    child_row, child_target = ColumnRoute("fields", [1, 2], [0], None, None).children(words)
    if shared:
        row_root, slot, n_roots = np.full(m, 77, np.uint64), np.zeros(m, np.int64), 1
    else:
        row_root, slot, n_roots = np.arange(500, 500 + m, dtype=np.uint64), np.arange(m), m
    children, init, derive = spout_row_trees(row_root, np.arange(m), child_row, child_target, slot, n_roots,
                                             (99, 0))
    assert sorted(derive) == [1, 2] and len(set(children.val.tolist())) == m
    balance = init.copy()
    np.bitwise_xor.at(balance, slot[child_row], children.val)
    assert not balance.any(), "a root's init value is not the XOR of its edges"
    for target, b in column_children("src", 0, _so(), words, child_row, child_target, children, derive):
        back = pickle.loads(pickle.dumps(b, 5))
        assert back.anc_derive == derive[target] and back.anc_val.tolist() == b.anc_val.tolist()


def test_collector_checks_name_the_component():
    c = ColumnarCollector("mycol", {"default": _so()}, None)
    c.begin(3, "src", "default")
    with pytest.raises(ValueError, match="'mycol': emit_batch on stream 'default' got columns"):
        c.emit_batch({"x": [1]}, [0])
    with pytest.raises(ValueError, match="'mycol': emit_batch got 1 anchor"):
        c.emit_batch({"k": [1, 2]}, [0])
    with pytest.raises(IndexError, match="input row -1"):
        c.emit_batch({"k": [1]}, [-1])
    with pytest.raises(ValueError, match="bool mask of shape"):
        c.fail_rows(np.ones(2, bool))
    with pytest.raises(ValueError, match="does not declare"):
        c.emit_batch({"k": [1]}, [0], stream="nope")
    c.fail_rows([0, 2])
    c.emit_batch(pa.record_batch({"k": [7, 8]}), np.array([1, 1]))
    emits, failed = c.take()
    assert failed.tolist() == [True, False, True] and emits[0].anchors.tolist() == [1, 1]


def test_spout_emit_batch_forms_record_rows_or_columns():
    c = SpoutOutputCollector("sp", {"default": _so()}, None)
    c.emit_batch([[1], [2]], "one-tree")
    c.emit_batch([[3]], msg_id="again")
    assert [e[2].msg_id for e in c.take_recorded()] == ["one-tree", "one-tree", "again"]
    c.emit_batch({"k": np.arange(3)}, ["a", "b", "c"])
    c.emit_batch(pa.record_batch({"k": [9]}), msg_id="m")
    assert c.recorded_count == 4
    cols = c.take_columns()
    assert cols[0][2] == ["a", "b", "c"] and cols[0][3] is None
    assert cols[1][2] is None and cols[1][3].msg_id == "m"
    with pytest.raises(ValueError, match="both msg_id"):
        c.emit_batch({"k": [1]}, ["x"], msg_id="y")
    with pytest.raises(ValueError, match="2 msg_ids for 1 rows"):
        c.emit_batch({"k": [1]}, ["x", "y"])


def test_column_batch_travels_as_arrow_ipc_and_reads_as_rows():
    data = pa.record_batch({"k": ["a", None], "n": [1, 2]})
    b = ColumnBatch("c", "default", ("k", "n"), 3, data, np.array([0, 1, 1]), np.array([5], np.uint64),
                    np.array([9], np.uint64))
    state = b.__getstate__()
    assert pa.ipc.open_stream(state[4]).read_next_batch().equals(data)  # the columns travel as Arrow IPC
    back = pickle.loads(pickle.dumps(b))
    assert back.data.equals(data) and back.values == [["a", 1], [None, 2]]
    assert back.anchors_of(0)[0].tolist() == [5] and back.anchors_of(1)[0].tolist() == []


def test_a_column_emit_row_kept_for_a_dead_letter_is_its_values():
    from squall.columnar.spout import RowRef

    data = pa.record_batch({"k": ["a", "b"], "n": [1, 2]})
    ref = RowRef(data, 1)
    assert ref.as_list() == ["b", 2] and repr(ref) == "['b', 2]"


def test_row_refs_of_a_wave_read_as_the_rows_they_stand_for():
    """A wave's column emits keep one lazy entry per tracked root: every row of a batch with a
    msg id per row, the first row of a batch under one msg id (none: an empty list)."""
    from squall.columnar.spout import RowRefs

    a = pa.record_batch({"k": ["a", "b", "c"]})
    shared = pa.record_batch({"k": ["s", "t"]})
    empty = pa.record_batch({"k": pa.array([], pa.string())})
    refs = RowRefs()
    refs.add(a, 3)
    refs.add(shared, 1)
    refs.add(empty, 1)
    refs.add(a, 2)
    want = [["a"], ["b"], ["c"], ["s"], [], ["a"], ["b"]]
    assert len(refs) == 7 and [r.as_list() for r in refs] == want
    assert [refs[i].as_list() for i in range(-7, 7)] == want + want
    for bad in (7, -8):
        with pytest.raises(IndexError):
            refs[bad]
    assert len(RowRefs()) == 0 and list(RowRefs()) == []
