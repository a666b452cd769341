// The replay's fold of a deal's public moves (pure: History draws it, web/test checks it).

/** A Hand card id as the table names it: "AS", "10H", "QD", "J1" (a joker). */
export function cardFace(id: number): string {
  if (id >= 104) return `J${id - 103}`;
  const rank = (id % 13) + 1;
  return `${({ 1: "A", 11: "J", 12: "Q", 13: "K" } as Record<number, string>)[rank] ?? rank}${"SHDC"[Math.floor((id % 52) / 13)]}`;
}

/** The table after some of the deal's moves: every hand, the discards, what each seat laid. */
export interface Board {
  hands: number[][];
  discards: number[];
  laid: { seat: number; ids: number[] }[];
}

interface Move {
  seat: number;
  kind: string;
  tileIds: readonly number[];
}

/** The board after each move (boards[0]: as dealt), as docs/fairness.md reads the moves:
 * draw and take into the hand, discard and meld out of it, release from a meld into it, show
 * leaves it, undo puts the board back as before the seat's last take. */
export function boards(dealt: number[][], firstDiscards: number[], moves: readonly Move[]): Board[] {
  let board: Board = { hands: dealt.map((x) => [...x]), discards: [...firstDiscards], laid: [] };
  const out = [board];
  const beforeTake = new Map<number, Board>();
  for (const m of moves) {
    const ids = [...m.tileIds];
    const prev = board;
    board = { hands: prev.hands.map((x) => [...x]), discards: [...prev.discards], laid: prev.laid.map((l) => ({ seat: l.seat, ids: [...l.ids] })) };
    const hand = board.hands[m.seat] ?? [];
    const remove = (id: number) => {
      const at = hand.indexOf(id);
      if (at >= 0) hand.splice(at, 1);
    };
    if (m.kind === "draw") hand.push(...ids);
    else if (m.kind === "take") {
      beforeTake.set(m.seat, prev);
      board.discards.pop();
      hand.push(...ids);
    } else if (m.kind === "discard") {
      ids.forEach(remove);
      board.discards.push(...ids);
      beforeTake.delete(m.seat);
    } else if (m.kind === "meld") {
      ids.forEach(remove);
      board.laid.push({ seat: m.seat, ids });
    } else if (m.kind === "release") {
      for (const l of board.laid) l.ids = l.ids.filter((id) => !ids.includes(id));
      hand.push(...ids);
    } else if (m.kind === "undo" && beforeTake.has(m.seat)) {
      board = beforeTake.get(m.seat)!;
      beforeTake.delete(m.seat);
    }
    out.push(board);
  }
  return out;
}
