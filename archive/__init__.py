"""The round archive: every ended round of both games, kept in a relational store.

Written by the settlement worker (:mod:`workers.archive_write`) before a round's ending
phase is marked settled; read by the table service (history RPCs, ``GetRoundRecord`` after
the table is gone), ``kishpa history`` and ``kishpa wallet explain``. See
docs/architecture.md ("The round archive").
"""
