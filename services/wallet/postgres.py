"""The ledger's hot path on PostgreSQL: two fixed statements per batch instead of four.

Each statement has one fixed text whatever the batch's size (lists travel as arrays), so
psycopg prepares it once per connection and SQLAlchemy compiles nothing per batch. The write
statement updates the balances, inserts the batch (its stored result completed with the
bank's balance after the update, inside the statement) and inserts the postings, so the bank
row, when touched, stays locked only for that statement and the commit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Connection

from services.wallet.accounts import BANK
from services.wallet.batch import Posting

# ORDER BY under FOR UPDATE locks the rows in sorted order: the fixed lock order.
_LOCK = "SELECT id, balance FROM accounts WHERE id = ANY(%(ids)s::varchar[]) ORDER BY id FOR UPDATE"

# Data-modifying CTEs all run, each once; the postings' foreign key to the batch is checked at
# the end of the statement, when the batch row exists.
_WRITE = """
WITH u AS (
    UPDATE accounts AS a SET balance = a.balance + d.delta
    FROM unnest(%(ids)s::varchar[], %(deltas)s::bigint[]) AS d(id, delta)
    WHERE a.id = d.id
    RETURNING a.id, a.balance
), b AS (
    INSERT INTO batches (idempotency_key, body_hash, result, created_ms)
    SELECT %(key)s, %(digest)s,
           %(head)s || coalesce((SELECT u.balance::text FROM u WHERE u.id = %(bank)s), '')
           || %(tail)s,
           %(now)s
    RETURNING id
), p AS (
    INSERT INTO postings (batch_id, seq, from_account, to_account, amount, reason,
                          table_id, round, phase, created_ms)
    SELECT b.id, v.seq, v.f, v.t, v.amount, v.reason,
           nullif(v.table_id, ''), nullif(v.round, 0), nullif(v.phase, ''), %(now)s
    FROM b, unnest(%(seq)s::int[], %(f)s::varchar[], %(t)s::varchar[], %(amount)s::bigint[],
                   %(reason)s::varchar[], %(table_id)s::varchar[], %(round)s::int[],
                   %(phase)s::varchar[])
         AS v(seq, f, t, amount, reason, table_id, round, phase)
    ORDER BY v.seq
)
SELECT b.id AS batch_id, u.id, u.balance FROM b LEFT JOIN u ON true
"""


def lock_accounts(conn: Connection, accounts: Sequence[str]) -> dict[str, int]:
    """Lock ``accounts`` (sorted order) for the transaction and return their balances."""
    rows = conn.exec_driver_sql(_LOCK, {"ids": list(accounts)})
    return {row[0]: int(row[1]) for row in rows}


def write_batch(
    conn: Connection,
    *,
    key: str,
    digest: str,
    result_parts: tuple[str, str],
    changed: Mapping[str, int],
    applied: Sequence[Posting],
    now: int,
) -> tuple[int, dict[str, int]]:
    """Apply ``changed`` (relative) balance updates, insert the batch and its postings.

    ``result_parts`` is the stored result's JSON split where the bank's balance after the
    update goes ("" as the second part when the batch does not touch the bank). Returns the
    batch id and every changed account's balance after the update.
    """
    ids = sorted(changed)
    head, tail = result_parts
    params = {
        "ids": ids,
        "deltas": [changed[x] for x in ids],
        "key": key,
        "digest": digest,
        "head": head,
        "tail": tail,
        "bank": BANK,
        "now": now,
        "seq": list(range(len(applied))),
        "f": [p.from_account for p in applied],
        "t": [p.to_account for p in applied],
        "amount": [p.amount for p in applied],
        "reason": [p.reason for p in applied],
        "table_id": [p.table_id for p in applied],
        "round": [p.round for p in applied],
        "phase": [p.phase for p in applied],
    }
    rows = conn.exec_driver_sql(_WRITE, params).all()
    after = {row[1]: int(row[2]) for row in rows if row[1] is not None}
    return int(rows[0][0]), after
