"""A fields grouping's positions by str value (squall/routing/tuples.py): one cache per number of
target tasks, shared by every route of the process and kept when a task's routes are built again
(on Spark most waves rebuild a task from its State in another Python worker)."""

import zlib

from squall.api.topology import Grouping
from squall.routing.tuples import make_route

WORDS = Grouping("fields", ("word",))


def test_a_route_built_again_finds_the_positions_the_first_one_hashed():
    first = make_route(WORDS, [7, 8, 9], ["word"], 0)
    assert first(["zebra-4711"]) == [[7, 8, 9][zlib.crc32(b"zebra-4711") % 3]]
    again = make_route(WORDS, [17, 18, 19], ["word"], 1)  # another producer, other task ids, 3 targets
    assert again.cache is first.cache and again.cache["zebra-4711"] == zlib.crc32(b"zebra-4711") % 3
    assert again(["zebra-4711"]) == [[17, 18, 19][zlib.crc32(b"zebra-4711") % 3]]


def test_routes_to_a_different_number_of_tasks_keep_their_own_positions():
    three = make_route(WORDS, [1, 2, 3], ["word"], 0)
    four = make_route(WORDS, [1, 2, 3, 4], ["word"], 0)
    assert three.cache is not four.cache
    for w in (f"w{i}" for i in range(200)):  # both right for every word, whichever hashed it first
        assert three([w]) == [1 + zlib.crc32(w.encode()) % 3]
        assert four([w]) == [1 + zlib.crc32(w.encode()) % 4]
