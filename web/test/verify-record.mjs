// The browser's whole-table check (src/fair.ts, bundled into test/dist) on one RoundRecord
// given as proto3 JSON on stdin: prints the verdict as JSON (tests/integration/tables/
// test_fair_order.py runs it against honest and dishonest table services).
import { readFileSync } from "node:fs";
import { evidenceFromRecord, verifyTable, tableSummary } from "./dist/fair.mjs";

const r = JSON.parse(readFileSync(0, "utf8"));
const list = (x) => x ?? [];
const record = {
  game: r.game ?? 0,
  shuffleCommitment: r.shuffleCommitment ?? "",
  serverSeed: r.serverSeed ?? "",
  clientSeeds: list(r.clientSeeds),
  seatClientSeeds: list(r.seatClientSeeds),
  playerIds: list(r.playerIds),
  starterSeat: r.starterSeat ?? 0,
  mySeat: r.mySeat ?? 0,
  handSize: r.handSize ?? 14,
  dealtHands: list(r.dealtHands).map((d) => ({ seat: d.seat ?? 0, tileIds: list(d.tileIds) })),
  draws: list(r.draws).map((d) => ({ seat: d.seat ?? 0, tileId: d.tileId ?? 0, pileLeft: d.pileLeft ?? 0 })),
  kishpaTileId: r.kishpaTileId,
  replacementKishpaTileId: r.replacementKishpaTileId,
  dollsReturnedIds: list(r.dollsReturnedIds),
  topDiscardCardId: r.topDiscardCardId,
  precommitment: r.precommitment ?? "",
  precommitmentEventId: r.precommitmentEventId ?? "",
  contributions: list(r.contributions).map((c) => ({ seat: c.seat ?? 0, contribution: c.contribution ?? "", eventId: c.eventId ?? "" })),
  dealEventId: r.dealEventId ?? "",
  cardsLeft: list(r.cardsLeft).map((d) => ({ seat: d.seat ?? 0, tileIds: list(d.tileIds) })),
  moves: list(r.moves).map((m) => ({ seat: m.seat ?? 0, kind: m.kind ?? "", tileIds: list(m.tileIds) })),
  round: r.round ?? 0,
  recordVersion: r.recordVersion ?? 0,
  botSeats: list(r.botSeats),
  declaredSeats: list(r.declaredSeats),
  awaitedSeats: list(r.awaitedSeats),
  autoplaySeats: list(r.autoplaySeats),
  // proto3 JSON writes a Timestamp as RFC 3339 text.
  awaitedUntil: r.awaitedUntil ? { seconds: Math.floor(Date.parse(r.awaitedUntil) / 1000), nanos: (Date.parse(r.awaitedUntil) % 1000) * 1e6 } : undefined,
};
const verdict = await verifyTable(evidenceFromRecord(record, null));
console.log(JSON.stringify({ ok: verdict.ok, checks: verdict.failed.map((f) => f.check), summary: tableSummary(verdict) }));
