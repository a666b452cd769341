"""``kishpa rules check|hint|settle``: the rules engine over JSON Lines, for people and tools.

Each command reads one JSON object per line on stdin and prints one JSON line per input
line, in order (blank lines are skipped). A malformed line prints ``{"error": "..."}``; the
other lines are still answered and the command exits 2 at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

from games.errors import RulesError
from games.kishpa.payouts import win_payout
from games.kishpa.ruleset import DEFAULT_RULES, RuleSet
from games.kishpa.solver import (
    Group,
    best_arrangement,
    find_winning_arrangement,
    winning_discards,
)
from games.kishpa.tiles import Face, check_available, joker_of, parse_face

EXIT_BAD_INPUT = 2

Answer = Callable[[dict[str, Any]], dict[str, Any]]


class BadLine(ValueError):
    """A line that cannot be answered; its message is printed as the line's error."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``rules`` command group."""
    rules = subparsers.add_parser(
        "rules", help="check hands, hint discards and settle round records (JSON Lines)"
    )
    commands = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    wrap = argparse.ArgumentParser(add_help=False)
    wrap.add_argument(
        "--allow-12-13-1",
        action="store_true",
        help="allow the classic Okey run 12-13-1 (off by default, as in docs/rules/kishpa.md)",
    )
    check = commands.add_parser(
        "check",
        parents=[wrap],
        help="does a 14-tile hand win?",
        description='Reads {"kishpa": "R5", "hand": [14 tiles], "discard": "R6"} per line '
        '(discard optional); prints {"wins": ..., "groups": [...], "payout_per_loser": n}.',
    )
    check.set_defaults(handler=_check_handler)
    hint = commands.add_parser(
        "hint",
        parents=[wrap],
        help="which discards from a 15-tile hand win?",
        description='Reads {"kishpa": "R5", "hand": [15 tiles]} per line; prints the winning '
        "discards with their groups and payouts, or the best groups found.",
    )
    hint.set_defaults(handler=_hint_handler)
    settle = commands.add_parser(
        "settle",
        help="the ledger postings of round records",
        description="Reads one round record per line; prints the settlement of each. An "
        'optional "stake" (default 1) multiplies every amount; "bowl" is in tokens.',
    )
    settle.set_defaults(handler=_settle_handler)


def _rules_of(args: argparse.Namespace) -> RuleSet:
    if getattr(args, "allow_12_13_1", False):
        return RuleSet(allow_run_12_13_1=True)
    return DEFAULT_RULES


def _check_handler(args: argparse.Namespace) -> int:
    rules = _rules_of(args)
    return answer_lines(sys.stdin, sys.stdout, lambda obj: check_hand(obj, rules))


def _hint_handler(args: argparse.Namespace) -> int:
    rules = _rules_of(args)
    return answer_lines(sys.stdin, sys.stdout, lambda obj: hint_hand(obj, rules))


def _settle_handler(args: argparse.Namespace) -> int:
    # Imported here so check and hint work even while the record module is absent.
    from games.kishpa.record import settle_record

    return answer_lines(sys.stdin, sys.stdout, settle_record, describe=str)


def answer_lines(
    lines: Iterable[str],
    out: TextIO,
    answer: Answer,
    describe: Callable[[BaseException], str] | None = None,
) -> int:
    """Answer each JSON line with one JSON line; exit code 2 if any line failed.

    ``describe`` turns a refused line's exception into its error text (default: one line).
    """
    describe = describe or _one_line
    failed = False
    for line in lines:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise BadLine("each line must be a JSON object")
            result = answer(obj)
        except json.JSONDecodeError as exc:
            result = {"error": f"bad JSON: {exc.msg} at column {exc.colno}"}
        except (BadLine, RulesError, ValueError, KeyError, TypeError) as exc:
            result = {"error": describe(exc)}
        if "error" in result:
            failed = True
        out.write(json.dumps(result) + "\n")
        out.flush()
    return EXIT_BAD_INPUT if failed else 0


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return f"missing field {exc.args[0]!r}"
    return " ".join(str(exc).split()) or type(exc).__name__


def _tiles(obj: dict[str, Any], size: int) -> list[str]:
    hand = obj.get("hand")
    if not isinstance(hand, list) or not all(isinstance(t, str) for t in hand):
        raise BadLine('"hand" must be a list of tiles written like "R7"')
    if len(hand) != size:
        raise BadLine(f'"hand" must have {size} tiles, got {len(hand)}')
    return hand


def _tile(obj: dict[str, Any], field: str) -> Face:
    text = obj.get(field)
    if not isinstance(text, str):
        raise BadLine(f'"{field}" must be a tile written like "R7"')
    return parse_face(text)


def _named(groups: Sequence[Group], written: Sequence[str]) -> list[list[str]]:
    return [[written[p] for p in g.positions] for g in groups]


def check_hand(obj: dict[str, Any], rules: RuleSet = DEFAULT_RULES) -> dict[str, Any]:
    """Answer one ``rules check`` line: does the 14-tile hand win, how, and for how much."""
    if "kishpa" not in obj:
        raise BadLine('missing field "kishpa"')
    kishpa = _tile(obj, "kishpa")
    joker = joker_of(kishpa)
    written = _tiles(obj, rules.hand_size)
    hand = [parse_face(t) for t in written]
    discard = None if obj.get("discard") is None else _tile(obj, "discard")
    check_available([*hand, *([discard] if discard else [])], [kishpa])
    groups = find_winning_arrangement(hand, joker, rules)
    if groups is None:
        return {"wins": False}
    result: dict[str, Any] = {"wins": True, "groups": _named(groups, written)}
    if discard is not None:
        result["payout_per_loser"] = win_payout(hand, discard, kishpa, rules)
    return result


def hint_hand(obj: dict[str, Any], rules: RuleSet = DEFAULT_RULES) -> dict[str, Any]:
    """Answer one ``rules hint`` line: the winning discards of a 15-tile hand, or best groups."""
    if "kishpa" not in obj:
        raise BadLine('missing field "kishpa"')
    kishpa = _tile(obj, "kishpa")
    written = _tiles(obj, rules.hand_size + 1)
    hand = [parse_face(t) for t in written]
    check_available(hand, [kishpa])
    found = winning_discards(hand, kishpa, rules)
    if not found:
        groups = best_arrangement(hand, joker_of(kishpa), rules)
        return {"wins": False, "groups": _named(groups, written)}
    return {
        "wins": True,
        "discards": [
            {
                "discard": written[d.position],
                "groups": _named(d.arrangement, written),
                "payout_per_loser": d.payout_per_loser,
            }
            for d in found
        ],
    }
