"""The pull requests a JetStream spout keeps outstanding at its consumer, and how many messages
each still owes, so that the spout never asks for more than it has room for.

A pull request asks the consumer for up to `batch` messages, delivered to a subject of the
spout's inbox as they become available, until the request expires; each request gets its own
reply subject, where the server says when it is over (404/408/409). A message keeps its stream
subject, so it is counted against the oldest request: the server serves them in order, and
expiry corrects any drift (a status lost in a reconnect, say).
"""

from __future__ import annotations

# Pull requests a spout keeps outstanding, and each one's default batch: 4 x 4,096 messages keep
# the server busy while the spout's I/O thread shares the host (and the driver's GIL) with Spark;
# fewer or smaller requests leave it idle, more gain nothing (bench/brokers.py). The spout's room
# (max spout pending) still caps what the requests ask for.
MAX_PULLS = 4
PULL_BATCH = 4096
PULL_GRACE_SECS = 1.0  # a pull request is forgotten this long after it expired, if no status came


class PullRequests:
    """Open pull requests: reply subject -> [messages still owed, when to forget it]."""

    def __init__(self, inbox: str, expires_secs: float):
        self.inbox = inbox
        self.expires_secs = expires_secs
        self._open: dict[str, list] = {}
        self._n = 0

    def __len__(self) -> int:
        return len(self._open)

    def owed(self, now: float) -> int:
        """Messages the open requests may still bring (requests past their expiry forgotten)."""
        for subject in [s for s, (_left, until) in self._open.items() if now > until]:
            del self._open[subject]
        return sum(left for left, _until in self._open.values())

    def open(self, batch: int, now: float) -> str:
        """Count a new request for `batch` messages; its reply subject."""
        self._n += 1
        subject = f"{self.inbox}.{self._n}"
        self._open[subject] = [batch, now + self.expires_secs + PULL_GRACE_SECS]
        return subject

    def close(self, subject: str) -> None:
        """The request is over (the server said so, or it was never sent)."""
        self._open.pop(subject, None)

    def delivered(self) -> None:
        """One message came: the oldest request owes one less."""
        if self._open:
            oldest = next(iter(self._open))
            self._open[oldest][0] -= 1
            if self._open[oldest][0] <= 0:
                del self._open[oldest]


V1_TOKENS = 9  # $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
V2_MIN_TOKENS = 11  # $JS.ACK.<domain>.<account hash>.<stream>...<pending>[.<token>]


def delivery_ids(reply: str) -> tuple[int, int]:
    """(stream sequence, delivery number) of a JetStream message, from its ack subject: what
    nats-py's `Msg.metadata` gives, without building its dataclasses and datetime per message
    (a large share of the spout's I/O thread). Both subject layouts: v1, and v2 with domain
    and account hash (and an optional last token); names hold no dots, so the numbers are found
    by counting dots from the end."""
    dots = reply.count(".")
    if dots == V1_TOKENS - 1:
        tail = reply.rsplit(".", 5)  # [..., delivered, stream seq, consumer seq, time, pending]
    elif dots >= V2_MIN_TOKENS - 1:
        tail = reply.rsplit(".", dots - 5)  # tokens 6 and 7 are the delivered count and stream seq
    else:
        tail = []
    if len(tail) < 3 or not reply.startswith("$JS.ACK."):
        raise ValueError(f"not a JetStream ack subject: {reply!r}")
    return int(tail[2]), int(tail[1])
