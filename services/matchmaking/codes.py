"""Invite codes: short, case-insensitive, without characters people confuse (0/O, 1/I/L)."""

from __future__ import annotations

import secrets

ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"
LENGTH = 6
"""31**6 is about 887 million codes: guessing a live one is hopeless at any sane rate."""


def new_code() -> str:
    """A fresh random invite code (from the OS random source)."""
    return "".join(secrets.choice(ALPHABET) for _ in range(LENGTH))


def normalize(raw: str) -> str | None:
    """The code as stored, from what a person typed (spaces, dashes, case ignored);
    None if it cannot be a code at all."""
    text = "".join(ch for ch in raw.upper() if ch not in " -")
    if len(text) != LENGTH or any(ch not in ALPHABET for ch in text):
        return None
    return text
