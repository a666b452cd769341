// Hand (Rummy 51) in the browser: what the table screen needs to know of its cards — values
// for the opening count, a picked set of cards put in the order a run is laid — pure, no DOM.
// The server checks every move; these only help the player before he sends one.

export const OPENING_POINTS = 51;

const RANK: Record<string, number> = { A: 1, J: 11, Q: 12, K: 13 };

export const isJoker = (face: string): boolean => /^J\d$/.test(face);
export const rankOf = (face: string): number => RANK[face.slice(0, -1)] ?? Number(face.slice(0, -1));
export const suitOf = (face: string): string => face.at(-1)!;

/** A card's points where the rules count it: ace 11 (1 at the low end of a run), J Q K 10. */
function points(rank: number): number {
  if (rank === 1) return 1; // the low end of a run (a set's aces are counted apart)
  if (rank === 14) return 11;
  return Math.min(rank, 10);
}

/** The value of one meld as laid (a run low to high), jokers counted as the cards they stand for; 0 when it is no meld. */
export function meldValue(faces: string[]): number {
  const real = faces.filter((f) => !isJoker(f));
  if (faces.length < 3 || real.length === 0) return 0;
  const rank = rankOf(real[0]!);
  if (real.every((f) => rankOf(f) === rank)) {
    const suits = new Set(real.map(suitOf));
    if (suits.size !== real.length || faces.length > 4) return 0;
    return faces.length * (rank === 1 ? 11 : Math.min(rank, 10));
  }
  if (new Set(real.map(suitOf)).size !== 1) return 0;
  // A run: each place's rank follows from the first real card's place.
  const first = faces.findIndex((f) => !isJoker(f));
  let start = rank - first;
  const ranks = faces.map((_, i) => start + i);
  if (ranks.some((r, i) => !isJoker(faces[i]!) && r !== rankOf(faces[i]!))) {
    // An ace after a king is the high ace (Q K A).
    start = (rank === 1 ? 14 : rank) - first;
    const high = faces.map((_, i) => start + i);
    if (high.some((r, i) => !isJoker(faces[i]!) && r !== (rankOf(faces[i]!) === 1 ? 14 : rankOf(faces[i]!)))) return 0;
    return high.reduce((sum, r) => sum + points(r), 0);
  }
  if (ranks[0]! < 1 || ranks.at(-1)! > 14) return 0;
  return ranks.reduce((sum, r) => sum + points(r), 0);
}

export interface Card {
  id: number;
  face: string;
}

/**
 * The picked cards in the order to lay them: a set as picked; a run low to high with the
 * jokers in its gaps (any left over extend it upwards, or downwards past a king).
 */
export function layOrder(cards: Card[]): Card[] {
  const jokers = cards.filter((c) => isJoker(c.face));
  const real = cards.filter((c) => !isJoker(c.face));
  if (real.length === 0 || new Set(real.map((c) => rankOf(c.face))).size === 1) return [...real, ...jokers];
  const high = real.some((c) => rankOf(c.face) === 13) && real.some((c) => rankOf(c.face) === 1);
  const value = (c: Card) => (high && rankOf(c.face) === 1 ? 14 : rankOf(c.face));
  const sorted = [...real].sort((a, b) => value(a) - value(b));
  const out: Card[] = [sorted[0]!];
  for (const card of sorted.slice(1)) {
    for (let gap = value(card) - value(out.at(-1)!) - 1; gap > 0 && jokers.length; gap--) out.push(jokers.shift()!);
    out.push(card);
  }
  const top = value(sorted.at(-1)!);
  for (const joker of jokers) {
    if (top + (out.length - sorted.length) < 14) out.push(joker);
    else out.unshift(joker);
  }
  return out;
}

/** The card to suggest discarding: the highest penalty among cards in no meld, never a joker. */
export function suggestedDiscard(loose: Card[], all: Card[]): Card | null {
  const pool = (loose.length ? loose : all).filter((c) => !isJoker(c.face));
  if (!pool.length) return all[0] ?? null;
  const penalty = (c: Card) => (rankOf(c.face) === 1 ? 11 : Math.min(rankOf(c.face), 10));
  return pool.reduce((best, c) => (penalty(c) > penalty(best) ? c : best));
}

const SUIT_ORDER = "SHCD"; // black, red, black, red: neighbouring suits differ in colour

/**
 * A rack a player can read: the suggested melds first (each laid in order), then the other
 * cards by suit and rank (ace low), jokers last. Cards of `melds` not in `rack` are ignored.
 */
export function arrangeCards(rack: Card[], melds: Card[][]): Card[] {
  const have = new Set(rack.map((c) => c.id));
  const placed = new Set<number>();
  const out: Card[] = [];
  for (const meld of melds) {
    const cards = meld.filter((c) => have.has(c.id) && !placed.has(c.id));
    if (cards.length < meld.length) continue; // a stale hint: its meld is no longer whole
    for (const card of layOrder(cards)) {
      placed.add(card.id);
      out.push(rack.find((c) => c.id === card.id)!);
    }
  }
  const rest = rack.filter((c) => !placed.has(c.id));
  const key = (c: Card) => (isJoker(c.face) ? 100 : SUIT_ORDER.indexOf(suitOf(c.face)) * 20 + rankOf(c.face));
  return [...out, ...rest.sort((a, b) => key(a) - key(b) || a.id - b.id)];
}
