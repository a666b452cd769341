// The provably-fair deal, recomputed in the browser with WebCrypto (docs/fairness.md,
// games/fair.py, games/kishpa/deal.py): HMAC-SHA256 byte stream, rejection sampling,
// Fisher-Yates, the deal from the starter, the kishpa turned from the pile's top; and the
// whole-table check of an ended deal's record (every hand, every draw, the commitment order).

const enc = new TextEncoder();
export const DECK_TAG = "kishpa/fair/v1/deck";
export const KISHPA_TAG = "kishpa/fair/v1/kishpa";
export const TILE_COUNT = 106;
const COLOURS = "RBYK";

export function hexToBytes(hex: string): Uint8Array {
  const clean = hex.trim().toLowerCase();
  if (clean.length % 2 !== 0 || /[^0-9a-f]/.test(clean)) throw new Error("malformed hex");
  const out = new Uint8Array(clean.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export function bytesToHex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

async function sha256(data: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", data as BufferSource));
}

/** sha256 of the canonical JSON of the seeds ("" on the wire means none: null). */
export async function clientSeedsDigest(seeds: readonly (string | null)[]): Promise<Uint8Array> {
  return sha256(enc.encode(JSON.stringify(seeds.map((s) => (s === "" ? null : s)))));
}

export async function commitmentOf(seed: Uint8Array): Promise<string> {
  return bytesToHex(await sha256(seed));
}

/** The HMAC-SHA256 byte stream of one purpose (tag). */
export class FairStream {
  private buffer: number[] = [];
  private counter = 0n;
  private constructor(
    private readonly key: CryptoKey,
    private readonly prefix: Uint8Array,
  ) {}

  static async open(seed: Uint8Array, seeds: readonly (string | null)[], tag: string): Promise<FairStream> {
    if (seed.length !== 80) throw new Error("a server seed must be exactly 80 bytes");
    const key = await crypto.subtle.importKey(
      "raw",
      seed as BufferSource,
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const digest = await clientSeedsDigest(seeds);
    const tagBytes = enc.encode(tag);
    const prefix = new Uint8Array(tagBytes.length + 1 + digest.length);
    prefix.set(tagBytes, 0);
    prefix.set(digest, tagBytes.length + 1);
    return new FairStream(key, prefix);
  }

  async read(count: number): Promise<number[]> {
    while (this.buffer.length < count) {
      const message = new Uint8Array(this.prefix.length + 8);
      message.set(this.prefix, 0);
      new DataView(message.buffer).setBigUint64(this.prefix.length, this.counter);
      this.counter += 1n;
      const block = new Uint8Array(await crypto.subtle.sign("HMAC", this.key, message as BufferSource));
      this.buffer.push(...block);
    }
    return this.buffer.splice(0, count);
  }

  async randbelow(n: number): Promise<number> {
    if (n <= 0) throw new Error("randbelow needs n >= 1");
    if (n === 1) return 0;
    const bits = (n - 1).toString(2).length;
    const width = Math.ceil(bits / 8);
    const mask = bits >= 31 ? 0x7fffffff : (1 << bits) - 1;
    for (;;) {
      let value = 0;
      for (const byte of await this.read(width)) value = value * 256 + byte;
      value = value & mask;
      if (value < n) return value;
    }
  }
}

export async function shuffledDeck(seed: Uint8Array, seeds: readonly (string | null)[], n = TILE_COUNT): Promise<number[]> {
  const deck = Array.from({ length: n }, (_, i) => i);
  const stream = await FairStream.open(seed, seeds, DECK_TAG);
  for (let i = n - 1; i > 0; i--) {
    const j = await stream.randbelow(i + 1);
    [deck[i], deck[j]] = [deck[j]!, deck[i]!];
  }
  return deck;
}

/** "R7", "K13", "DR", "DK" of a tile id. */
export function faceOf(id: number): string {
  if (id === 104) return "DR";
  if (id === 105) return "DK";
  const index = id % 52;
  return `${COLOURS[Math.floor(index / 13)]}${(index % 13) + 1}`;
}

function jokerOf(kishpa: string): string {
  const number = parseInt(kishpa.slice(1), 10);
  return `${kishpa[0]}${(number % 13) + 1}`;
}

async function turnKishpa(pile: number[], stream: FairStream, dolls: number[] = []): Promise<number> {
  for (;;) {
    const tile = pile.pop();
    if (tile === undefined) throw new Error("the pile is empty");
    if (tile < 104) return tile;
    dolls.push(tile);
    pile.splice(pile.length ? await stream.randbelow(pile.length) : 0, 0, tile);
  }
}

export interface Deal {
  deck: number[];
  hands: number[][];
  pile: number[]; // top at the end
  kishpa: number;
  replacement: number | null;
  dollsReturned: number[]; // at the start, then during the replacement
}

export async function dealRound(
  seed: Uint8Array,
  seeds: readonly (string | null)[],
  seats: number,
  starter: number,
  handSize = 14,
): Promise<Deal> {
  const deck = await shuffledDeck(seed, seeds);
  const hands: number[][] = Array.from({ length: seats }, () => []);
  let cursor = 0;
  for (let k = 0; k < seats; k++) {
    const seat = (starter + k) % seats;
    const size = handSize + (seat === starter ? 1 : 0);
    hands[seat] = deck.slice(cursor, cursor + size);
    cursor += size;
  }
  const pile = deck.slice(cursor).reverse();
  const stream = await FairStream.open(seed, seeds, KISHPA_TAG);
  const dollsReturned: number[] = [];
  const kishpa = await turnKishpa(pile, stream, dollsReturned);
  const joker = jokerOf(faceOf(kishpa));
  const held = hands.some((hand) => hand.some((t) => faceOf(t) === joker));
  const replacement = held ? null : await turnKishpa(pile, stream, dollsReturned);
  return { deck, hands, pile, kishpa, replacement, dollsReturned };
}

export interface Evidence {
  commitment: string;
  serverSeed: string;
  clientSeeds: string[];
  mySeed: string;
  seats: number;
  starter: number;
  mySeat: number;
  dealt: number[];
  kishpaFace: string; // turned when the round started (before any replacement)
  replacementFace: string; // "" when the kishpa was not replaced
  pileDraws: { tileId: number; pileLeft: number }[];
  handSize: number;
}

export interface Verdict {
  ok: boolean;
  passed: string[];
  failed: string[];
}

/** Every check of docs/fairness.md "Verifying a round" a player can make on his own. */
export async function verifyRound(e: Evidence): Promise<Verdict> {
  const passed: string[] = [];
  const failed: string[] = [];
  const check = (ok: boolean, name: string) => (ok ? passed : failed).push(name);
  let seed: Uint8Array;
  try {
    seed = hexToBytes(e.serverSeed);
    if (seed.length !== 80) throw new Error("length");
  } catch {
    return { ok: false, passed, failed: ["SEED_MALFORMED"] };
  }
  check((await commitmentOf(seed)) === e.commitment.trim().toLowerCase(), "COMMITMENT");
  check((e.clientSeeds[e.mySeat] ?? "") === e.mySeed, "CLIENT_SEED");
  const deal = await dealRound(seed, e.clientSeeds, e.seats, e.starter, e.handSize);
  const mine = [...(deal.hands[e.mySeat] ?? [])].sort((a, b) => a - b);
  const got = [...e.dealt].sort((a, b) => a - b);
  check(mine.length === got.length && mine.every((t, i) => t === got[i]), "DEALT_TILES");
  check(faceOf(deal.kishpa) === e.kishpaFace, "KISHPA");
  const replacement = deal.replacement === null ? "" : faceOf(deal.replacement);
  check(replacement === e.replacementFace, "REPLACEMENT");
  check(e.pileDraws.every((d) => deal.pile[d.pileLeft] === d.tileId), "PILE_DRAWS");
  return { ok: failed.length === 0, passed, failed };
}

// ---- Hand (Rummy 51): one card at a time from the starter, the turned card, the stock ------

export interface HandDeal {
  hands: number[][];
  topDiscard: number;
  stock: number[]; // top first: a draw leaving k cards took stock[stock.length - 1 - k]
}

export async function dealHand(
  seed: Uint8Array,
  seeds: readonly (string | null)[],
  seats: number,
  starter: number,
  handSize = 14,
): Promise<HandDeal> {
  const deck = await shuffledDeck(seed, seeds);
  const hands: number[][] = Array.from({ length: seats }, () => []);
  let cursor = 0;
  for (let r = 0; r < handSize; r++) {
    for (let k = 0; k < seats; k++) hands[(starter + k) % seats]!.push(deck[cursor++]!);
  }
  hands[starter]!.push(deck[cursor++]!);
  return { hands, topDiscard: deck[cursor]!, stock: deck.slice(cursor + 1) };
}

// ---- the whole table (docs/fairness.md "Verifying a deal: the whole table") -------------

/** An ended deal's record as plain data (RoundRecord, plus what this page saw itself). */
export interface TableEvidence {
  game: "kishpa" | "hand";
  commitment: string; // the deal's (round_started / deal_started)
  serverSeed: string;
  clientSeeds: string[]; // revealed, "" = none
  seatClientSeeds: string[]; // sit-down seeds, "" = none
  seats: number;
  starter: number;
  handSize: number;
  hands: number[][] | null; // every seat's dealt ids (null: an older server's record)
  draws: { seat: number; tileId: number; pileLeft: number }[];
  kishpaId: number | null;
  replacementId: number | null;
  dollsReturned: number[];
  topDiscard: number | null;
  precommitment: string;
  precommitmentEventId: string;
  contributions: { seat: number; contribution: string; eventId: string }[];
  dealEventId: string;
  mySeat: number;
  mySeed: string | null; // what this player handed in for this deal (null: not known)
  moves: SeatMove[] | null; // every public move, stream order (null: not known, not checked)
  cardsLeft?: number[][] | null; // Hand: each seat's cards at the deal's end, as shown (null: not checked)
  // The deal's seats (record version 3; lower: not checked).
  deal?: number; // the deal's number (the lone-creator rule holds on deal 1 only)
  recordVersion?: number;
  botSeats?: number[];
  declaredSeats?: number[];
  awaitedSeats?: number[];
  autoplaySeats?: number[];
  awaitedUntilMs?: number; // the contribution deadline the deal waited until (0: it did not wait)
  myContribution?: string | null; // what this page contributed to the deal (null: not known)
  iDeclared?: boolean | null; // whether this page declared at sit-down (null: not known)
}

/** The record version from which a deal names its seats (bots, declared, awaited). */
export const RECORD_VERSION_SEATS = 3;
/** How much earlier than its contribution deadline a deal with a silent awaited seat may be
 * stamped (the deadline is on the table service's clock, stream ids on Redis's). */
export const DEADLINE_SLACK_MS = 1000;

/** A public move that took tiles into a seat's hand or out of it, or showed them
 * (RoundRecord.moves): draw, take, discard, meld, release, show or undo. */
export interface SeatMove {
  seat: number;
  kind: string;
  tileIds: number[];
}

export interface TableVerdict {
  ok: boolean;
  wholeTable: boolean;
  contributed: boolean;
  passed: string[];
  failed: { check: string; message: string }[];
  myContribution?: string; // this seat's contribution, when it is in the deal
  botsOnly?: boolean; // every other seat is a house bot (record version 3)
  notes?: string[]; // whose contributions are in the deal, seats not waited for and why
}

function order(eventId: string): [number, number] {
  const m = /^(\d+)-(\d+)$/.exec(eventId);
  return m ? [Number(m[1]), Number(m[2])] : [-1, -1];
}

function before(a: [number, number], b: [number, number]): boolean {
  return a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);
}

function sameSet(a: readonly number[], b: readonly number[]): boolean {
  const x = [...a].sort((p, q) => p - q);
  const y = [...b].sort((p, q) => p - q);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/** Every check of the whole table; the failure names are docs/fairness.md's. */
export async function verifyTable(e: TableEvidence): Promise<TableVerdict> {
  const passed: string[] = [];
  const failed: { check: string; message: string }[] = [];
  const fail = (check: string, message: string) => failed.push({ check, message });
  const notes: string[] = [];
  let mine = "";
  const verdict = (): TableVerdict => ({
    ok: failed.length === 0,
    wholeTable: e.hands !== null,
    contributed: e.contributions.length > 0,
    passed,
    failed,
    myContribution: mine,
    botsOnly: botsOnly(e),
    notes,
  });
  if (!e.serverSeed.trim()) {
    fail("SEED_NOT_REVEALED", "the server seed was not revealed");
    return verdict();
  }
  let seed: Uint8Array;
  try {
    seed = hexToBytes(e.serverSeed);
    if (seed.length !== 80) throw new Error("length");
  } catch {
    fail("SEED_MALFORMED", "the revealed seed is not 80 bytes of hex");
    return verdict();
  }
  const commitment = e.commitment.trim().toLowerCase();
  if ((await commitmentOf(seed)) !== commitment) fail("COMMITMENT_MISMATCH", "sha256(seed) is not the commitment");
  else passed.push("commitment");
  if (e.seats < 2 || e.seats > 4 || e.starter < 0 || e.starter >= e.seats || e.clientSeeds.length !== e.seats) {
    fail("RECORD_INCOMPLETE", "seats, starter and client seeds do not make a deal");
    return verdict();
  }
  const seeds = e.clientSeeds.map((s) => (s === "" ? null : s));
  if (e.mySeed !== null && e.mySeat >= 0) {
    if ((seeds[e.mySeat] ?? null) !== (e.mySeed || null)) fail("CLIENT_SEED_MISMATCH", "your seat's seed is not the one you handed in");
    else passed.push("your client seed");
  }
  // The commitment order.
  const n = failed.length;
  const pre = e.precommitment.trim().toLowerCase();
  const committedAt = order(e.precommitmentEventId);
  const dealtAt = order(e.dealEventId);
  for (const id of [e.precommitmentEventId, e.dealEventId, ...e.contributions.map((c) => c.eventId)]) {
    if (id && order(id)[0] < 0) fail("COMMITMENT_LATE", `'${id}' is not a stream id (<ms>-<seq>)`);
  }
  if (!pre) fail("COMMITMENT_LATE", "no commitment to this deal was published before it");
  else if (pre !== commitment) fail("COMMITMENT_LATE", "the deal used another commitment than the one published in advance");
  if (pre && e.precommitmentEventId && e.dealEventId && !before(committedAt, dealtAt)) fail("COMMITMENT_LATE", "the commitment came after the deal");
  for (const c of e.contributions) {
    const at = order(c.eventId);
    if (e.precommitmentEventId && !before(committedAt, at)) fail("COMMITMENT_LATE", `seat ${c.seat + 1}'s contribution came before the commitment`);
    if (e.dealEventId && !before(at, dealtAt)) fail("CONTRIBUTION_MISMATCH", `seat ${c.seat + 1}'s contribution came after the deal`);
  }
  if (failed.length === n) passed.push(e.contributions.length ? `commitment before ${e.contributions.length} contribution${e.contributions.length === 1 ? "" : "s"}` : "commitment before the deal");
  const m = failed.length;
  for (let seat = 0; seat < e.seats; seat++) {
    const given = e.contributions.find((c) => c.seat === seat);
    const want = given ? given.contribution || null : (e.seatClientSeeds[seat] ?? "") || null;
    if (seeds[seat] !== want) fail("CONTRIBUTION_MISMATCH", `seat ${seat + 1}'s seed is not ${given ? "its contribution" : "its default"}`);
  }
  if (failed.length === m) passed.push("every seat's seed");
  mine = checkMyContribution(e, seeds, fail, passed, notes);
  checkSeats(e, fail, passed, notes);
  if (e.hands === null) {
    fail("RECORD_INCOMPLETE", "the record has no hands: the whole table cannot be checked");
    return verdict();
  }
  let expected: number[][];
  let tileAt: (left: number) => number | undefined;
  let start: number;
  if (e.game === "hand") {
    const d = await dealHand(seed, seeds, e.seats, e.starter, e.handSize);
    expected = d.hands;
    start = d.stock.length;
    tileAt = (left) => d.stock[d.stock.length - 1 - left];
    if (e.topDiscard === null) fail("RECORD_INCOMPLETE", "the record has no turned card");
    // Every Hand deal ends with deal_ended (the cards left, the penalties' basis).
    if ((e.recordVersion ?? 0) >= RECORD_VERSION_SEATS && !e.cardsLeft) fail("RECORD_INCOMPLETE", "the record does not show the cards left at the end");
    else if (e.topDiscard !== d.topDiscard) fail("TOP_DISCARD_MISMATCH", `the seeds turn card ${d.topDiscard}, the table ${e.topDiscard}`);
    else passed.push("turned card");
  } else {
    const d = await dealRound(seed, seeds, e.seats, e.starter, e.handSize);
    expected = d.hands;
    start = d.pile.length;
    tileAt = (left) => d.pile[left];
    const k = failed.length;
    if (e.kishpaId === null) fail("RECORD_INCOMPLETE", "the record has no kishpa tile id");
    else if (e.kishpaId !== d.kishpa) fail("KISHPA_MISMATCH", `the seeds turn ${faceOf(d.kishpa)}, the table ${faceOf(e.kishpaId)}`);
    if (e.replacementId !== d.replacement) fail("REPLACEMENT_MISMATCH", `the seeds give replacement ${d.replacement === null ? "none" : faceOf(d.replacement)}`);
    if (e.dollsReturned.join(",") !== d.dollsReturned.join(",")) fail("DOLLS_MISMATCH", `the seeds turn back dolls [${d.dollsReturned.map(faceOf).join(" ")}]`);
    if (failed.length === k) passed.push("kishpa, replacement and dolls");
  }
  const dealtCheck = e.game === "hand" ? "DEALT_CARDS_MISMATCH" : "DEALT_TILES_MISMATCH";
  let handsOk = true;
  for (let seat = 0; seat < e.seats; seat++) {
    const got = e.hands[seat];
    if (!got) {
      handsOk = false;
      fail("RECORD_INCOMPLETE", `no dealt hand for seat ${seat + 1}`);
    } else if (!sameSet(got, expected[seat]!)) {
      handsOk = false;
      fail(dealtCheck, `seat ${seat + 1} was not dealt what the seeds deal it`);
    }
  }
  if (handsOk) passed.push(`all ${e.seats} hands`);
  const d0 = failed.length;
  let left = start - 1;
  e.draws.forEach((draw, i) => {
    if (draw.pileLeft !== left) fail("DRAW_MISMATCH", `draw ${i + 1} (seat ${draw.seat + 1}) left ${draw.pileLeft}, not ${left}`);
    left = draw.pileLeft - 1;
    if (draw.tileId < 0) fail("RECORD_INCOMPLETE", `draw ${i + 1} has no tile`);
    else if (tileAt(draw.pileLeft) !== draw.tileId) fail("DRAW_MISMATCH", `draw ${i + 1} (seat ${draw.seat + 1}) is not the tile the seeds put there`);
  });
  if (failed.length === d0) passed.push(`all ${e.draws.length} draws`);
  checkMoves(e, expected, e.game === "hand" && e.topDiscard !== null ? [e.topDiscard] : [], e.game === "hand" ? String : faceOf, fail, passed);
  return verdict();
}

/** Every public move against what its seat held (docs/fairness.md "Every public move"): each
 * tile a seat discarded, melded or showed is one it was dealt, drew or took and still held;
 * a tile taken from the discards was the top one; the moves' draws are the record's. */
function checkMoves(
  e: TableEvidence,
  dealt: number[][],
  discards: number[],
  text: (id: number) => string,
  fail: (check: string, message: string) => void,
  passed: string[],
): void {
  if (e.moves === null) return;
  if (e.moves.length === 0) {
    fail("RECORD_INCOMPLETE", "the record lists no moves");
    return;
  }
  let bad = false;
  const held = dealt.map((h) => new Set(h));
  let pile = [...discards];
  let melded = new Set<number>(); // Hand: the cards on the table, where a released joker comes from
  const undo = new Map<number, [Set<number>, number[], Set<number>]>();
  let drawn = 0;
  const no = (id: number) => {
    try {
      return text(id);
    } catch {
      return `#${id}`;
    }
  };
  e.moves.forEach((m, i) => {
    const where = `move ${i + 1} (seat ${m.seat + 1}, ${m.kind})`;
    const miss = (what: string) => {
      bad = true;
      fail("MOVE_MISMATCH", `${where}: ${what}`);
    };
    const hand = held[m.seat];
    if (!hand) return miss("no such seat");
    if (m.kind === "draw") {
      const want = e.draws[drawn++];
      if (!want || want.seat !== m.seat || want.tileId !== m.tileIds[0]) miss("not the record's next draw");
      m.tileIds.forEach((t) => hand.add(t));
    } else if (m.kind === "take") {
      undo.set(m.seat, [new Set(hand), [...pile], new Set(melded)]);
      if (m.tileIds.length !== 1 || pile[pile.length - 1] !== m.tileIds[0]) miss(`took ${m.tileIds.map(no).join(" ")}, not the top discard`);
      else pile.pop();
      m.tileIds.forEach((t) => hand.add(t));
    } else if (m.kind === "discard" || m.kind === "meld" || m.kind === "show") {
      const foreign = m.tileIds.filter((t) => !hand.has(t));
      if (foreign.length) miss(`${foreign.map(no).join(" ")} (id ${foreign.join(", ")}) is a tile the seat was neither dealt nor drew, or no longer held`);
      if (m.kind !== "show") m.tileIds.forEach((t) => hand.delete(t));
      if (m.kind === "meld") m.tileIds.forEach((t) => melded.add(t));
      if (m.kind === "discard") {
        pile.push(...m.tileIds);
        undo.delete(m.seat); // a discard ends the turn: nothing to take back
      }
    } else if (m.kind === "release") {
      const loose = m.tileIds.filter((t) => !melded.has(t));
      if (loose.length) miss(`released ${loose.map(no).join(" ")}, which no meld on the table held`);
      m.tileIds.forEach((t) => {
        melded.delete(t);
        hand.add(t);
      });
    } else if (m.kind === "undo") {
      const back = undo.get(m.seat);
      if (!back) return miss("a turn taken back that did not begin from the discards");
      undo.delete(m.seat);
      held[m.seat] = new Set(back[0]);
      pile = back[1];
      melded = back[2];
    } else miss(`unknown move kind ${m.kind}`);
  });
  if (drawn < e.draws.length) {
    bad = true;
    fail("MOVE_MISMATCH", "the record has draws its moves do not show");
  }
  (e.cardsLeft ?? []).forEach((shown, seat) => {
    const kept = [...(held[seat] ?? [])];
    if (!sameSet(shown, kept)) {
      bad = true;
      fail("MOVE_MISMATCH", `seat ${seat + 1} was shown with ${shown.map(no).join(" ")} left at the end; its moves leave it ${kept.map(no).join(" ")}`);
    }
  });
  if (!bad) passed.push(`all ${e.moves.length} moves`);
}

const count = (n: number, thing: string) => `${n} ${thing}${n === 1 ? "" : "s"}`;
const seatsText = (seats: readonly number[]) => seats.map((s) => s + 1).join(", ");
const short = (text: string) => JSON.stringify(text.length <= 12 ? text : `${text.slice(0, 12)}…`).replace(/^"|"$/g, "'");

function botsOnly(e: TableEvidence): boolean {
  if ((e.recordVersion ?? 0) < RECORD_VERSION_SEATS) return false;
  const bots = new Set(e.botSeats ?? []);
  for (let seat = 0; seat < e.seats; seat++) if (seat !== e.mySeat && !bots.has(seat)) return false;
  return bots.size === e.seats - (e.mySeat >= 0 && e.mySeat < e.seats ? 1 : 0);
}

/** This page's own contribution is its seat's entry: named when it is in the deal, failed
 * (CONTRIBUTION_MISMATCH) when one was accepted and the deal left it out. */
function checkMyContribution(
  e: TableEvidence,
  seeds: (string | null)[],
  fail: (check: string, message: string) => void,
  passed: string[],
  notes: string[],
): string {
  const inDeal = e.contributions.find((c) => c.seat === e.mySeat)?.contribution ?? "";
  const known = e.myContribution ?? null;
  if (known !== null) {
    if (inDeal !== known || seeds[e.mySeat] !== known) {
      fail("CONTRIBUTION_MISMATCH", `your contribution ${short(known)} was accepted, but the deal mixed another seed for your seat`);
      return "";
    }
    passed.push(`your contribution ${short(inDeal)}`);
  }
  if (!inDeal) return "";
  const others = e.contributions.length - 1;
  notes.push(`your contribution is in this deal${others ? ` with ${count(others, "other contribution")}` : ""}`);
  return inDeal;
}

/** What a version 3 record says of the deal's seats holds together (docs/fairness.md "The
 * deal's seats"): bots never contribute and are never declared or awaited; every awaited seat
 * declared (or is a creator alone with bots on the first deal); every declared seat not on
 * auto-play was awaited; this page's own seat is as it knows it. */
function checkSeats(e: TableEvidence, fail: (check: string, message: string) => void, passed: string[], notes: string[]): void {
  if ((e.recordVersion ?? 0) < RECORD_VERSION_SEATS) return;
  let bad = false;
  const miss = (message: string) => {
    bad = true;
    fail("SEATS_MISMATCH", message);
  };
  const lists: [string, number[]][] = [
    ["bot", e.botSeats ?? []],
    ["declared", e.declaredSeats ?? []],
    ["awaited", e.awaitedSeats ?? []],
    ["auto-play", e.autoplaySeats ?? []],
  ];
  for (const [name, seats] of lists) {
    if (new Set(seats).size !== seats.length || seats.some((s) => s < 0 || s >= e.seats)) miss(`the ${name} seats [${seats.join(", ")}] are not seats of this ${e.seats}-seat deal`);
  }
  const bots = new Set(e.botSeats ?? []);
  for (const [name, seats] of lists.slice(1)) for (const s of [...seats].sort((a, b) => a - b)) if (bots.has(s)) miss(`seat ${s + 1} is marked both a house bot and ${name}`);
  for (const c of e.contributions) if (bots.has(c.seat)) miss(`seat ${c.seat + 1} is marked a house bot but contributed: bots never do`);
  if (bots.has(e.mySeat)) miss(`the record marks your seat (${e.mySeat + 1}) a house bot`);
  const humans = Array.from({ length: e.seats }, (_, s) => s).filter((s) => !bots.has(s));
  const lone = humans.length === 1 && (e.deal ?? 0) <= 1;
  const declared = new Set(e.declaredSeats ?? []);
  const autoplay = new Set(e.autoplaySeats ?? []);
  const awaited = e.awaitedSeats ?? [];
  for (const s of awaited) {
    if (autoplay.has(s)) miss(`seat ${s + 1} was awaited while on auto-play`);
    else if (!declared.has(s) && !lone) miss(`seat ${s + 1} was awaited but never declared it contributes`);
  }
  for (const s of [...declared].sort((a, b) => a - b)) {
    if (awaited.includes(s)) continue;
    if (autoplay.has(s)) notes.push(`declared seat ${s + 1} was not waited for: it was on auto-play`);
    else miss(`declared seat ${s + 1} was not waited for`);
  }
  if (e.iDeclared && !declared.has(e.mySeat)) miss("you declared that your client contributes; the record says your seat did not");
  if (bad) return;
  const given = new Set(e.contributions.map((c) => c.seat));
  const silent = awaited.filter((s) => !given.has(s));
  const until = e.awaitedUntilMs ?? 0;
  const dealtMs = order(e.dealEventId)[0];
  if (silent.length && !until) miss(`${silent.every((s) => declared.has(s)) ? "declared seat" : "seat"} ${seatsText(silent)} was not waited for: dealt without its contribution and without a contribution deadline`);
  else if (silent.length && dealtMs >= 0 && dealtMs < until - DEADLINE_SLACK_MS) miss(`dealt at ${dealtMs} ms, before its contribution deadline (${until} ms), without seat ${seatsText(silent)}'s contribution`);
  else if (silent.length) notes.push(`awaited seat ${seatsText(silent)} sent nothing: dealt at the deadline with its default`);
  if (bad) return;
  const sorted = [...bots].sort((a, b) => a - b);
  passed.push(`the seats' marks: ${count(bots.size, "house bot")}${bots.size ? ` (seat ${seatsText(sorted)})` : ""}, ${awaited.length} awaited`);
}

/** "table verified (…)" or "table NOT verified: …" (docs/fairness.md). */
export function tableSummary(v: TableVerdict): string {
  const scope = v.wholeTable ? "table" : "deal";
  if (!v.ok) return `${scope} NOT verified: ${v.failed.map((f) => `${f.check}: ${f.message}`).join("; ")}`;
  const notes = [...(v.notes ?? [])];
  if (v.wholeTable && !v.contributed) notes.push(`${v.botsOnly ? "bots only, " : ""}no contribution: the server alone chose this deal`);
  return `${scope} verified (${v.passed.join(", ")}${notes.map((n) => `; ${n}`).join("")})`;
}

/** The evidence in a RoundRecord as the generated TypeScript (or its JSON) has it. */
export interface RecordLike {
  game?: number | string;
  shuffleCommitment: string;
  serverSeed: string;
  clientSeeds: readonly string[];
  seatClientSeeds: readonly string[];
  playerIds: readonly string[];
  starterSeat: number;
  mySeat: number;
  handSize: number;
  dealtHands: readonly { seat: number; tileIds: readonly number[] }[];
  draws: readonly { seat: number; tileId: number; pileLeft: number }[];
  kishpaTileId?: number;
  replacementKishpaTileId?: number;
  dollsReturnedIds: readonly number[];
  topDiscardCardId?: number;
  precommitment: string;
  precommitmentEventId: string;
  contributions: readonly { seat: number; contribution: string; eventId: string }[];
  dealEventId: string;
  moves?: readonly { seat: number; kind: string; tileIds: readonly number[] }[];
  cardsLeft?: readonly { seat: number; tileIds: readonly number[] }[];
  round?: number;
  recordVersion?: number;
  botSeats?: readonly number[];
  declaredSeats?: readonly number[];
  awaitedSeats?: readonly number[];
  autoplaySeats?: readonly number[];
  awaitedUntil?: { seconds: bigint | number | string; nanos: number };
}

/** What this page knows of its own seat in a deal, beyond its seed. */
export interface OwnSeat {
  myContribution?: string | null;
  iDeclared?: boolean | null;
}

function cardsLeftBySeat(left: readonly { seat: number; tileIds: readonly number[] }[], seats: number): number[][] {
  const out: number[][] = Array.from({ length: seats }, () => []);
  for (const d of left) if (d.seat >= 0 && d.seat < seats) out[d.seat] = [...d.tileIds];
  return out;
}

export function evidenceFromRecord(r: RecordLike, mySeed: string | null, own: OwnSeat = {}): TableEvidence {
  const seats = r.playerIds.length;
  const hand = r.game === 2 || r.game === "GAME_HAND";
  const hands: number[][] | null = r.dealtHands.length ? Array.from({ length: seats }, () => []) : null;
  for (const d of r.dealtHands) if (hands && d.seat >= 0 && d.seat < seats) hands[d.seat] = [...d.tileIds];
  return {
    game: hand ? "hand" : "kishpa",
    commitment: r.shuffleCommitment,
    serverSeed: r.serverSeed,
    clientSeeds: [...r.clientSeeds],
    seatClientSeeds: [...r.seatClientSeeds],
    seats,
    starter: r.starterSeat,
    handSize: r.handSize || 14,
    hands,
    draws: r.draws.map((d) => ({ seat: d.seat, tileId: d.tileId, pileLeft: d.pileLeft })),
    kishpaId: r.kishpaTileId ?? null,
    replacementId: r.replacementKishpaTileId ?? null,
    dollsReturned: [...r.dollsReturnedIds],
    topDiscard: r.topDiscardCardId ?? null,
    precommitment: r.precommitment,
    precommitmentEventId: r.precommitmentEventId,
    contributions: r.contributions.map((c) => ({ seat: c.seat, contribution: c.contribution, eventId: c.eventId })),
    dealEventId: r.dealEventId,
    mySeat: r.mySeat,
    // A seat's entry is its contribution, else its sit-down seed.
    mySeed: own.myContribution ?? mySeed,
    // Every deal has moves; a record with hands but none left them out.
    moves: hands ? (r.moves ?? []).map((m) => ({ seat: m.seat, kind: m.kind, tileIds: [...m.tileIds] })) : null,
    cardsLeft: r.cardsLeft?.length ? cardsLeftBySeat(r.cardsLeft, seats) : null,
    deal: r.round ?? 0,
    recordVersion: r.recordVersion ?? 0,
    botSeats: [...(r.botSeats ?? [])],
    declaredSeats: [...(r.declaredSeats ?? [])],
    awaitedSeats: [...(r.awaitedSeats ?? [])],
    autoplaySeats: [...(r.autoplaySeats ?? [])],
    awaitedUntilMs: r.awaitedUntil ? Number(r.awaitedUntil.seconds) * 1000 + Math.floor((r.awaitedUntil.nanos ?? 0) / 1e6) : 0,
    myContribution: own.myContribution ?? null,
    iDeclared: own.iDeclared ?? null,
  };
}
