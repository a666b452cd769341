// The replay's fold of a deal's public moves (src/replay.ts, bundled by build.mjs into
// test/dist), on moves written here with the board after each worked out by hand from
// docs/fairness.md "Every public move": the take and undo, the joker release and a Kishpa
// show, which a bots' deal in the browser test may not bring.
import { test } from "node:test";
import assert from "node:assert/strict";
import { boards, cardFace } from "./dist/replay.mjs";

const seen = (b) => ({ hands: b.hands.map((h) => [...h].sort((x, y) => x - y)), discards: b.discards, laid: b.laid.filter((l) => l.ids.length).map((l) => l.ids) });

test("cards are named as the server names them (AS, 10H, QD, J1)", () => {
  assert.deepEqual([0, 9, 10, 13, 38, 51, 52, 104, 105].map(cardFace), ["AS", "10S", "JS", "AH", "KD", "KC", "AS", "J1", "J2"]);
});

test("a take, a meld and an undo: the board is again as before the take", () => {
  const moves = [
    { seat: 0, kind: "take", tileIds: [50] },
    { seat: 0, kind: "meld", tileIds: [0, 1, 2] },
    { seat: 0, kind: "undo", tileIds: [] },
    { seat: 0, kind: "draw", tileIds: [20] },
    { seat: 0, kind: "discard", tileIds: [20] },
    { seat: 1, kind: "undo", tileIds: [] }, // no take to take back: nothing changes
  ];
  const steps = boards([[0, 1, 2], [13, 14]], [50], moves).map(seen);
  assert.deepEqual(steps, [
    { hands: [[0, 1, 2], [13, 14]], discards: [50], laid: [] },
    { hands: [[0, 1, 2, 50], [13, 14]], discards: [], laid: [] },
    { hands: [[50], [13, 14]], discards: [], laid: [[0, 1, 2]] },
    { hands: [[0, 1, 2], [13, 14]], discards: [50], laid: [] },
    { hands: [[0, 1, 2, 20], [13, 14]], discards: [50], laid: [] },
    { hands: [[0, 1, 2], [13, 14]], discards: [50, 20], laid: [] },
    { hands: [[0, 1, 2], [13, 14]], discards: [50, 20], laid: [] },
  ]);
});

test("a discard ends the turn: an undo after it takes nothing back", () => {
  const moves = [
    { seat: 0, kind: "take", tileIds: [50] },
    { seat: 0, kind: "discard", tileIds: [0] },
    { seat: 0, kind: "undo", tileIds: [] },
  ];
  const last = seen(boards([[0, 1], []], [50], moves).at(-1));
  assert.deepEqual(last, { hands: [[1, 50], []], discards: [0], laid: [] });
});

test("a joker released from a meld goes into the hand of the seat that put its card in", () => {
  const moves = [
    { seat: 1, kind: "meld", tileIds: [13, 14, 104] }, // 2 3 of hearts and a joker
    { seat: 0, kind: "draw", tileIds: [15] },
    { seat: 0, kind: "meld", tileIds: [15] }, // the 4 of hearts put in for the joker
    { seat: 0, kind: "release", tileIds: [104] },
    { seat: 0, kind: "discard", tileIds: [104] },
  ];
  const steps = boards([[3], [13, 14, 104, 7]], [], moves).map(seen);
  assert.deepEqual(steps.at(3), { hands: [[3], [7]], discards: [], laid: [[13, 14, 104], [15]] });
  assert.deepEqual(steps.at(4), { hands: [[3, 104], [7]], discards: [], laid: [[13, 14], [15]] });
  assert.deepEqual(steps.at(5), { hands: [[3], [7]], discards: [104], laid: [[13, 14], [15]] });
});

test("Kishpa: the winner's show leaves his tiles in his hand", () => {
  const moves = [
    { seat: 0, kind: "discard", tileIds: [5] },
    { seat: 0, kind: "show", tileIds: [1, 2, 3] },
  ];
  const steps = boards([[1, 2, 3, 5], [40]], [], moves).map(seen);
  assert.deepEqual(steps.at(2), { hands: [[1, 2, 3], [40]], discards: [5], laid: [] });
});
