"""Hand (Rummy 51): the second table game, as a pure rules engine.

Cards and notation live in ``cards``, the rulings in ``ruleset``, meld checks in ``melds``,
the deal state machine in ``deal_state`` (state) and ``turns`` (``apply``), scoring over a
game of deals in ``scoring`` and ``game``, the token pot in ``pot`` and ``ledger``, and a bot
in ``bot``. See ``/work/shared/RULES-HAND.md`` (RULES-HAND.md) for the rules.
"""
