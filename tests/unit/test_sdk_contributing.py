"""The SDK's bookkeeping of its contributions (sdk/contributing.py): one try per deal, a
refusal that only means "too late" or "not yours" is quiet, anything else is raised, and a
background send never escapes as an exception (the real-service behaviour is in
tests/integration/test_sdk_contributes.py)."""

from __future__ import annotations

import asyncio
import re

import grpc
import pytest

from sdk.contributing import Contributions, new_contribution
from sdk.errors import KishpaError

pytestmark = pytest.mark.unit


def test_a_contribution_is_32_fresh_hex_characters() -> None:
    first, second = new_contribution(), new_contribution()
    assert re.fullmatch(r"[0-9a-f]{32}", first)
    assert first != second


def test_each_deal_is_tried_once() -> None:
    sent = Contributions()
    assert sent.should_send("t1", 1)
    assert not sent.should_send("t1", 1)
    assert sent.should_send("t1", 2)
    assert sent.should_send("t2", 1)
    assert not sent.should_send("t1", 0)  # no open deal


async def test_an_accepted_contribution_is_remembered_and_a_late_one_is_quiet() -> None:
    sent = Contributions()
    calls: list[tuple[str, int, str]] = []

    async def accept(table_id: str, deal: int, text: str) -> None:
        calls.append((table_id, deal, text))

    async def closed(table_id: str, deal: int, text: str) -> None:
        raise KishpaError(grpc.StatusCode.FAILED_PRECONDITION, "CONTRIBUTIONS_CLOSED", "dealt")

    text = await sent.send("t1", 1, accept)
    assert text is not None
    assert calls == [("t1", 1, text)]
    assert sent.of("t1", 1) == text
    assert await sent.send("t1", 2, closed) is None
    assert sent.of("t1", 2) is None


async def test_an_unexpected_refusal_is_raised_but_not_from_the_background() -> None:
    sent = Contributions()

    async def broken(table_id: str, deal: int, text: str) -> None:
        raise KishpaError(grpc.StatusCode.INVALID_ARGUMENT, "BAD_CONTRIBUTION", "no")

    with pytest.raises(KishpaError):
        await sent.send("t1", 1, broken)
    sent.in_background(lambda: sent.send("t1", 2, broken))
    await asyncio.wait_for(sent.settle(), 5)
    assert sent.of("t1", 2) is None
