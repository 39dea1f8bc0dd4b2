"""Batches that settle whole: a columnar bolt's task, a BasicBolt's and a Bolt's ack or fail
every input in the wave they get it (a BasicBolt when `execute` returns, a columnar bolt when
`execute_batch` does), or, a Bolt's, hold it with a fresh edge of its own made when its batch
ends (bolt_trees.hold_pending), so a batch sent to one needs no edge per row.

Storm gives every child an edge id that its sender XORs into the tree and its receiver XORs out
again; an unacked child leaves its tree unbalanced. Toward a task that settles whole that costs
8 bytes a row at both ends and on the way, to learn what the wave's end says anyway: every row
such a task gets is acked or failed (explicitly, with its roots) before the wave ends, or the
wave is lost. So such a batch travels with its roots and no edge values (`anc_settle` is its
id): a bolt's or a spout's edges to it are 0 (`mark_settling`). The sender records the batch as
`Sent` (id and rows), its receiver says `Settled` (id and rows), and the executors match them
per wave: a batch sent and not settled, row for row, means the wave did not run whole, and it is
lost (its roots fail or replay as for any lost wave), so a batch gone astray can never let a
tree complete. A spout tuple whose children all went to such tasks starts its tree at 0: the
acker sees it with the wave's messages, once the wave was found whole, and it is complete
unless they hold it (a child anchored on to a task that acks later) or fail it.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any, NamedTuple

import numpy as np

from squall.reliability.ids import derived_salt, mix64


class Sent(NamedTuple):
    """A batch sent to a task that settles whole, with no edge values: its id, rows, and who sent it where."""

    batch: int
    rows: int
    component: str
    task: int
    target: int


class Settled(NamedTuple):
    """A task settled every row of batch `batch` (`rows` of them)."""

    batch: int
    rows: int


def mark_settling(children: list[tuple[int, Any]], settling: Container[int], salt: int, first: int = 0) -> None:
    """Mark the tracked batches of `children` ((target, batch), the task's `first`-th of the wave
    on) that go to a task in `settling` with an id (from the task's `salt` and the batch's
    number), where no row has an edge value (all 0)."""
    for k, (target, b) in enumerate(children):
        if target in settling and b.anc_off is not None and len(b.anc_root) and not b.anc_val.any():
            b.anc_settle = derived_salt(salt, first + k, target)


def settled_row_ids(batch: Any) -> np.ndarray | None:
    """Per row of a batch that settles whole (or of the parts a concatenated one was made of),
    an id no other row of the wave has: its batch's id mixed with its position. It stands in for
    the edge value the row does not have in its identity (anchoring.keys_of). None: not settled."""
    parts = batch.row_parts() if hasattr(batch, "row_parts") else [(getattr(batch, "anc_settle", None), len(batch))]
    if all(sid is None for sid, _ in parts):
        return None
    return np.concatenate([mix64(np.arange(n, dtype=np.uint64) + np.uint64((sid or 0) & 0xFFFFFFFFFFFFFFFF))
                           for sid, n in parts])


def sent_of(children: list[tuple[int, Any]]) -> list[Sent]:
    """The Sent records of the batches of `children` ((target, batch)) marked to settle."""
    return [Sent(b.anc_settle, len(b), b.component, b.source_task, target) for target, b in children
            if getattr(b, "anc_settle", None) is not None]


def unsettled(sent: list[Sent], settled: list[Settled]) -> str | None:
    """What went astray, said for the lost wave's error: None when every sent batch was settled
    row for row."""
    if not sent and not settled:
        return None
    done: dict[int, int] = {}
    for s in settled:
        done[s.batch] = done.get(s.batch, 0) + s.rows
    astray = [(s, done.get(s.batch, 0)) for s in sent if done.get(s.batch, 0) != s.rows]
    if not astray:
        return None
    s, got = astray[0]
    more = f" (and {len(astray) - 1} more)" if len(astray) > 1 else ""
    return (f"a batch of {s.rows} row(s) that {s.component}[{s.task}] sent to task {s.target} came back settled "
            f"for {got}{more}: the wave did not run whole")
