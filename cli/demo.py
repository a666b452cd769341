"""A readable demo: one round of Kishpa between four bots, played by the rules engine alone.

No services, no Redis, no wallet: the engine deals from the seed, the bots play, and the
postings the settlement workers would apply are printed at the end.
"""

from __future__ import annotations

from typing import TextIO

from games.fair import FairStream
from games.kishpa import round as kround
from games.kishpa.bot import BOT_TAG, choose_action
from games.kishpa.game import apply_action, new_game, start_round
from games.kishpa.ledger import Posting, net_movements
from games.kishpa.record import end_postings, start_postings

DEMO_PLAYERS = ["ann", "ben", "cat", "dan"]


def play_demo_round(seed: bytes, out: TextIO) -> None:
    """Play and narrate one bot round from an 80-byte server seed."""
    game = new_game(DEMO_PLAYERS)
    game, events = start_round(game, seed, [None] * len(DEMO_PLAYERS))
    stream = FairStream(seed, [], BOT_TAG)
    state = game.round
    assert state is not None
    out.write(f"Kishpa demo round: {', '.join(DEMO_PLAYERS)} (bots)\n")
    out.write(f"  shuffle commitment sha256(server seed) = {state.commitment}\n")
    narrate = _Narrator(out)
    for event in events:
        narrate(event, state)
    start_phase: list[Posting] | None = None
    while game.round_in_progress:
        state = game.round
        assert state is not None
        action = None
        for seat in kround.seats_to_act(state):
            action = choose_action(kround.view_for(state, seat), stream)
            if action is not None:
                break
        game, events = apply_action(game, action if action is not None else kround.CloseWindow())
        state = game.round
        assert state is not None
        for event in events:
            narrate(event, state)
        if start_phase is None and state.phase != kround.START_REVEAL:
            start_phase = start_postings(kround.start_record(state))
    state = game.round
    assert state is not None
    if start_phase is None:
        start_phase = start_postings(kround.start_record(state))
    _postings("start of round postings", start_phase, out)
    _postings("end of round postings", end_postings(kround.end_record(state)), out)
    out.write(f"  bowl now holds {game.bowl} tokens; streaks {game.streaks}\n")
    out.write(f"  server seed (revealed): {state.server_seed}\n")


class _Narrator:
    """Turns public events into readable lines."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def write(self, text: str) -> None:
        self.out.write(text + "\n")

    def __call__(self, event: kround.Event, state: kround.RoundState) -> None:
        name = state.players[event.seat] if 0 <= event.seat < state.seats else ""
        data = event.data
        match event.type:
            case "round_started":
                sizes = ", ".join(
                    f"{p} {n}" for p, n in zip(data["players"], data["hand_sizes"], strict=True)
                )
                self.write(f"  round {data['round']}: starter {data['players'][data['starter']]}")
                self.write(f"  dealt: {sizes}; {data['pile']} tiles in the pile")
                for doll in data["dolls_returned"]:
                    self.write(f"  {doll} turned as kishpa goes back into the pile")
                self.write(f"  kishpa {data['kishpa']}, joker {data['joker']}")
            case "reveal_window_opened" if data["moment"] == "start":
                self.write("  nobody holds a joker: the start reveal window opens")
            case "kishpa_revealed":
                self.write(f"  {name} reveals the kishpa {data['tile']}")
            case "kishpa_replaced":
                self.write(f"  new kishpa {data['kishpa']}, joker {data['joker']}")
            case "drew":
                tile = f" {data['tile']}" if "tile" in data else ""
                self.write(f"  {name:>4} draws from the {data['source']}{tile}")
            case "discarded":
                self.write(f"  {name:>4} discards {data['tile']}")
            case "won":
                groups = " | ".join(" ".join(g) for g in data["groups"])
                self.write(f"  {name} WINS discarding {data['discard']}: {groups}")
                self.write(f"  the win pays {data['payout_per_loser']} from every loser")
            case "pile_exhausted":
                self.write(f"  the pile ran out after {data['turns']} turns: no winner")
            case "round_ended":
                self.write("  round over")
            case _:
                pass


def _postings(title: str, postings: list[Posting], out: TextIO) -> None:
    out.write(f"  {title}:\n")
    for p in postings:
        out.write(f"    {p.from_account:>5} -> {p.to_account:<5} {p.amount:>3}  {p.reason}\n")
    net = ", ".join(f"{k} {v:+d}" for k, v in sorted(net_movements(postings).items()))
    out.write(f"    net: {net}\n")
