"""Seat bots at tables: log them in, create a private table or join one by its code."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from sdk import KishpaClient

BOT_NAMES = (
    "Ada", "Boaz", "Carmel", "Dov", "Efrat", "Gil", "Hila", "Itai", "Yael", "Lior", "Maya",
    "Noam", "Ofir", "Rina", "Shai", "Tal",
)  # fmt: skip


def bot_name(index: int) -> str:
    """A friendly bot name (``Bot Ada``, ..., ``Bot Ada 2``...)."""
    base = BOT_NAMES[index % len(BOT_NAMES)]
    lap = index // len(BOT_NAMES)
    return f"Bot {base}" + (f" {lap + 1}" if lap else "")


async def logged_in_bots(
    names: Sequence[str], matchmaking_addr: str, table_addr: str
) -> list[KishpaClient]:
    """One signed-in client per name (closed by the caller). Bots do not contribute to the
    shuffle (``contribute=False``): their deals wait only for the humans' contributions."""
    clients = [KishpaClient(matchmaking_addr, table_addr, contribute=False) for _ in names]
    try:
        await asyncio.gather(*(c.login(n) for c, n in zip(clients, names, strict=True)))
    except BaseException:
        for client in clients:
            await client.close()
        raise
    return clients


async def join_all(clients: Sequence[KishpaClient], invite_code: str) -> list[int]:
    """Seat every client at the table of ``invite_code`` (in order); returns their seats."""
    seats = []
    for client in clients:
        joined = await client.join_by_code(invite_code)
        seats.append(joined.seat)
    return seats
