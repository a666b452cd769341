// The browser's fairness code (src/fair.ts, bundled by build.mjs into test/dist) against the
// test vectors of docs/fairness.md: an independent source, written for outsiders.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dealRound, shuffledDeck, commitmentOf, clientSeedsDigest, hexToBytes, bytesToHex } from "./dist/fair.mjs";

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
