"""Which delivery tags of a RabbitMQ channel are settled, so that a wave's acks go to the broker
as one `basic.ack(multiple=True)` instead of one frame per message.

A channel numbers its deliveries 1, 2, 3, ... in the order it sends them. `basic.ack(t,
multiple=True)` acks every delivery up to t that is still unacked, so it may only be sent when
each of those is one we are acking now: every tag up to t must be settled (acked, nacked or
republished) or in this batch. The tracker keeps `floor`, the highest tag with every tag up to
it settled, and the settled tags above it. pika itself rejects (requeues) the deliveries it had
not handed to the consumer's callback when the consumer is cancelled (deactivate); the spout
never sees those tags, so a gap in the tags it sees counts as settled.
"""

from __future__ import annotations

from collections.abc import Iterable


class DeliveryTags:
    """The settled delivery tags of one channel (used on the I/O thread only)."""

    def __init__(self) -> None:
        self.floor = 0  # every tag <= floor is settled
        self.last = 0  # the highest tag handed to the spout
        self._settled: set[int] = set()  # settled tags above floor

    def delivered(self, tag: int) -> None:
        """The consumer callback got `tag`; the tags between the last one and it never reached
        the spout: pika rejected them back to the queue."""
        if tag > self.last + 1:
            self._settled.update(range(self.last + 1, tag))
            self._advance()
        if tag > self.last:
            self.last = tag

    def settled(self, tag: int) -> None:
        """`tag` was acked or nacked on its own."""
        self._settled.add(tag)
        self._advance()

    def plan_acks(self, tags: Iterable[int]) -> tuple[int | None, list[int]]:
        """How to ack `tags` (unacked so far): (the tag for one multiple ack covering every one of
        them up to it, or None; the tags to ack one by one)."""
        tags = list(tags)
        self._settled.update(tags)
        self._advance()
        floor = self.floor
        covered = [t for t in tags if t <= floor]
        return (max(covered) if covered else None), [t for t in tags if t > floor]

    @property
    def held(self) -> int:
        """Settled tags kept above the floor (bounded by the prefetch)."""
        return len(self._settled)

    def _advance(self) -> None:
        settled, floor = self._settled, self.floor
        while floor + 1 in settled:
            floor += 1
            settled.discard(floor)
        self.floor = floor
