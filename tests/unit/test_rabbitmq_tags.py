"""DeliveryTags against a model of a channel's unacked deliveries: a multiple ack must name an
outstanding tag and may only cover tags being acked now; every ack reaches the broker once."""

from __future__ import annotations

import random
import zlib

import pytest

from squall.connectors.rabbitmq.tags import DeliveryTags


class Channel:
    """What RabbitMQ holds unacked on one channel; raises where the broker closes the channel."""

    def __init__(self) -> None:
        self.unacked: set[int] = set()
        self.next_tag = 1

    def deliver(self) -> int:
        tag, self.next_tag = self.next_tag, self.next_tag + 1
        self.unacked.add(tag)
        return tag

    def ack(self, tag: int, multiple: bool = False) -> set[int]:
        if tag not in self.unacked:
            raise AssertionError(f"PRECONDITION_FAILED - unknown delivery tag {tag}")
        gone = {t for t in self.unacked if t <= tag} if multiple else {tag}
        self.unacked -= gone
        return gone


@pytest.mark.parametrize("seed", range(30))
def test_random_acks_fails_and_rejected_deliveries(seed):
    rng = random.Random(zlib.crc32(b"rabbitmq-tags-%d" % seed))
    ch, tags = Channel(), DeliveryTags()
    held: list[int] = []  # handed to the spout, tree in flight
    acked: set[int] = set()
    for _ in range(200):
        for _ in range(rng.randrange(0, 40)):
            tag = ch.deliver()
            if rng.random() < 0.05:  # pika rejected it at a cancel: the spout never sees it
                ch.unacked.discard(tag)
                continue
            tags.delivered(tag)
            held.append(tag)
        rng.shuffle(held)
        k = rng.randrange(0, len(held) + 1)
        batch, held = held[:k], held[k:]
        for tag in batch[:rng.randrange(0, 3)]:  # failed: republished, then acked (or nacked) alone
            ch.ack(tag)
            tags.settled(tag)
            batch.remove(tag)
        multiple, singles = tags.plan_acks(batch)
        gone: set[int] = set()
        if multiple is not None:
            gone |= ch.ack(multiple, multiple=True)
        for tag in singles:
            gone |= ch.ack(tag)
        assert gone == set(batch), "a multiple ack covered a tree still in flight"
        acked |= gone
        assert ch.unacked == set(held)
        assert tags.held <= ch.next_tag - tags.floor
    if held:
        multiple, singles = tags.plan_acks(held)
        assert multiple == max(held) and not singles  # everything settled: one frame
        ch.ack(multiple, multiple=True)
    assert not ch.unacked and tags.held == 0


def test_in_order_waves_need_one_frame_each():
    ch, tags = Channel(), DeliveryTags()
    for _ in range(5):
        wave = [ch.deliver() for _ in range(1000)]
        for t in wave:
            tags.delivered(t)
        multiple, singles = tags.plan_acks(reversed(wave))
        assert (multiple, singles) == (wave[-1], [])
        ch.ack(multiple, multiple=True)
    assert not ch.unacked


def test_a_straggler_holds_the_floor_and_later_acks_go_alone_until_it_settles():
    tags = DeliveryTags()
    for t in range(1, 11):
        tags.delivered(t)
    assert tags.plan_acks([1, 2, 4, 5]) == (2, [4, 5])  # 3 is in flight
    assert tags.plan_acks([6, 7]) == (None, [6, 7])
    assert tags.plan_acks([3, 8]) == (8, [])  # 3 settles: up to 8 at once (4-7 are acked already)
    tags.delivered(14)  # 11-13 never reached the spout: rejected by pika
    assert tags.plan_acks([9, 10, 14]) == (14, [])
    assert tags.floor == 14 and tags.held == 0
