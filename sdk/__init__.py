"""The Kishpa client SDK: :class:`KishpaClient` (login, matchmaking, the table), its
error :class:`KishpaError` and retry policy. Read ``sdk/client.py`` first."""

from sdk import events
from sdk.client import KishpaClient, Session, new_request_id, table_settings
from sdk.errors import KishpaError
from sdk.retry import NO_RETRY, RetryPolicy

__all__ = [
    "NO_RETRY",
    "KishpaClient",
    "KishpaError",
    "RetryPolicy",
    "Session",
    "events",
    "new_request_id",
    "table_settings",
]
