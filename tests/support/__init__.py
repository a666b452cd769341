"""What several test modules share: fixtures, builders and waiting helpers.

Test modules import from here, never from one another (a test module is run, not a library).
What the benchmarks share with the tests lives in ``devkit/`` instead.
"""
