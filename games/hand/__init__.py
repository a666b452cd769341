"""Hand (Rummy 51): the second table game, as a pure rules engine.

Where things live:

* ``cards`` — the 106 cards, stable ids, notation (``AS``, ``10H``, ``J1``);
* ``ruleset`` — every ruling (and every case the rules leave open) as one ``RuleSet``;
* ``melds`` — sets, runs, values, laying off, releasing jokers;
* ``deal`` / ``deal_state`` / ``turns`` — dealing, the deal's state and views, and
  ``apply(state, action) -> (state, events)`` over the ``actions``, emitting ``events``;
* ``scoring``, ``game`` — a deal's scores, a game of 7 deals;
* ``pot``, ``ledger``, ``record`` — the pot split, its postings, the settlement records;
* ``meld_search``, ``bot`` — finding melds in a hand, a deterministic bot;
* ``positions`` — building a position from card text (tests, hints, tooling).

The rules are the shared RULES-HAND.md. Nothing here performs I/O, reads a clock or draws
randomness it was not handed.
"""
