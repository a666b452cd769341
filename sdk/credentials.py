"""Where a signed-in player's token is kept between commands (``kishpa play`` → ``kishpa verify``).

The token goes to ``KISHPA_SESSION_FILE`` (default ``~/.kishpa/session.json``), readable by
its owner only. ``KISHPA_TOKEN`` in the environment overrides the file (a token from an
OpenID Connect login, a script).
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def session_file() -> Path:
    """The file a token is saved to and read from."""
    configured = os.environ.get("KISHPA_SESSION_FILE", "")
    return Path(configured) if configured else Path.home() / ".kishpa" / "session.json"


def save_token(token: str, path: Path | None = None) -> Path:
    """Keep ``token`` for later commands (mode 0600); returns the file written."""
    target = path or session_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"token": token}, out)
    return target


def saved_token(path: Path | None = None) -> str | None:
    """``KISHPA_TOKEN``, else the saved token, else None."""
    env = os.environ.get("KISHPA_TOKEN", "")
    if env:
        return env
    target = path or session_file()
    try:
        data = json.loads(target.read_text())
    except (OSError, ValueError):
        return None
    token = data.get("token") if isinstance(data, dict) else None
    return token if isinstance(token, str) and token else None
