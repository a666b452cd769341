"""The wallet service: a double-entry ledger of tokens on PostgreSQL or SQLite."""
