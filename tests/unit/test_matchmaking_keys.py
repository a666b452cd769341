"""Matchmaking's cluster key design: one slot per queue, one per player (no Redis needed).

Slots are computed twice, independently: redis-py's ``key_slot`` on the whole key (it
finds the hash tag itself) and ``shared.keys.key_slot`` on the tag we meant.
"""

from __future__ import annotations

import itertools

import pytest
from redis.crc import key_slot as redis_key_slot

from devkit.redis_servers import slot_ranges
from services.common.settings import DEFAULT_STAKES
from services.matchmaking.keys import Keys, Queue, queue_of
from services.matchmaking.service import GAMES, SEAT_RANGE
from shared.keys import key_slot

pytestmark = pytest.mark.unit

OFFERED = [
    Queue(game, seats, stake)
    for game, seats, stake in itertools.product(
        GAMES, range(SEAT_RANGE[0], SEAT_RANGE[1] + 1), DEFAULT_STAKES
    )
]


def slot(key: str) -> int:
    return redis_key_slot(key.encode())


def queue_keys(keys: Keys, queue: Queue) -> list[str]:
    ticket, group = queue.new_id(), queue.new_id()
    return [
        keys.queue(queue),
        keys.ticket(queue, ticket),
        keys.ticket_prefix(queue) + ticket,
        keys.expiring(queue),
        keys.forming(queue),
        keys.group(queue, group),
    ]


def test_every_key_of_a_queue_lives_in_the_queue_s_own_slot() -> None:
    keys = Keys()
    for queue in OFFERED:
        expected = key_slot(f"mm:{queue.game}:{queue.seats}:{queue.stake}")
        assert {slot(k) for k in queue_keys(keys, queue)} == {expected}, queue


def test_queues_of_different_games_sizes_and_stakes_spread_over_the_masters() -> None:
    keys = Keys()
    slots = {queue: slot(keys.queue(queue)) for queue in OFFERED}
    assert len(set(slots.values())) == len(OFFERED), "two offered queues share a slot"
    masters = {
        next(i for i, (first, last) in enumerate(slot_ranges(3)) if first <= s <= last)
        for s in slots.values()
    }
    assert masters == {0, 1, 2}
    # The pairs the integration tests lean on are on different masters of a 3-master cluster.
    assert slots[Queue("kishpa", 2, 5)] != slots[Queue("kishpa", 2, 10)]
    assert slots[Queue("kishpa", 2, 5)] != slots[Queue("kishpa", 3, 5)]


def test_every_key_of_a_player_lives_in_his_own_slot() -> None:
    keys = Keys()
    for player in ("p1", "pabc", "oidc|user@example.com", "odd}id{x"):
        player_keys = [
            keys.active_ticket(player),
            keys.player_table(player),
            keys.request(player, "join:r1"),
            keys.request(player, "private:r1"),
        ]
        assert len({slot(k) for k in player_keys}) == 1, player
    assert slot(keys.active_ticket("p1")) == key_slot("mm:player:p1")


def test_ids_name_their_queue_and_nothing_else_parses() -> None:
    for queue in OFFERED:
        item = queue.new_id()
        assert queue_of(item) == queue
        assert len(item) <= 64, "ticket ids must fit the API's limit"
        assert Queue.parse_name(queue.name) == queue
    for bad in (
        "",
        "0123456789abcdef0123",  # a ticket id from before queues had their own slots
        "kishpa-4-5",
        "kishpa-4-5-xyz0123456789abcdef",
        "KISHPA-4-5-0123456789abcdef0123",
        "kishpa-4-5-0123456789abcdef0123-",
        "kishpa:4:5:0123456789abcdef0123",
        "../kishpa-4-5-0123456789abcdef0123",
    ):
        assert queue_of(bad) is None, bad
    assert Queue.parse_name("kishpa:x:5") is None


def test_a_prefix_with_its_own_hash_tag_puts_everything_in_one_slot() -> None:
    """The old layout still works (one slot for everything), e.g. a braced test prefix."""
    keys = Keys("kishpa:{mm-test}")
    every = [k for q in OFFERED[:6] for k in queue_keys(keys, q)]
    every += [keys.active_ticket("p1"), keys.request("p2", "r"), keys.invite("ABCDEF")]
    assert {slot(k) for k in every} == {key_slot("mm-test")}
    assert Keys().legacy_player_table("p1") == "kishpa:{mm}:player:p1:table"
    assert keys.legacy_player_table("p1") is None
