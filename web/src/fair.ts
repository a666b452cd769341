// The provably-fair deal, recomputed in the browser with WebCrypto (docs/fairness.md,
// games/fair.py, games/kishpa/deal.py): HMAC-SHA256 byte stream, rejection sampling,
// Fisher-Yates, the deal from the starter, the kishpa turned from the pile's top.

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

async function turnKishpa(pile: number[], stream: FairStream): Promise<number> {
  for (;;) {
    const tile = pile.pop();
    if (tile === undefined) throw new Error("the pile is empty");
    if (tile < 104) return tile;
    pile.splice(pile.length ? await stream.randbelow(pile.length) : 0, 0, tile);
  }
}

export interface Deal {
  deck: number[];
  hands: number[][];
  pile: number[]; // top at the end
  kishpa: number;
  replacement: number | null;
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
  const kishpa = await turnKishpa(pile, stream);
  const joker = jokerOf(faceOf(kishpa));
  const held = hands.some((hand) => hand.some((t) => faceOf(t) === joker));
  const replacement = held ? null : await turnKishpa(pile, stream);
  return { deck, hands, pile, kishpa, replacement };
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
