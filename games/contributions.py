"""Per-deal contributions: the ordering that keeps the house from grinding a deal.

docs/fairness.md, "The commitment order". The server commits to the seed of deal *k*
(``seed_committed``) before any contribution to deal *k* is accepted: at table creation for
deal 1, with the reveal of deal *k - 1* for deal *k*. A human seat may then send one
contribution (``contribution_accepted``); when the deal is due it is dealt as soon as every
seat that is *awaited* has contributed, or when the short contribution deadline passes.

* A seat is awaited when its player contributed to an earlier deal at this table, or
  declared when he sat down that his client contributes (``will_contribute``), and it is
  neither a house bot nor on auto-play: a client that contributes keeps contributing, and
  one that never does (a script, an old client) never slows the table. The declaration is
  what protects the first deal of a table that starts the moment it fills (matchmaking,
  a full private table): it waits for the declared seats' contributions too.
* A seat that sent nothing for a deal gets its default: its sit-down client seed, or none
  (JSON ``null``). A default is fixed before the commitment, so it neither helps nor
  hurts; only a contribution made after the commitment takes the choice from the server.
* Bots never contribute: anything a house bot sent would be house-chosen.
* A creator alone with house bots (no other human at the table) is awaited for the first
  deal even without a declaration, when the table was opened with that rule
  (:func:`await_lone_creator`; the service's ``KISHPA_AWAIT_LONE_CREATOR``): nobody else
  can protect that deal, and a client that never contributes loses one deadline per table.
* Every deal names its seats in its start event (:func:`seat_marks`): the house bots, the
  seats that declared, the seats the deal waited for and the humans on auto-play, so a
  verifier tells "bots only" from "a declared seat was not waited for".

Pure (standard library and the rules core): the service hands in fresh seeds and the clock.
The table keeps this in :attr:`games.table.Table.fair`; it holds the coming deal's secret
seed, so no view or event ever carries it whole.
"""

from __future__ import annotations

from typing import Any

from games.fair import SERVER_SEED_BYTES, commitment
from games.table import BadTableRequest, NotAllowed, Table, TableRuleError

CONTRIBUTIONS = "contributions"
"""The deadline kind of a deal waiting for contributions."""
MAX_CONTRIBUTION = 64
SEED_COMMITTED = "seed_committed"
CONTRIBUTION_ACCEPTED = "contribution_accepted"
START = "start"
NEXT = "next"


def commit(table: Table, deal: int, server_seed: bytes) -> dict[str, Any]:
    """Commit the table to ``server_seed`` for deal ``deal``; the ``seed_committed`` data."""
    if len(server_seed) != SERVER_SEED_BYTES:
        raise ValueError(f"a server seed is {SERVER_SEED_BYTES} bytes")
    contributors = list(table.fair.get("contributors") or [])
    table.fair = {
        "deal": deal,
        "seed": server_seed.hex(),
        "commitment": commitment(server_seed),
        "contributions": {},
        "contributors": contributors,
        # Who this deal waits for: those who declared or contributed before it (a
        # contribution to this deal makes its player declared from the next one on).
        "declared": list(contributors),
        "dealt": False,
    }
    return {"deal": deal, "commitment": table.fair["commitment"]}


def committed(table: Table) -> bool:
    """Whether the table committed in advance to the seed of its coming deal (tables made
    before this existed did not: their deal draws a seed at deal time, as before)."""
    return bool(table.fair.get("seed")) and not table.fair.get("dealt")


def next_deal(table: Table) -> tuple[int, str]:
    """The deal collecting contributions and its commitment; ``(0, "")`` when none."""
    if not committed(table):
        return 0, ""
    return int(table.fair["deal"]), str(table.fair["commitment"])


def contributed(table: Table, player_id: str) -> bool:
    """Whether the player's contribution to the coming deal was accepted."""
    return committed(table) and player_id in (table.fair.get("contributions") or {})


def deal_seeds(table: Table) -> list[str | None]:
    """The client seeds of the deal about to be dealt, seat order: each seat's accepted
    contribution, else its sit-down client seed, else ``None``."""
    given = table.fair.get("contributions") or {}
    return [given.get(p) or table.client_seeds.get(p) or None for p in table.players]


def _declared(table: Table) -> set[str]:
    """Players who declared for the open deal (at sit-down or by an earlier contribution);
    a table stored before the distinction keeps its contributors."""
    fair = table.fair
    return set(fair.get("declared", fair.get("contributors")) or [])


def _lone_creator(table: Table) -> str | None:
    """The creator, when the open deal is the first, the table was opened with the
    lone-creator rule and every other seat is a house bot."""
    if int(table.fair.get("deal") or 0) != 1 or not table.fair.get("lone_creator"):
        return None
    others = [p for p in table.players if p != table.creator]
    if table.creator not in table.players or not others or any(p not in table.bots for p in others):
        return None
    return table.creator


def expected(table: Table) -> list[int]:
    """Seats the coming deal waits for until each has contributed (those that already have
    included): human seats not on auto-play whose player declared or contributed before,
    and a lone creator on the first deal."""
    if not committed(table):
        return []
    ever = _declared(table)
    lone = _lone_creator(table)
    return [
        seat
        for seat, player in enumerate(table.players)
        if (player in ever or player == lone)
        and player not in table.bots
        and seat not in table.autoplay
    ]


def awaited(table: Table) -> list[int]:
    """Seats the coming deal still waits for (see the module's rules)."""
    given = table.fair.get("contributions") or {}
    return [seat for seat in expected(table) if table.players[seat] not in given]


def await_lone_creator(table: Table) -> None:
    """Open the first deal with the lone-creator rule (see the module's rules)."""
    table.fair["lone_creator"] = True


def wait_until(table: Table, at_ms: int) -> None:
    """The coming deal waits for its awaited seats until ``at_ms`` (the deadline)."""
    table.fair["wait_until"] = at_ms


def seat_marks(table: Table) -> dict[str, Any]:
    """What the deal about to be dealt says of its seats (the start event's data): house
    bots, seats that declared (at sit-down, or by contributing to an earlier deal), seats it
    waited for (declared humans not on auto-play, a lone creator), humans on auto-play, and
    until when it waited (its contribution deadline; 0: it did not wait)."""
    ever = _declared(table)
    bots = table.bot_seats()
    return {
        "bot_seats": bots,
        "declared_seats": [
            seat
            for seat, player in enumerate(table.players)
            if player in ever and player not in table.bots
        ],
        "awaited_seats": expected(table),
        "autoplay_seats": sorted(s for s in set(table.autoplay) if s not in bots),
        "awaited_until_ms": int(table.fair.get("wait_until") or 0),
    }


def declare(table: Table, player_id: str) -> None:
    """The player's client declared it contributes to every deal: from the open deal on,
    each deal waits for him (up to the contribution deadline)."""
    for key in ("contributors", "declared"):
        listed = list(table.fair.get(key) or [])
        if player_id not in listed:
            listed.append(player_id)
        table.fair[key] = listed


def accept(table: Table, player_id: str, deal: int, contribution: str) -> tuple[int, bool]:
    """Accept a contribution to the coming deal: ``(seat, new)`` (``new`` False for a repeat
    of the same contribution, which changes nothing)."""
    if not 1 <= len(contribution) <= MAX_CONTRIBUTION:
        raise BadTableRequest(
            f"a contribution is 1-{MAX_CONTRIBUTION} characters", "BAD_CONTRIBUTION"
        )
    seat = table.seat_of(player_id)
    if seat is None:
        raise NotAllowed("you do not sit at this table", "NOT_SEATED")
    if player_id in table.bots:
        raise NotAllowed("a house bot does not contribute", "BOT_SEAT")
    open_deal, _ = next_deal(table)
    if not open_deal or deal != open_deal:
        raise TableRuleError(
            f"deal {deal} takes no contributions (the open deal is {open_deal or 'none'})",
            "CONTRIBUTIONS_CLOSED",
        )
    given: dict[str, str] = dict(table.fair.get("contributions") or {})
    if player_id in given:
        if given[player_id] != contribution:
            raise TableRuleError("you already contributed to this deal", "ALREADY_CONTRIBUTED")
        return seat, False
    given[player_id] = contribution
    table.fair["contributions"] = given
    contributors = list(table.fair.get("contributors") or [])
    if player_id not in contributors:
        contributors.append(player_id)
    table.fair["contributors"] = contributors
    return seat, True


def take_seed(table: Table) -> bytes | None:
    """The committed seed of the deal being dealt now (None: nothing was committed), and
    the deal closed to contributions."""
    if not committed(table):
        return None
    table.fair["dealt"] = True
    table.fair.pop("waiting", None)
    return bytes.fromhex(str(table.fair["seed"]))
