"""What the tests and the benchmarks share, and production never uses.

Never shipped (``pyproject.toml`` packages only the deployables) and never imported by the
production packages (an import-linter contract in ``make lint``); the benchmarks import it,
never ``tests/`` (another contract).

* ``redis_servers`` — real ``redis-server`` processes (one node, or a Redis Cluster) on free
  ports, started and stopped by a test or a benchmark;
* ``tlscerts`` — a test CA and workload certificates (``cryptography``) for the TLS tests
  and the TLS benchmark;
* ``phase_samples`` — realistic settlement phase records (the table service's outbox
  entries) for the workers' tests and the settlement benchmark;
* ``postgres`` — a throwaway PostgreSQL database per test or benchmark run;
* ``kishpa_reference`` — a slow, obviously correct Kishpa solver the fast one is checked
  against; ``hand_positions`` — a Hand position built from card text;
* ``bot_matches`` — seeded games between bot levels on the pure rules engines.
"""
