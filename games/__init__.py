"""Pure rules engines of the games played on the platform.

Nothing under this package performs I/O, reads a clock or draws randomness it was not
handed: every function is a deterministic function of its arguments.
"""
