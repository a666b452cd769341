// Hand's card logic in the browser (src/hand.ts, bundled by build.mjs into test/dist): meld
// values for the 51 opening, the order picked cards are laid in, the suggested discard.
// Expected values are worked out by hand from the rules (docs/rules/hand.md): ace 11, or 1 at
// the low end of a run; J Q K 10; a joker counts as the card it stands for.
import { test } from "node:test";
import assert from "node:assert/strict";
import { arrangeCards, meldValue, layOrder, suggestedDiscard } from "./dist/hand.mjs";

test("runs count each place; a low ace is 1, a high ace 11", () => {
  assert.equal(meldValue(["AS", "2S", "3S"]), 1 + 2 + 3);
  assert.equal(meldValue(["QH", "KH", "AH"]), 10 + 10 + 11);
  assert.equal(meldValue(["9D", "10D", "JD", "QD"]), 9 + 10 + 10 + 10);
});

test("sets count the rank's value for every card, an ace 11", () => {
  assert.equal(meldValue(["10S", "10H", "10D"]), 30);
  assert.equal(meldValue(["AS", "AH", "AD", "AC"]), 44);
  assert.equal(meldValue(["KS", "KH", "J1"]), 30);
});

test("a joker counts as the card it stands for in a run", () => {
  assert.equal(meldValue(["5C", "J1", "7C"]), 5 + 6 + 7);
  assert.equal(meldValue(["J2", "8H", "9H"]), 7 + 8 + 9);
});

test("no meld, no value", () => {
  assert.equal(meldValue(["5C", "6C"]), 0); // too short
  assert.equal(meldValue(["5C", "6H", "7C"]), 0); // two suits
  assert.equal(meldValue(["5C", "5C", "5H"]), 0); // a suit twice in a set
  assert.equal(meldValue(["KS", "AS", "2S"]), 0); // the ace is never in the middle
  assert.equal(meldValue(["5C", "7C", "8C"]), 0); // a gap
});

test("picked cards are laid low to high with jokers in the gaps", () => {
  const faces = (cards) => layOrder(cards).map((c) => c.face);
  assert.deepEqual(faces([{ id: 1, face: "7C" }, { id: 2, face: "J1" }, { id: 3, face: "5C" }]), ["5C", "J1", "7C"]);
  assert.deepEqual(faces([{ id: 1, face: "AS" }, { id: 2, face: "KS" }, { id: 3, face: "QS" }]), ["QS", "KS", "AS"]);
  assert.deepEqual(faces([{ id: 1, face: "9H" }, { id: 2, face: "8H" }, { id: 3, face: "J2" }]), ["8H", "9H", "J2"]);
  assert.deepEqual(faces([{ id: 1, face: "KD" }, { id: 2, face: "QD" }, { id: 3, face: "J2" }]), ["QD", "KD", "J2"]);
});

test("the suggested discard is the costliest loose card, never a joker", () => {
  const loose = [{ id: 1, face: "4H" }, { id: 2, face: "J1" }, { id: 3, face: "AS" }, { id: 4, face: "KD" }];
  assert.equal(suggestedDiscard(loose, loose).face, "AS"); // 11 left in hand
  assert.equal(suggestedDiscard([], [{ id: 5, face: "J2" }, { id: 6, face: "3C" }]).face, "3C");
});

test("an arranged rack: the melds in laying order, then by suit (spades, hearts, clubs, diamonds) and rank, jokers last", () => {
  const card = (id, face) => ({ id, face });
  const rack = [card(1, "KD"), card(2, "J1"), card(3, "5C"), card(4, "7H"), card(5, "6H"), card(6, "5H"), card(7, "AS"), card(8, "2C"), card(9, "QS")];
  const melds = [[card(4, "7H"), card(6, "5H"), card(5, "6H")]];
  const faces = arrangeCards(rack, melds).map((c) => c.face);
  assert.deepEqual(faces, ["5H", "6H", "7H", "AS", "QS", "2C", "5C", "KD", "J1"]);
  // A meld whose cards are not all in the rack (an old hint) is not pulled forward.
  const stale = arrangeCards(rack, [[card(4, "7H"), card(10, "8H"), card(11, "9H")]]).map((c) => c.face);
  assert.deepEqual(stale, ["AS", "QS", "5H", "6H", "7H", "2C", "5C", "KD", "J1"]);
});
