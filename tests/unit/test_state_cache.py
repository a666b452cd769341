"""The kept-state map (services/table/state_cache.py) against a plain reference model: a
list in order of last use, trimmed from the front."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from services.table.state_cache import KeptState, StateCache

TABLES = st.sampled_from(["a", "b", "c", "d", "e"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("keep"), TABLES, st.integers(1, 5)),
        st.tuples(st.just("get"), TABLES, st.just(0)),
        st.tuples(st.just("forget"), TABLES, st.just(0)),
    ),
    max_size=60,
)


def state(version: int) -> KeptState:
    return KeptState(version, b"{}", None, f"rev{version}")


@given(OPS, st.integers(0, 4))
# An older state kept after a newer one (replies out of order) still counts as a use.
@example(
    [("keep", "a", 2), ("keep", "b", 1), ("keep", "a", 1), ("keep", "c", 1), ("get", "a", 0)], 2
)
def test_the_map_keeps_the_newest_state_of_the_most_recently_used_tables(
    ops: list[tuple[str, str, int]], limit: int
) -> None:
    cache = StateCache(limit)
    model: list[tuple[str, int]] = []  # (table, version), least recently used first
    for op, table, version in ops:
        found = [v for t, v in model if t == table]
        if op == "keep":
            if limit == 0:
                continue
            newest = max([version, *found])
            model = [(t, v) for t, v in model if t != table] + [(table, newest)]
            model = model[-limit:]
        elif op == "get":
            got = cache.get(table)
            assert (got.version if got else None) == (found[0] if found else None)
            if found:
                model = [(t, v) for t, v in model if t != table] + [(table, found[0])]
            continue
        else:
            model = [(t, v) for t, v in model if t != table]
        if op == "keep":
            cache.keep(table, state(version))
        else:
            cache.forget(table)
        assert len(cache) == len(model) <= limit
