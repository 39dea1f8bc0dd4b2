"""Emit indexing: a batch's recorded emits as arrays, the input of bulk anchoring.

An emit becomes one child per target task. What anchoring needs to know, per emit and per
child, is turned into numpy arrays here, mostly at C level (zip transposition, map,
np.fromiter); a Python loop runs only for multi-anchoring and for anchors received in another
batch (tuples a bolt held).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from squall.reliability.held import HeldRows
from squall.reliability.tuple import Tuple

_I64 = np.int64
_get_b = attrgetter("_b")
_get_i = attrgetter("_i")
_COLUMNS = (itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3))  # stream out, values, anchors, targets
_row = itemgetter(4)
_first = itemgetter(0)
_NONE = type(None)


@dataclass
class EmitIndex:
    """A batch's recorded emits as arrays: children (one per emit and target task), the
    (emit, input row) anchor pairs inside the batch, anchors from other batches (held tuples),
    each emit's input row and its ordinal within that input's execute."""

    values: Sequence
    streams: Sequence
    child_emit: np.ndarray
    child_target: np.ndarray
    pair_emit: np.ndarray
    pair_row: np.ndarray
    foreign: list[tuple[int, Tuple]]
    multi: bool
    rows: np.ndarray
    ords: np.ndarray
    held: list[tuple[int, HeldRows]] = ()  # (emit, rows of a store): anchored to many held rows at once

    @classmethod
    def of_spout(cls, values: tuple, streams: tuple, targets: Sequence[list[int]]) -> EmitIndex:
        """Spout emits: children only (no anchors, no executing input)."""
        ce, ct = children_of(targets)
        empty = np.zeros(0, _I64)
        return cls(values, streams, ce, ct, empty, empty, [], False, empty, empty)


def children_of(targets: Sequence[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(emit index, target task) of every child: an emit has one child per target task."""
    ne = len(targets)
    tlens = np.fromiter(map(len, targets), _I64, ne)
    if (tlens == 1).all():
        return np.arange(ne), np.fromiter(map(_first, targets), _I64, ne)
    return np.repeat(np.arange(ne), tlens), np.fromiter(chain.from_iterable(targets), _I64, int(tlens.sum()))


def emit_ordinals(rows: np.ndarray) -> np.ndarray:
    """Each emit's ordinal within its input's execute: its place in the run of equal rows
    (the executing input) it belongs to (emits of an input are consecutive)."""
    ne = len(rows)
    change = np.ones(ne, bool)
    np.not_equal(rows[1:], rows[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    return np.arange(ne) - np.repeat(starts, np.diff(np.append(starts, ne)))


def index_emits(batch: Any, emits: list[tuple]) -> EmitIndex:
    """Index a bolt batch's emits, (stream out, values, anchors, targets, input row) each."""
    ne = len(emits)
    # one C-level map per column: cheaper than zip(*emits)
    streams, values, ancs, targets = (list(map(g, emits)) for g in _COLUMNS)
    rows_a = np.fromiter(map(_row, emits), _I64, ne)
    ords = emit_ordinals(rows_a)
    child_emit, child_target = children_of(targets)
    pair_emit: list[int] | np.ndarray = []
    pair_row: list[int] | np.ndarray = []
    foreign: list[tuple[int, Tuple]] = []
    held: list[tuple[int, HeldRows]] = []
    multi = False
    kinds = set(map(type, ancs))
    if kinds == {Tuple} and set(map(_get_b, ancs)) == {batch}:  # batches hash by identity
        pair_emit = np.arange(ne)  # the common case: each emit anchored to one input of this batch
        pair_row = np.fromiter(map(_get_i, ancs), _I64, ne)
    elif kinds != {_NONE}:
        for j, anc in enumerate(ancs):
            if anc is None:
                continue
            if type(anc) is HeldRows:
                held.append((j, anc))
                continue
            if type(anc) is Tuple:
                anc = (anc,)
            elif len(anc) > 1:
                multi = True
            for a in anc:
                if a._b is batch:
                    pair_emit.append(j)
                    pair_row.append(a._i)
                else:
                    foreign.append((j, a))
    return EmitIndex(values, streams, child_emit, child_target, np.asarray(pair_emit, _I64),
                     np.asarray(pair_row, _I64), foreign, multi, rows_a, ords, held)
