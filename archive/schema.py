"""The archive's tables (SQLAlchemy Core), the same on PostgreSQL and SQLite.

Times are integer milliseconds since the epoch. On PostgreSQL every table is partitioned by
range of its time column, one partition a month (:mod:`archive.partitions`), so an
old month is detached and dropped whole; a primary key there must hold the partition key,
which is why each key ends with the time (it is fixed by the phase record, so a second
delivery of the same round carries the same key).
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

rounds = sa.Table(
    "archive_rounds",
    metadata,
    sa.Column("table_id", sa.String(64), nullable=False),
    sa.Column("round_no", sa.Integer, nullable=False),
    sa.Column("ended_ms", sa.BigInteger, nullable=False),
    # "kishpa" or "hand".
    sa.Column("game", sa.String(16), nullable=False),
    # The round whose ending phase archived this one (a Hand game's deals: its last deal).
    sa.Column("settled_round", sa.Integer, nullable=False),
    sa.Column("stake", sa.BigInteger, nullable=False),
    # JSON list of player ids in seat order.
    sa.Column("players", sa.Text, nullable=False),
    # The public kishpa.table.v1.RoundRecord (deterministic bytes), its moves included;
    # NULL when the table's stream was gone before the round settled.
    sa.Column("record", sa.LargeBinary, nullable=True),
    # JSON {player id: net tokens} of the settled unit (on its ending round's row only).
    sa.Column("results", sa.Text, nullable=False),
    # JSON list of the wallet batch ids that settled it, in phase order.
    sa.Column("batch_ids", sa.Text, nullable=False),
    sa.Column("archived_ms", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("table_id", "round_no", "ended_ms", name="archive_rounds_pkey"),
)

phases = sa.Table(
    "archive_phases",
    metadata,
    sa.Column("table_id", sa.String(64), nullable=False),
    sa.Column("round_no", sa.Integer, nullable=False),
    sa.Column("phase", sa.String(16), nullable=False),
    # The phase record's created_ms (when the table reached the phase).
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("game", sa.String(16), nullable=False),
    # "" when nothing moved.
    sa.Column("batch_id", sa.String(64), nullable=False),
    # JSON list of {from, to, amount, reason} as the wallet applied them.
    sa.Column("postings", sa.Text, nullable=False),
    sa.Column("archived_ms", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint(
        "table_id", "round_no", "phase", "created_ms", name="archive_phases_pkey"
    ),
)
sa.Index("archive_phases_batch", phases.c.batch_id)
# The drift check reads the phases archived after its watermark (workers/drift_archive.py).
sa.Index("archive_phases_archived", phases.c.archived_ms)

drift_marks = sa.Table(
    "archive_drift_marks",
    metadata,
    # The check ("ledger": the archive's phases against the wallet's batches).
    sa.Column("name", sa.String(32), nullable=False),
    # The end (exclusive) of the window of archive and ledger time its last clean run read.
    sa.Column("until_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    sa.PrimaryKeyConstraint("name", name="archive_drift_marks_pkey"),
)

player_games = sa.Table(
    "archive_player_games",
    metadata,
    sa.Column("player_id", sa.String(120), nullable=False),
    sa.Column("ended_ms", sa.BigInteger, nullable=False),
    sa.Column("table_id", sa.String(64), nullable=False),
    # The round that ended the game (Kishpa: the round; Hand: the last deal).
    sa.Column("round_no", sa.Integer, nullable=False),
    sa.Column("game", sa.String(16), nullable=False),
    sa.Column("stake", sa.BigInteger, nullable=False),
    sa.Column("seat", sa.Integer, nullable=False),
    sa.Column("seats", sa.Integer, nullable=False),
    sa.Column("net_tokens", sa.BigInteger, nullable=False),
    # "won" (net > 0), "lost" (net < 0) or "even".
    sa.Column("result", sa.String(8), nullable=False),
    sa.PrimaryKeyConstraint(
        "player_id", "ended_ms", "table_id", "round_no", name="archive_player_games_pkey"
    ),
)

PARTITIONED = {
    "archive_rounds": "ended_ms",
    "archive_phases": "created_ms",
    "archive_player_games": "ended_ms",
}
"""Each partitioned table and the column its months are ranges of."""
