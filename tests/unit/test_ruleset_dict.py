"""The cached stored form of a rule set equals ``dataclasses.asdict`` and is never shared."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from hypothesis import given, reject
from hypothesis import strategies as st

from games.kishpa.ruleset import RuleSet, rules_dict


@st.composite
def rule_sets(draw: st.DrawFn) -> RuleSet:
    """A valid rule set with up to four rulings moved off their defaults."""
    changes: dict[str, Any] = {}
    for f in draw(st.lists(st.sampled_from(fields(RuleSet)), max_size=4, unique=True)):
        default = f.default
        changes[f.name] = (
            draw(st.booleans()) if isinstance(default, bool) else default + draw(st.integers(0, 5))
        )
    try:
        return RuleSet(**changes)
    except ValueError:  # not a valid rule set (e.g. seats out of order)
        reject()


@given(rule_sets())
def test_rules_dict_is_asdict_and_a_fresh_dict(rules: RuleSet) -> None:
    first = rules_dict(rules)
    assert first == asdict(rules)
    first["turn_seconds"] = -1  # a caller changing its copy changes no one else's
    assert rules_dict(rules) == asdict(rules)
    assert RuleSet(**rules_dict(rules)) == rules
