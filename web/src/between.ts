// Between deals and leaving (issue 33): the pause the server owns ("Next deal in 12 s ·
// Ready"), what leaving costs in tokens before the player leaves, and a table he left that
// still plays on, so the lobby can take him back to his seat. Pure helpers over the view;
// table.ts and main.ts draw them.
import { Game } from "./gen/kishpa/common/v1/common_pb";
import { PlayerAction, TableStatus, type TableView } from "./gen/kishpa/table/v1/table_pb";
import { tables } from "./api";
import { h } from "./ui";

/** When the next deal is dealt at the latest (ms), or null while a deal is played. */
export function nextDealMs(view: TableView | null): number | null {
  const t = view?.nextDealTime;
  if (!t || (t.seconds === 0n && t.nanos === 0)) return null;
  return Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6);
}

/** "Next deal in 12 s" (Kishpa: round), with who is still awaited once the player is ready. */
export function pauseText(view: TableView, now: number = Date.now()): string {
  const at = nextDealMs(view);
  if (at === null) return "";
  const word = view.settings?.game === Game.HAND ? "deal" : "round";
  const left = Math.max(0, Math.ceil((at - now) / 1000));
  const humans = view.seats.filter((s) => s.playerId && !s.bot).length;
  const waiting = humans - view.readySeats.length;
  const me = view.mySeat;
  const mine = me !== undefined && view.readySeats.includes(me);
  if (mine && waiting > 0) return `You are ready · next ${word} in ${left} s or when ${waiting === 1 ? "the other player is" : `the ${waiting} others are`} ready`;
  return `Next ${word} in ${left} s`;
}

/** The "Ready" button of the pause (only while the server waits for this seat). */
export function readyButton(view: TableView, onReady: () => void): HTMLElement | null {
  if (!view.availableActions.includes(PlayerAction.READY)) return null;
  return h("button", { class: "primary", onclick: onReady, "data-testid": "ready", "data-key": "ready" }, "Ready");
}

/** What leaving means, in tokens, said before the player leaves (docs/rules "leaving"). */
export function leaveCostText(view: TableView): string {
  const stake = view.settings?.stake || 1n;
  if (view.status !== TableStatus.PLAYING) return "The game has not started: leaving costs nothing.";
  const others = view.seats.filter((s, i) => s.playerId && !s.bot && i !== view.mySeat).length;
  const onlyBots = others === 0;
  if (view.settings?.game === Game.HAND) {
    const pot = BigInt(view.seats.filter((s) => s.playerId).length) * stake;
    const kept = `Your buy-in of ${stake} tokens stays in the pot of ${pot}`;
    return onlyBots
      ? `${kept}. Only bots are left here, so the game ends with this deal and the pot is split by the totals then: what your total earns is yours.`
      : `${kept}. Your seat plays on by itself (draw and discard) and the pot is split by the totals at the end: what your seat's total earns is still yours.`;
  }
  return onlyBots
    ? `Only bots are left here, so the table ends with this round: your seat plays it out on auto-play at stake ${stake}, the bowl is split, and you pay nothing after it.`
    : `Your seat goes on auto-play until the table ends: it keeps paying and winning at stake ${stake} (each round ${stake} or ${2n * stake} into the bowl, a lost round ${2n * stake}–${6n * stake} to the winner).`;
}

const LEFT_KEY = "kishpa.left";

/** Remember a table the player left while it plays on (the lobby offers his seat back). */
export function rememberLeft(tableId: string): void {
  localStorage.setItem(LEFT_KEY, tableId);
}

/** The lobby's "Back to your seat" card for a table he left that still plays, or null. */
export async function leftTableCard(): Promise<HTMLElement | null> {
  const tableId = localStorage.getItem(LEFT_KEY);
  if (!tableId) return null;
  try {
    const view = (await tables.getTable({ tableId })).table;
    if (!view || view.status !== TableStatus.PLAYING || view.mySeat === undefined) throw new Error("over");
    return h(
      "section",
      { class: "card highlight", "data-testid": "left-table" },
      h("p", {}, "A table you left is still playing your seat on auto-play."),
      h("a", { class: "button primary", href: `#/table/${tableId}`, "data-testid": "back-to-seat", onclick: () => localStorage.removeItem(LEFT_KEY) }, "Back to your seat"),
    );
  } catch {
    localStorage.removeItem(LEFT_KEY);
    return null;
  }
}

// ---- the tables a wallet row names ---------------------------------------------------------

const GAMES_KEY = "kishpa.tableGames";

/** Remember which game a table plays (the wallet names its rows by game, table and round). */
export function rememberTable(tableId: string, game: Game): void {
  const known = JSON.parse(localStorage.getItem(GAMES_KEY) ?? "{}") as Record<string, number>;
  if (known[tableId] === game) return;
  known[tableId] = game;
  const ids = Object.keys(known);
  for (const old of ids.slice(0, Math.max(0, ids.length - 200))) delete known[old]; // the newest 200
  localStorage.setItem(GAMES_KEY, JSON.stringify(known));
}

/** "Hand table 1ff1 · deal 3", "Kishpa table 9c2e · round 2", "Hand table 1ff1 · buy-in". */
export function tableLabel(tableId: string, round: number): string {
  const game = (JSON.parse(localStorage.getItem(GAMES_KEY) ?? "{}") as Record<string, number>)[tableId];
  const name = game === Game.HAND ? "Hand" : game === Game.KISHPA ? "Kishpa" : "";
  const short = tableId.replace(/^t/, "").slice(0, 4);
  const when = round === 0 ? (game === Game.HAND ? "buy-in" : "start") : `${game === Game.HAND ? "deal" : "round"} ${round}`;
  return `${name ? `${name} table` : "Table"} ${short} · ${when}`;
}

// ---- play again ----------------------------------------------------------------------------

/** When a table opened by PlayAgain starts at the latest (ms), or null. */
export function startMs(view: TableView | null): number | null {
  const t = view?.startTime;
  if (!view?.rematchOf || !t || (t.seconds === 0n && t.nanos === 0)) return null;
  return Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6);
}

/** "Waiting for the others to accept: …" on a table opened by PlayAgain. */
export function rematchText(view: TableView, now: number = Date.now()): string {
  const at = startMs(view);
  if (at === null || view.status !== TableStatus.WAITING) return "";
  const left = Math.max(0, Math.ceil((at - now) / 1000));
  return `Play again: the game starts when the others accept, or in ${left} s with a bot in the seat of each who did not.`;
}

/** Accept to play again: the new table's id (the same one for every player of this table). */
export async function playAgain(tableId: string, requestId: string): Promise<string> {
  const answer = await tables.playAgain({ tableId, requestId });
  return answer.table?.tableId ?? "";
}
