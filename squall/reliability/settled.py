"""Batches that settle whole: a columnar bolt task acks or fails every row it is given in the
wave it gets them, so a batch sent to one needs no edge per row.

Storm gives every child an edge id that its sender XORs into the tree and its receiver XORs out
again; an unacked child leaves its tree unbalanced. Between columnar tasks that costs 8 bytes a
row at both ends and on the way, to learn what is known already: every row a columnar task gets
in a wave is acked or failed (explicitly, with its roots) before the wave ends, or the wave is
lost. So such a batch travels with its roots and no edge values (`ColumnBatch.anc_settle` is its
id). Its sender records it as `Sent` (id and rows), its receiver says `Settled` (id and rows).
The executors match them per wave: a batch sent and not settled, row for row, means the wave
did not run whole, and it is lost (its roots fail or replay as for any lost wave), so a batch
gone astray can never let its trees complete.
"""

from __future__ import annotations

from typing import NamedTuple


class Sent(NamedTuple):
    """A batch sent to a columnar task with no edge values: its id, rows, and who sent it where."""

    batch: int
    rows: int
    component: str
    task: int
    target: int


class Settled(NamedTuple):
    """A columnar task settled every row of batch `batch` (`rows` of them)."""

    batch: int
    rows: int


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
