"""The ledger's hot path on PostgreSQL: fixed statements whatever the batch's (or group's) size.

Each statement has one fixed text (lists travel as arrays), so psycopg prepares it once per
connection and SQLAlchemy compiles nothing per batch. The write statement updates the
balances, inserts the batches (each stored result completed with the bank's balance after
that batch, inside the statement) and inserts the postings, so the bank row, when touched,
stays locked only for that statement and the commit. One call writes one batch, or a whole
group of batches that share one transaction (group commit, ``services/wallet/group_commit.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection

from services.wallet.accounts import BANK
from services.wallet.batch import Posting

# ORDER BY under FOR UPDATE locks the rows in sorted order: the fixed lock order.
_LOCK = "SELECT id, balance FROM accounts WHERE id = ANY(%(ids)s::varchar[]) ORDER BY id FOR UPDATE"

# Replays among a group's keys; run after the locks, so a twin that held them has committed.
_FIND = (
    "SELECT idempotency_key, id, body_hash, result FROM batches "
    "WHERE idempotency_key = ANY(%(keys)s::varchar[])"
)

# Data-modifying CTEs all run, each once; the postings' foreign key to their batch is checked
# at the end of the statement, when the batch rows exist. A batch's stored result is its JSON
# split where the bank's balance goes: the bank's balance after the whole statement minus what
# the later batches of the group moved (``bank_later``; NULL when the batch leaves the bank
# alone, which leaves the JSON whole).
_WRITE = """
WITH u AS (
    UPDATE accounts AS a SET balance = a.balance + d.delta
    FROM unnest(%(ids)s::varchar[], %(deltas)s::bigint[]) AS d(id, delta)
    WHERE a.id = d.id
    RETURNING a.id, a.balance
), b AS (
    INSERT INTO batches (idempotency_key, body_hash, result, created_ms)
    SELECT k.key, k.digest,
           k.head
           || coalesce(((SELECT u.balance FROM u WHERE u.id = %(bank)s) - k.bank_later)::text, '')
           || k.tail,
           %(now)s
    FROM unnest(%(keys)s::varchar[], %(digests)s::varchar[], %(heads)s::text[],
                %(tails)s::text[], %(bank_later)s::bigint[]) WITH ORDINALITY
         AS k(key, digest, head, tail, bank_later, n)
    ORDER BY k.n
    RETURNING id, idempotency_key
), p AS (
    INSERT INTO postings (batch_id, seq, from_account, to_account, amount, reason,
                          table_id, round, phase, created_ms, effective_ms)
    SELECT b.id, v.seq, v.f, v.t, v.amount, v.reason,
           nullif(v.table_id, ''), nullif(v.round, 0), nullif(v.phase, ''), %(now)s,
           %(effective)s
    FROM unnest(%(bkey)s::varchar[], %(seq)s::int[], %(f)s::varchar[], %(t)s::varchar[],
                %(amount)s::bigint[], %(reason)s::varchar[], %(table_id)s::varchar[],
                %(round)s::int[], %(phase)s::varchar[])
         AS v(bkey, seq, f, t, amount, reason, table_id, round, phase)
    JOIN b ON b.idempotency_key = v.bkey
    ORDER BY b.id, v.seq
)
SELECT b.idempotency_key, b.id, NULL, NULL FROM b
UNION ALL
SELECT NULL, NULL, u.id, u.balance FROM u
"""


@dataclass(frozen=True, slots=True)
class BatchWrite:
    """One planned batch for ``write_batches``.

    ``result_parts`` is the stored result's JSON split where the bank's balance after the
    batch goes ("" as the second part when the batch does not touch the bank); ``bank_later``
    is what the group's later batches move into the bank (None: this batch leaves it alone).
    """

    key: str
    digest: str
    result_parts: tuple[str, str]
    bank_later: int | None
    applied: Sequence[Posting]


def lock_accounts(conn: Connection, accounts: Sequence[str]) -> dict[str, int]:
    """Lock ``accounts`` (sorted order) for the transaction and return their balances."""
    rows = conn.exec_driver_sql(_LOCK, {"ids": list(accounts)})
    return {row[0]: int(row[1]) for row in rows}


def find_batches(conn: Connection, keys: Sequence[str]) -> dict[str, tuple[int, str, str]]:
    """Stored batches among ``keys``: key -> (batch id, body hash, result JSON)."""
    rows = conn.exec_driver_sql(_FIND, {"keys": list(keys)})
    return {row[0]: (int(row[1]), row[2], row[3]) for row in rows}


def write_batches(
    conn: Connection,
    changed: Mapping[str, int],
    batches: Sequence[BatchWrite],
    now: int,
    effective: int,
) -> tuple[dict[str, int], dict[str, int]]:
    """Apply the group's ``changed`` (relative, summed) balance updates and insert its batches
    and their postings, in one statement.

    Returns each batch's id by key and every changed account's balance after the update.
    """
    ids = sorted(changed)
    postings = [(b.key, seq, p) for b in batches for seq, p in enumerate(b.applied)]
    params = {
        "ids": ids,
        "deltas": [changed[x] for x in ids],
        "bank": BANK,
        "now": now,
        "effective": effective,
        "keys": [b.key for b in batches],
        "digests": [b.digest for b in batches],
        "heads": [b.result_parts[0] for b in batches],
        "tails": [b.result_parts[1] for b in batches],
        "bank_later": [b.bank_later for b in batches],
        "bkey": [key for key, _, _ in postings],
        "seq": [seq for _, seq, _ in postings],
        "f": [p.from_account for _, _, p in postings],
        "t": [p.to_account for _, _, p in postings],
        "amount": [p.amount for _, _, p in postings],
        "reason": [p.reason for _, _, p in postings],
        "table_id": [p.table_id for _, _, p in postings],
        "round": [p.round for _, _, p in postings],
        "phase": [p.phase for _, _, p in postings],
    }
    ids_by_key: dict[str, int] = {}
    after: dict[str, int] = {}
    for key, batch_id, account, balance in conn.exec_driver_sql(_WRITE, params):
        if key is not None:
            ids_by_key[key] = int(batch_id)
        else:
            after[account] = int(balance)
    return ids_by_key, after
