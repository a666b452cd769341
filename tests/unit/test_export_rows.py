"""``kishpa wallet export`` writes the same line for a posting whether the wallet sent it as a
Transfer message or as columns (the fast path), and its times are UTC to the millisecond."""

from __future__ import annotations

import csv
import io

from google.protobuf.timestamp_pb2 import Timestamp

from cli.finance_cmd import CSV_COLUMNS, UtcMillis, _row, chunk_rows
from kishpa.wallet.v1 import wallet_pb2

# (transfer id, batch, seq, ms, from, to, amount, reason enum, table, round, phase), and the
# time as written by hand.
POSTINGS = [
    (7, 3, 0, 1_767_225_600_000, "bank", "player:a", 50, "BANK_LOAD", "t1", 2, "end"),
    (8, 3, 1, 1_767_225_600_999, "player:a", "bowl:t1", 5, "BOWL_CONTRIBUTION", "t1", 2, "end"),
    (9, 4, 0, 1_767_225_601_001, "player:b", "player:a", 12, "WIN", "", 0, ""),
    (10, 5, 0, 1_798_761_599_999, "pot:h", "player:b", 1, "POT_PAYOUT", "h", 0, "payout"),
]
TIMES = [
    "2026-01-01T00:00:00.000Z",
    "2026-01-01T00:00:00.999Z",
    "2026-01-01T00:00:01.001Z",
    "2026-12-31T23:59:59.999Z",
]


def _transfers() -> wallet_pb2.ExportTransfersResponse:
    chunk = wallet_pb2.ExportTransfersResponse()
    for tid, batch, seq, ms, src, dst, amount, reason, table, rnd, phase in POSTINGS:
        when = Timestamp()
        when.FromMilliseconds(ms)
        chunk.transfers.add(
            transfer_id=tid,
            batch_id=batch,
            seq=seq,
            create_time=when,
            posting=wallet_pb2.Posting(
                from_account=src,
                to_account=dst,
                amount=amount,
                reason=wallet_pb2.TransferReason.Value(f"TRANSFER_REASON_{reason}"),
                table_id=table,
                round=rnd,
                phase=phase,
            ),
        )
    return chunk


def _columns() -> wallet_pb2.ExportTransfersResponse:
    chunk = wallet_pb2.ExportTransfersResponse()
    c = chunk.columns
    for tid, batch, seq, ms, src, dst, amount, reason, table, rnd, phase in POSTINGS:
        c.transfer_id.append(tid)
        c.batch_id.append(batch)
        c.seq.append(seq)
        c.create_time_ms.append(ms)
        c.from_account.append(src)
        c.to_account.append(dst)
        c.amount.append(amount)
        c.reason.append(wallet_pb2.TransferReason.Value(f"TRANSFER_REASON_{reason}"))
        c.table_id.append(table)
        c.round.append(rnd)
        c.phase.append(phase)
    return chunk


def test_columns_and_transfer_messages_write_the_same_csv_lines() -> None:
    slow, fast = io.StringIO(), io.StringIO()
    csv.DictWriter(slow, fieldnames=CSV_COLUMNS, lineterminator="\n").writerows(
        _row(t) for t in _transfers().transfers
    )
    csv.writer(fast, lineterminator="\n").writerows(chunk_rows(_columns(), UtcMillis()))
    assert fast.getvalue() == slow.getvalue()
    lines = fast.getvalue().splitlines()
    assert (
        lines[1] == "8,3,1,2026-01-01T00:00:00.999Z,player:a,bowl:t1,5,bowl_contribution,t1,2,end,"
        "2026-01-01T00:00:00.999Z"
    )
    assert [line.split(",")[3] for line in lines] == TIMES


def test_utc_millis_is_exact_across_seconds_and_days_in_any_order() -> None:
    times = UtcMillis()
    order = [3, 0, 1, 2, 2, 1, 3, 3]
    assert [times(POSTINGS[i][3]) for i in order] == [TIMES[i] for i in order]
    # Every hour and minute boundary of a day, and the first millisecond before the epoch's
    # second day, against the hand-written text.
    assert times(1_767_229_199_999) == "2026-01-01T00:59:59.999Z"
    assert times(1_767_229_200_000) == "2026-01-01T01:00:00.000Z"
    assert times(1_767_311_999_999) == "2026-01-01T23:59:59.999Z"
    assert times(1_767_312_000_000) == "2026-01-02T00:00:00.000Z"
    assert times(0) == "1970-01-01T00:00:00.000Z"
