"""Group commit: concurrent ApplyBatch calls share transactions, so they share commits.

Every batch the wallet acknowledges has been made durable by a commit (PostgreSQL flushes its
write-ahead log; SQLite syncs its file), and each transaction also pays its round trips
(BEGIN, lock, write, COMMIT). Applied one transaction each, a wallet process spends most of
its time and the database most of its CPU on that fixed part rather than on the postings.

Callers put their batch on a queue and wait for its own outcome; a few committer threads each
take whatever is waiting (up to ``max_group``) and apply it with ``Ledger.apply_group``: one
transaction, one commit, every batch still atomic and idempotent on its own (a refused batch
is left out, the others apply; see ``apply_group``). Nobody waits for a group to fill: under
light load a group is one batch, and under heavy load the queue fills while the previous
commit runs, which is when sharing pays. A batch is answered only after its group committed.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from prometheus_client import Histogram

from services.wallet.batch import Posting
from services.wallet.ledger import BatchResult, Ledger

DEFAULT_MAX_GROUP = 64
DEFAULT_THREADS = 4

GROUP_SIZE = Histogram(
    "kishpa_wallet_group_batches",
    "Batches applied per shared transaction (group commit).",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128),
)


@dataclass(slots=True)
class _Pending:
    key: str
    postings: Sequence[Posting]
    future: Future[BatchResult] = field(default_factory=Future)
    # The caller's context (its trace span, its log fields): the group runs in its first
    # caller's, so the shared transaction's SQL spans sit under that call.
    context: contextvars.Context = field(default_factory=contextvars.copy_context)


class GroupCommitter:
    """Applies submitted batches in shared transactions on ``threads`` committer threads."""

    def __init__(
        self, ledger: Ledger, *, threads: int = DEFAULT_THREADS, max_group: int = DEFAULT_MAX_GROUP
    ) -> None:
        if threads < 1 or max_group < 1:
            raise ValueError("a group committer needs at least one thread and one batch a group")
        self._ledger = ledger
        self._max_group = max_group
        self._queue: queue.SimpleQueue[_Pending | None] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"group-commit-{n}", daemon=True)
            for n in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, key: str, postings: Sequence[Posting]) -> Future[BatchResult]:
        """Queue a client batch; the future holds its result or the error refusing it."""
        pending = _Pending(key, postings)
        self._queue.put(pending)
        return pending.future

    def apply_batch(self, key: str, postings: Sequence[Posting]) -> BatchResult:
        """``Ledger.apply_batch``, through a shared transaction (blocks until committed)."""
        return self.submit(key, postings).result()

    def close(self) -> None:
        """Finish what is queued, then stop the threads."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            group = [first] if _claim(first) else []
            stop = False
            while len(group) < self._max_group:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True  # close(): finish this group, then exit
                    break
                if _claim(more):
                    group.append(more)
            if group:
                self._commit(group)
            if stop:
                return

    def _commit(self, group: list[_Pending]) -> None:
        GROUP_SIZE.observe(len(group))
        try:
            outcomes = group[0].context.run(
                self._ledger.apply_group, [(p.key, p.postings) for p in group]
            )
        except BaseException as exc:  # the group's callers must not wait forever
            for p in group:
                p.future.set_exception(exc)
            return
        for p, outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                p.future.set_exception(outcome)
            else:
                p.future.set_result(outcome)


def _claim(pending: _Pending) -> bool:
    """Mark a batch as being applied, unless its caller has already gone (its RPC cancelled
    while the batch waited): such a batch is dropped unapplied, and its caller's retry with the
    same key applies it once. A claimed future can no longer be cancelled, so the committer
    can always hand it its outcome (setting one on a cancelled future would raise and stop the
    thread, leaving every later caller waiting)."""
    return pending.future.set_running_or_notify_cancel()
