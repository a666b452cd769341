// The browser's fairness code (src/fair.ts, bundled by build.mjs into test/dist) against the
// test vectors of docs/fairness.md: an independent source, written for outsiders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dealRound, shuffledDeck, commitmentOf, clientSeedsDigest, hexToBytes, bytesToHex, verifyTable, tableSummary } from "./dist/fair.mjs";

const doc = readFileSync(fileURLToPath(new URL("../../docs/fairness.md", import.meta.url)), "utf8");
const vectors = [...doc.matchAll(/<!-- vector: (\w+) -->\s*```json\n([\s\S]*?)```/g)].map((m) => ({ kind: m[1], ...JSON.parse(m[2]) }));

test("the doc has deck and deal vectors", () => {
  assert.ok(vectors.filter((v) => v.kind === "deck").length >= 2);
  assert.ok(vectors.some((v) => v.kind === "deal"));
});

test("decks, commitments and client digests match the vectors", async () => {
  for (const v of vectors.filter((v) => v.kind === "deck")) {
    const seed = hexToBytes(v.server_seed);
    assert.equal(await commitmentOf(seed), v.commitment);
    assert.equal(bytesToHex(await clientSeedsDigest(v.client_seeds)), v.client_digest);
    assert.deepEqual(await shuffledDeck(seed, v.client_seeds), v.deck);
  }
});

test("a whole deal matches: hands, kishpa, doll put back, replacement, next draws", async () => {
  for (const v of vectors.filter((v) => v.kind === "deal")) {
    const deal = await dealRound(hexToBytes(v.server_seed), v.client_seeds, v.seats, v.starter);
    assert.deepEqual(deal.hands, v.hands);
    assert.equal(deal.kishpa, v.kishpa);
    assert.equal(deal.replacement, v.replacement);
    assert.deepEqual(deal.pile.slice(-5).reverse(), v.next_draws);
  }
});

// ---- protocol version 2: exact encodings, whole-table transcripts, the commitment order ----

test("the canonical JSON of awkward seeds is the documented bytes", async () => {
  const [v] = vectors.filter((v) => v.kind === "deck" && v.canonical_json);
  assert.ok(v);
  assert.equal(JSON.stringify(v.client_seeds), v.canonical_json);
  assert.equal(bytesToHex(new TextEncoder().encode(v.canonical_json)), v.canonical_json_hex);
  assert.equal(bytesToHex(await clientSeedsDigest(v.client_seeds)), v.client_digest);
});

test("a replacement that turned a doll back", async () => {
  for (const v of vectors.filter((v) => v.kind === "deal")) {
    const deal = await dealRound(hexToBytes(v.server_seed), v.client_seeds, v.seats, v.starter);
    assert.deepEqual(deal.dollsReturned, v.dolls_returned);
  }
});

function setPath(obj, path, value) {
  const parts = path.split(".");
  const last = parts.pop();
  for (const p of parts) obj = obj[Array.isArray(obj) ? Number(p) : p];
  obj[Array.isArray(obj) ? Number(last) : last] = value;
}

function tableEvidence(v) {
  const committed = v.events.filter((e) => e.type === "seed_committed");
  const [dealt] = v.events.filter((e) => e.type === "deal");
  return {
    game: v.game,
    commitment: dealt.commitment,
    serverSeed: v.server_seed,
    clientSeeds: v.client_seeds.map((s) => s ?? ""),
    seatClientSeeds: v.seat_client_seeds,
    seats: v.seats,
    starter: v.starter,
    handSize: 14,
    hands: v.hands,
    draws: v.draws.map(([seat, tileId, pileLeft]) => ({ seat, tileId, pileLeft })),
    kishpaId: v.kishpa ?? null,
    replacementId: v.replacement ?? null,
    dollsReturned: v.dolls_returned ?? [],
    topDiscard: v.top_discard ?? null,
    precommitment: committed[0]?.commitment ?? "",
    precommitmentEventId: committed[0]?.id ?? "",
    contributions: v.events.filter((e) => e.type === "contribution_accepted").map((e) => ({ seat: e.seat, contribution: e.contribution, eventId: e.id })),
    dealEventId: dealt.id,
    mySeat: 0,
    mySeed: null,
    moves: v.moves.map((m) => ({ seat: m.seat, kind: m.kind, tileIds: m.tile_ids })),
    cardsLeft: v.cards_left ?? null,
    deal: v.deal,
    recordVersion: v.record_version ?? 0,
    botSeats: v.bot_seats ?? [],
    declaredSeats: v.declared_seats ?? [],
    awaitedSeats: v.awaited_seats ?? [],
    autoplaySeats: v.autoplay_seats ?? [],
    awaitedUntilMs: v.awaited_until_ms ?? 0,
    myContribution: v.my_contribution ?? null,
  };
}

test("whole-table transcripts verify, and every tamper is named", async () => {
  const tables = vectors.filter((v) => v.kind === "table");
  assert.ok(tables.some((v) => v.game === "kishpa") && tables.some((v) => v.game === "hand"));
  for (const v of tables) {
    const verdict = await verifyTable(tableEvidence(v));
    assert.ok(verdict.ok, tableSummary(verdict));
    assert.match(tableSummary(verdict), /^table verified \(/);
    if (v.my_contribution) {
      assert.equal(verdict.myContribution, v.my_contribution);
      assert.ok(tableSummary(verdict).includes(`your contribution '${v.my_contribution}'`), tableSummary(verdict));
      assert.ok(tableSummary(verdict).includes("your contribution is in this deal"), tableSummary(verdict));
    }
    if ((v.record_version ?? 0) >= 3) assert.ok(tableSummary(verdict).includes("the seats' marks: 1 house bot (seat 2), 2 awaited"), tableSummary(verdict));
    for (const tamper of v.tampers) {
      const changed = structuredClone(v);
      for (const [path, value] of Object.entries(tamper.set)) setPath(changed, path, value);
      const got = await verifyTable(tableEvidence(changed));
      assert.ok(got.failed.some((f) => f.check === tamper.fails), `${tamper.name}: ${tableSummary(got)}`);
    }
  }
});
