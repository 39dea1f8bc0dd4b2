"""The acker's XOR ledger, vectorized: one uint64 per pending tree, no Python object per tree.

Storm's acker keeps, per pending root, the XOR of the edge ids still outstanding; the tree is
complete when it returns to 0. Here each acker partition owns the roots with
`root % ackers == phase`. A spout task's root ids are consecutive (see ids.py), so in a
partition `root // ackers` is dense per spout task: the ledger keeps, per spout task, a window
of slots indexed by that number, and a slot holding 0 is free (a pending tree's value is never
0: reaching 0 means complete). Trees that stay pending far behind the window (held for a join,
say) are moved to a small sorted side store, so one straggler cannot make the window, and the
memory, grow without bound.

Each slot also keeps the timeout generation of its tree's last progress (one byte): any message
for a root, including the zero XOR that `reset_timeout` sends, counts as progress. A rotation
expires the trees whose last progress is two generations old: Storm's rotating buckets, where a
tree times out between 1x and 2x the message timeout, counted only while it makes no progress.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from squall.reliability.ids import ROOT_TASK_SHIFT
from squall.reliability.xor import xor_at

_U64 = np.uint64
_EMPTY = np.zeros(0, _U64)
_STAND_IN = _U64(0x9E3779B97F4A7C15)  # the start value of a tree started at 0 that gets messages in the same apply
NEW_RUN_SLOTS = 1 << 20  # roots this far past a window start a new run (a spout task made anew: a new start)


def _unique(a: np.ndarray) -> np.ndarray:
    """Sorted distinct values; np.unique is several times slower for this on numpy 2."""
    if len(a) < 2:
        return a
    s = np.sort(a)
    keep = np.empty(len(s), bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


@dataclass
class Verdicts:
    """What one `apply` decided: trees complete, trees failed (first failing message wins)."""

    completed: np.ndarray = field(default_factory=lambda: _EMPTY)
    failed: np.ndarray = field(default_factory=lambda: _EMPTY)

    def extend(self, other: Verdicts) -> None:
        self.completed = np.concatenate([self.completed, other.completed]) if len(other.completed) else self.completed
        self.failed = np.concatenate([self.failed, other.failed]) if len(other.failed) else self.failed


class _Window:
    """One spout task's pending trees in one acker partition (its root ids are consecutive)."""

    def __init__(self, stride: int = 1, phase: int = 0):
        self.stride = _U64(stride)
        self.phase = _U64(phase)
        self._base = 0  # root // stride of slot 0
        self._n = 0  # slots in use: [0, n)
        self._vals = np.zeros(1024, _U64)
        self._gens = np.zeros(1024, np.uint8)
        self._old_q = _EMPTY  # side store, sorted by q
        self._old_v = _EMPTY
        self._old_g = np.zeros(0, np.uint8)
        self.gen = 0  # current timeout generation (mod 256)
        self.live = 0

    # -- public ---------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        return self._vals.nbytes + self._gens.nbytes + self._old_q.nbytes + self._old_v.nbytes + self._old_g.nbytes

    def __len__(self) -> int:
        return self.live

    def apply(self, init_roots: np.ndarray, init_vals: np.ndarray, roots: np.ndarray, vals: np.ndarray,
              fail_roots: np.ndarray = _EMPTY) -> Verdicts:
        """Start trees (`init_*`), fail `fail_roots`, then fold ack messages (root, xor). Acks for
        a root that is not pending (late, duplicate, already timed out) are ignored."""
        completed: list[np.ndarray] = []
        gen = np.uint8(self.gen)
        if len(init_roots):
            # A tree starting at 0 has no edge out on a task that acks it: nothing subscribed to
            # its spout tuple, or every child went to a task that settles whole (its edge is 0:
            # reliability/settled.py). With no message in this apply it is complete at once;
            # else the messages decide, so it starts on a stand-in value that they cancel.
            zero = init_vals == 0
            if zero.any():
                if len(roots) or len(fail_roots):
                    init_vals = np.where(zero, _STAND_IN, init_vals)
                    roots = np.concatenate([roots, init_roots[zero]])
                    vals = np.concatenate([vals, np.full(int(zero.sum()), _STAND_IN, _U64)])
                else:
                    completed.append(init_roots[zero])
                    init_roots, init_vals = init_roots[~zero], init_vals[~zero]
            self._start(init_roots, init_vals, gen)
        # Fails before acks: a tree failed in this batch is failed even if its acks balance it.
        failed = self._fail(fail_roots) if len(fail_roots) else _EMPTY
        touched_slots = _EMPTY.astype(np.int64)
        if len(roots):
            q = self._slots(roots)
            dense = q.view(_U64) < _U64(self._n)  # one comparison: negative slots wrap to huge
            if not dense.all():
                completed.append(self._apply_old(roots[~dense], vals[~dense], gen))
                q, vals = q[dense], vals[dense]
            alive = self._vals[q] != 0
            if not alive.all():
                q, vals = q[alive], vals[alive]
            xor_at(self._vals, q, vals)
            self._gens[q] = gen
            touched_slots = q
        if len(touched_slots):
            done = touched_slots[self._vals[touched_slots] == 0]
            if len(done):
                done = self._distinct(done)
                self.live -= len(done)
                completed.append(self._roots_of(done))
        out = Verdicts(np.concatenate(completed) if completed else _EMPTY, failed)
        self._compact()
        return out

    def forget(self, roots: np.ndarray) -> np.ndarray:
        """Drop pending roots (timed out elsewhere); returns those that were pending."""
        return self._fail(roots)

    def rotate(self) -> np.ndarray:
        """Advance the timeout generation; return the roots that expired (and drop them)."""
        self.gen = (self.gen + 1) % 256
        cur = np.uint8(self.gen)
        vals, gens = self._vals[: self._n], self._gens[: self._n]
        stale = (vals != 0) & ((cur - gens).astype(np.uint8) >= 2)
        slots = np.flatnonzero(stale)
        vals[slots] = 0
        expired = [self._roots_of(slots)]
        if len(self._old_q):
            old_stale = (cur - self._old_g).astype(np.uint8) >= 2
            if old_stale.any():
                expired.append(self._old_q[old_stale] * self.stride + self.phase)
                keep = ~old_stale
                self._old_q, self._old_v, self._old_g = self._old_q[keep], self._old_v[keep], self._old_g[keep]
        out = np.concatenate(expired)
        self.live -= len(out)
        self._compact()
        return out

    # -- internals ------------------------------------------------------------------------

    def _slots(self, roots: np.ndarray) -> np.ndarray:
        """Window slot of each root (negative: before the window)."""
        q = roots.view(np.int64) if self.stride == 1 else (roots // self.stride).view(np.int64)
        return q - self._base

    def _distinct(self, slots: np.ndarray) -> np.ndarray:
        """Sorted distinct window slots. A root's messages repeat its slot (a word's ack each:
        many per root, and many roots a wave), so sorting them all is costly; marking them in a
        mask over the window is one pass."""
        if len(slots) * 4 < self._n:  # few: sorting them beats a pass over the whole window
            return _unique(slots)
        mark = np.zeros(self._n, bool)
        mark[slots] = True
        return np.flatnonzero(mark)

    def _roots_of(self, slots: np.ndarray) -> np.ndarray:
        return (slots.astype(_U64) + _U64(self._base)) * self.stride + self.phase

    def _start(self, roots: np.ndarray, vals: np.ndarray, gen: np.uint8) -> None:
        if not len(roots):
            return
        q = (roots // self.stride).astype(np.int64)
        if self._n == 0 and self.live == len(self._old_q):
            self._base = int(q.min())
        q = q - self._base
        behind = q < 0
        if behind.any():  # started out of order: keep them in the side store
            self._old_insert(q[behind] + self._base, vals[behind], gen)
            q, vals = q[~behind], vals[~behind]
        lo = int(q.min()) if len(q) else 0
        if lo >= self._n + NEW_RUN_SLOTS:
            self._retire()
            self._base += lo
            q = q - lo
        if len(q):
            top = int(q.max()) + 1
            self._ensure(top)
            self._vals[q] ^= vals
            self._gens[q] = gen
            self._n = max(self._n, top)
        self.live += len(roots)

    def _retire(self) -> None:
        """The window's live trees into the side store, leaving it empty for a new run of ids."""
        slots = np.flatnonzero(self._vals[: self._n])
        self._old_insert((slots + self._base).astype(_U64), self._vals[slots].copy(), self._gens[slots].copy())
        self._vals[: self._n], self._n = 0, 0

    def _ensure(self, size: int) -> None:
        if size <= len(self._vals):
            return
        cap = max(size, 2 * len(self._vals))
        vals = np.zeros(cap, _U64)
        gens = np.zeros(cap, np.uint8)
        vals[: self._n] = self._vals[: self._n]
        gens[: self._n] = self._gens[: self._n]
        self._vals, self._gens = vals, gens

    def _old_insert(self, q: np.ndarray, vals: np.ndarray, gen) -> None:
        oq = np.concatenate([self._old_q, q.astype(_U64)])
        order = np.argsort(oq, kind="stable")
        self._old_q = oq[order]
        self._old_v = np.concatenate([self._old_v, vals])[order]
        g = np.full(len(q), gen, np.uint8) if np.isscalar(gen) or np.ndim(gen) == 0 else gen
        self._old_g = np.concatenate([self._old_g, g])[order]

    def _old_find(self, roots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions in the side store of `roots`, and which of them were found."""
        q = roots // self.stride
        if not len(self._old_q):
            return np.zeros(len(q), np.int64), np.zeros(len(q), bool)
        pos = np.searchsorted(self._old_q, q)
        pos_c = np.minimum(pos, len(self._old_q) - 1)
        return pos_c, self._old_q[pos_c] == q

    def _apply_old(self, roots: np.ndarray, vals: np.ndarray, gen) -> np.ndarray:
        pos, found = self._old_find(roots)
        pos, vals = pos[found], vals[found]
        if not len(pos):
            return _EMPTY
        alive = self._old_v[pos] != 0
        pos, vals = pos[alive], vals[alive]
        xor_at(self._old_v, pos, vals)
        self._old_g[pos] = gen
        done = _unique(pos[self._old_v[pos] == 0])
        roots_done = self._old_q[done] * self.stride + self.phase
        self.live -= len(done)
        self._old_drop_zero()
        return roots_done

    def _old_drop_zero(self) -> None:
        keep = self._old_v != 0
        if not keep.all():
            self._old_q, self._old_v, self._old_g = self._old_q[keep], self._old_v[keep], self._old_g[keep]

    def _fail(self, roots: np.ndarray) -> np.ndarray:
        roots = _unique(roots.astype(_U64))
        q = (roots // self.stride).astype(np.int64) - self._base
        dense = (q >= 0) & (q < self._n)
        hit = np.zeros(len(roots), bool)
        dq = q[dense]
        alive = self._vals[dq] != 0
        self._vals[dq[alive]] = 0
        hit[np.flatnonzero(dense)[alive]] = True
        rest = np.flatnonzero(~dense)
        if len(rest):
            pos, found = self._old_find(roots[rest])
            ok = found.copy()
            ok[found] = self._old_v[pos[found]] != 0
            self._old_v[pos[ok]] = 0
            hit[rest[ok]] = True
            self._old_drop_zero()
        out = roots[hit]
        self.live -= len(out)
        return out

    def _compact(self) -> None:
        n = self._n
        if n == 0:
            return
        dense_live = self.live - len(self._old_q)
        if dense_live == 0:
            self._n = 0
            self._vals[:n] = 0
            return
        if n < 4096 or n <= 2 * dense_live:
            return
        first = int(np.argmax(self._vals[:n] != 0))
        if n - first > 4 * dense_live + 65536:
            # Stragglers hold the window open: move the live ones of its first half aside.
            half = first + (n - first) // 2
            slots = np.flatnonzero(self._vals[first:half]) + first
            self._old_insert((slots + self._base).astype(_U64), self._vals[slots].copy(), self._gens[slots].copy())
            self._vals[first:half] = 0
            first = half + int(np.argmax(self._vals[half:n] != 0))
        if first:
            keep = n - first
            self._vals[:keep] = self._vals[first:n]
            self._gens[:keep] = self._gens[first:n]
            self._vals[keep:n] = 0
            self._base += first
            self._n = keep


class AckerLedger:
    """One acker partition's pending trees: a window per spout task, since each task's root ids
    are consecutive (its id in the top bits over a counter: squall.reliability.ids)."""

    def __init__(self, stride: int = 1, phase: int = 0):
        self.stride, self.phase = stride, phase
        self.windows: dict[int, _Window] = {}
        self.gen = 0  # current timeout generation (mod 256), shared by the windows

    def __len__(self) -> int:
        return sum(w.live for w in self.windows.values())

    @property
    def live(self) -> int:
        return len(self)

    @property
    def nbytes(self) -> int:
        return sum(w.nbytes for w in self.windows.values())

    def _window(self, owner: int) -> _Window:
        w = self.windows.get(owner)
        if w is None:
            w = self.windows[owner] = _Window(self.stride, self.phase)
            w.gen = self.gen
        return w

    def apply(self, init_roots: np.ndarray, init_vals: np.ndarray, roots: np.ndarray, vals: np.ndarray,
              fail_roots: np.ndarray = _EMPTY) -> Verdicts:
        """Start trees (`init_*`), fail `fail_roots`, then fold ack messages (root, xor); see `_Window.apply`."""
        owners = _owners(init_roots, roots, fail_roots)
        if len(owners) == 1:
            return self._window(int(owners[0])).apply(init_roots, init_vals, roots, vals, fail_roots)
        out = Verdicts()
        io, ao, fo = _owner_of(init_roots), _owner_of(roots), _owner_of(fail_roots)
        for owner in owners.tolist():
            i, a, f = io == owner, ao == owner, fo == owner
            out.extend(self._window(owner).apply(init_roots[i], init_vals[i], roots[a], vals[a], fail_roots[f]))
        return out

    def forget(self, roots: np.ndarray) -> np.ndarray:
        """Drop pending roots (timed out elsewhere); returns those that were pending."""
        if not len(roots):
            return _EMPTY
        owner = _owner_of(roots)
        got = [w.forget(roots[owner == o]) for o, w in self.windows.items()]
        return np.concatenate(got) if got else _EMPTY

    def rotate(self) -> np.ndarray:
        """Advance the timeout generation; return the roots that expired (and drop them)."""
        self.gen = (self.gen + 1) % 256
        expired = [w.rotate() for w in self.windows.values()]
        return np.concatenate(expired) if expired else _EMPTY


def _owner_of(roots: np.ndarray) -> np.ndarray:
    return roots >> _U64(ROOT_TASK_SHIFT) if len(roots) else roots


def _owners(*arrays: np.ndarray) -> np.ndarray:
    """The distinct spout tasks of the roots of `arrays` (one or none, nearly always: one check)."""
    firsts = [a[0] >> _U64(ROOT_TASK_SHIFT) for a in arrays if len(a)]
    if not firsts:
        return np.zeros(1, _U64)
    one = firsts[0]
    if all((a >> _U64(ROOT_TASK_SHIFT) == one).all() for a in arrays if len(a)):
        return np.array([one], _U64)
    return _unique(np.concatenate([_owner_of(a) for a in arrays if len(a)]))


class XorLedger:
    """All acker partitions: messages are routed by `root % ackers`."""

    def __init__(self, ackers: int = 1):
        self.ackers = max(1, int(ackers))
        self.parts = [AckerLedger(self.ackers, p) for p in range(self.ackers)]

    def __len__(self) -> int:
        return sum(p.live for p in self.parts)

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in self.parts)

    def apply(self, init_roots: np.ndarray, init_vals: np.ndarray, roots: np.ndarray, vals: np.ndarray,
              fail_roots: np.ndarray = _EMPTY) -> Verdicts:
        if self.ackers == 1:
            return self.parts[0].apply(init_roots, init_vals, roots, vals, fail_roots)
        k = _U64(self.ackers)
        out = Verdicts()
        ip, ap, fp = init_roots % k, roots % k, fail_roots % k
        for p, part in enumerate(self.parts):
            pi, pa, pf = ip == p, ap == p, fp == p
            out.extend(part.apply(init_roots[pi], init_vals[pi], roots[pa], vals[pa], fail_roots[pf]))
        return out

    def forget(self, roots: np.ndarray) -> np.ndarray:
        if self.ackers == 1:
            return self.parts[0].forget(roots)
        k = _U64(self.ackers)
        return np.concatenate([part.forget(roots[roots % k == p]) for p, part in enumerate(self.parts)])

    def rotate(self) -> np.ndarray:
        return np.concatenate([part.rotate() for part in self.parts])
