"""The Kishpa rules engine: the reading of ``RULES.md`` that every service enforces."""
