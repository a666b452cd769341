// History (issue 31): the player's archived games (HistoryService.ListPlayerGames, paged), a
// game's rounds (ListTableRounds), and the replay of one round from its archived record
// (GetRoundRecord): every hand as the record reveals it, stepped through the deal's public
// moves, with the deal verified by the table's own code (fair.ts).
import { Game } from "./gen/kishpa/common/v1/common_pb";
import { GameResult, HistoryService } from "./gen/kishpa/table/v1/history_pb";
import type { RoundRecord } from "./gen/kishpa/table/v1/table_pb";
import { createClient } from "@connectrpc/connect";
import { knownSeed, tables, transport, withRetry } from "./api";
import { evidenceFromRecord, faceOf, tableSummary, verifyTable } from "./fair";
import { boards, cardFace } from "./replay";
import { errorText, h, replace, tileClass, tileLabel, tileTitle } from "./ui";

const history = createClient(HistoryService, transport);

/** Names a player id as a person reads it ("you", a name seen at a table, a bot's name). */
export type Namer = (playerId: string) => string;

interface Stamp {
  seconds: bigint;
}

const when = (t: Stamp | undefined) => (t ? new Date(Number(t.seconds) * 1000).toLocaleString() : "");
const signed = (n: bigint) => (n > 0n ? `+${n}` : n < 0n ? `−${-n}` : "0");
const gameName = (g: Game) => (g === Game.HAND ? "Hand" : "Kishpa");
const roundWord = (g: Game) => (g === Game.HAND ? "deal" : "round");
const RESULTS: Record<number, string> = { [GameResult.WON]: "Won", [GameResult.LOST]: "Lost", [GameResult.EVEN]: "Even" };

/** A paged list: rows appended page by page, "Show more" only while the server has a next page. */
function paged(status: HTMLElement, fetchPage: (token: string) => Promise<string>): HTMLButtonElement {
  let token = "";
  const more = h("button", { class: "more", hidden: true, "data-testid": "history-more" }, "Show more");
  const next = async () => {
    more.hidden = true;
    try {
      token = await fetchPage(token);
      more.hidden = !token;
    } catch (err) {
      status.textContent = errorText(err);
    }
  };
  more.addEventListener("click", () => void next());
  void next();
  return more;
}

const cell = (label: string, ...content: (Node | string)[]) => h("td", { "data-label": label }, ...content);

/** `#/history`: the player's games, newest first. */
export function gamesScreen(): HTMLElement {
  const rows = h("tbody", {});
  const status = h("p", { class: "status", role: "status", "data-testid": "history-status" });
  const seen = new Set<string>();
  const more = paged(status, async (pageToken) => {
    const answer = await withRetry(() => history.listPlayerGames({ pageSize: 20, pageToken }));
    for (const g of answer.games) {
      const key = `${g.tableId}/${g.round}`;
      if (seen.has(key)) continue; // a page boundary that moved: never a row twice
      seen.add(key);
      rows.append(
        h(
          "tr",
          { "data-testid": "history-game", "data-table": g.tableId, "data-round": g.round },
          cell("When", when(g.endedAt)),
          cell("Game", gameName(g.game)),
          cell(g.game === Game.HAND ? "Buy-in" : "Stake", `${g.game === Game.HAND ? "buy-in" : "stake"} ${g.stake}`),
          cell("Seats", `seat ${g.seat + 1} of ${g.seatCount}`),
          cell("Result", RESULTS[g.result] ?? ""),
          h("td", { "data-label": "Tokens", class: g.netTokens < 0n ? "minus" : "plus" }, signed(g.netTokens)),
          cell("Rounds", h("a", { href: `#/history/${g.tableId}`, "data-testid": "history-open" }, g.game === Game.HAND ? "Deals" : "Rounds", h("span", { class: "visually-hidden" }, ` of this ${gameName(g.game)} game, ${when(g.endedAt)}`))),
        ),
      );
    }
    if (!seen.size) status.textContent = "No games yet: a game shows here once it has ended and been paid out.";
    return answer.nextPageToken;
  });
  const head = ["When", "Game", "Stake", "Seats", "Result", "Tokens", "Rounds"].map((c) => h("th", { scope: "col" }, c));
  return h(
    "main",
    { "data-testid": "history" },
    h("section", { class: "card wide" }, h("h1", {}, "Your games"), h("table", { class: "history" }, h("caption", {}, "Your ended games, newest first"), h("thead", {}, h("tr", {}, head)), rows), more, status),
  );
}

/** `#/history/<table>`: the rounds (Hand: deals) of one table that the player sat in. */
export function roundsScreen(tableId: string, name: Namer): HTMLElement {
  const rows = h("tbody", {});
  const status = h("p", { class: "status", role: "status", "data-testid": "history-status" });
  const title = h("h1", {}, "Rounds");
  const more = paged(status, async (pageToken) => {
    const answer = await withRetry(() => history.listTableRounds({ tableId, pageSize: 50, pageToken }));
    for (const r of answer.rounds) {
      title.textContent = `${gameName(r.game)} table ${tableId.replace(/^t/, "").slice(0, 4)}: its ${roundWord(r.game)}s`;
      const nets = r.results.map((p) => `${name(p.playerId)} ${signed(p.netTokens)}`).join(", ");
      const label = `${roundWord(r.game)} ${r.round}`;
      rows.append(
        h(
          "tr",
          { "data-testid": "history-round", "data-round": r.round },
          cell("Round", label),
          cell("Players", r.playerIds.map(name).join(", ")),
          cell("Tokens", nets || (r.settledRound !== r.round ? `paid with ${roundWord(r.game)} ${r.settledRound}` : "")),
          cell("When", when(r.endedAt)),
          cell("Replay", r.recordAvailable ? h("a", { href: `#/history/${tableId}/${r.round}`, "data-testid": "history-replay" }, "Replay", h("span", { class: "visually-hidden" }, ` ${label}`)) : "no record"),
        ),
      );
    }
    return answer.nextPageToken;
  });
  const head = ["Round", "Players", "Tokens", "When", "Replay"].map((c) => h("th", { scope: "col" }, c));
  return h(
    "main",
    { "data-testid": "history-rounds" },
    h("section", { class: "card wide" }, h("p", {}, h("a", { href: "#/history" }, "All your games")), title, h("table", { class: "history" }, h("caption", {}, "Oldest first"), h("thead", {}, h("tr", {}, head)), rows), more, status),
  );
}

// ---- the replay ------------------------------------------------------------------------------

const VERBS: Record<string, string> = { draw: "drew", take: "took from the discards", discard: "discarded", meld: "laid", release: "took back from a meld", show: "showed", undo: "took back the turn" };

/** `#/history/<table>/<round>`: the round's record, verified, stepped through move by move. */
export function replayScreen(tableId: string, round: number, name: Namer): HTMLElement {
  const status = h("p", { class: "status", role: "status", "data-testid": "replay-status" }, "Reading the archived record…");
  const main = h("main", { "data-testid": "replay" }, h("section", { class: "card wide" }, h("p", {}, h("a", { href: `#/history/${tableId}` }, "Back to the table's rounds")), h("h1", {}, "Replay"), status));
  void (async () => {
    try {
      const record = (await withRetry(() => tables.getRoundRecord({ tableId, round }))).record!;
      replace(main, replayOf(record, tableId, name));
    } catch (err) {
      status.textContent = errorText(err);
    }
  })();
  return main;
}

function replayOf(record: RoundRecord, tableId: string, name: Namer): HTMLElement {
  const hand = record.game === Game.HAND;
  const face = hand ? cardFace : faceOf;
  const kishpa = record.replacementKishpaTileId ?? record.kishpaTileId;
  const jokerFace = kishpa === undefined || hand ? "" : `${faceOf(kishpa)[0]}${(Number(faceOf(kishpa).slice(1)) % 13) + 1}`;
  const title = (id: number) => tileTitle(face(id), jokerFace);
  const tile = (id: number) => {
    const f = face(id);
    return h("span", { class: `${tileClass(f)}${f === jokerFace ? " joker" : ""}`, role: "img", "aria-label": title(id), title: title(id), "data-id": id }, tileLabel(f));
  };
  const group = (ids: number[], label: string, extra = {}) => h("span", { class: "group", role: "group", "aria-label": label, ...extra }, ...ids.map(tile));
  // The hands in a steady order (colour or suit, then number) so a move's change is easy to see.
  const sorted = (ids: number[]) => [...ids].sort((a, b) => (a % 52) - (b % 52) || a - b);

  const seats = record.playerIds.length;
  const dealt: number[][] = Array.from({ length: seats }, () => []);
  for (const d of record.dealtHands) dealt[d.seat] = [...d.tileIds];
  const moves = record.moves;
  const steps = boards(dealt, hand && record.topDiscardCardId !== undefined ? [record.topDiscardCardId] : [], moves);
  const seatName = (s: number) => `Seat ${s + 1}, ${name(record.playerIds[s] ?? "")}`;
  const pile = hand ? "stock" : "pile";

  const verdict = h("p", { "data-testid": "replay-verdict", role: "status" }, "Checking the deal…");
  const moveLine = h("p", { class: "turn", "aria-live": "polite", "data-testid": "replay-move" });
  const board = h("div", { "data-testid": "replay-board" });
  let step = 0;
  const buttons: [string, string, string, () => number][] = [
    ["replay-first", "Start", "Home", () => 0],
    ["replay-back", "Back", "ArrowLeft", () => step - 1],
    ["replay-next", "Next", "ArrowRight", () => step + 1],
    ["replay-last", "End", "End", () => moves.length],
  ];
  const controls = buttons.map(([id, text, key, to]) => h("button", { "data-testid": id, "aria-keyshortcuts": key, onclick: () => go(to()) }, text));

  function go(to: number): void {
    step = Math.max(0, Math.min(moves.length, to));
    const b = steps[step]!;
    const m = moves[step - 1];
    controls.forEach((c, i) => c.setAttribute("aria-disabled", String(i < 2 ? step === 0 : step === moves.length)));
    moveLine.textContent = m
      ? `Move ${step} of ${moves.length}: ${seatName(m.seat)} ${VERBS[m.kind] ?? m.kind}${m.tileIds.length ? ` ${m.tileIds.map(title).join(", ")}` : ""}${m.kind === "draw" ? ` from the ${pile}` : ""}.`
      : `As dealt (${moves.length} moves to step through).`;
    root.dataset.step = String(step);
    replace(
      board,
      h(
        "div",
        { class: "seats" },
        b.hands.map((ids, s) =>
          h(
            "section",
            { class: `seat${m?.seat === s ? " turn" : ""}`, "aria-label": seatName(s) },
            h("h2", { class: "small" }, seatName(s), h("span", { class: "muted" }, ` · ${ids.length} ${hand ? "cards" : "tiles"}`)),
            ids.length ? group(sorted(ids), `${seatName(s)}: ${hand ? "cards" : "tiles"} in hand`, { "data-testid": "replay-hand", "data-seat": s }) : h("p", { class: "muted", "data-testid": "replay-hand", "data-seat": s }, "none left"),
          ),
        ),
      ),
      h("h2", { class: "small" }, "Discards, oldest first"),
      b.discards.length ? group(b.discards, "Discards, oldest first", { "data-testid": "replay-discards" }) : h("p", { class: "muted", "data-testid": "replay-discards" }, "none"),
      hand ? h("h2", { class: "small" }, "Laid on the table, move by move") : null,
      hand ? h("div", { class: "groups", "data-testid": "replay-laid" }, b.laid.filter((l) => l.ids.length).map((l) => group(l.ids, `laid by ${seatName(l.seat)}`))) : null,
    );
  }

  const keys = (event: Event) => {
    const e = event as KeyboardEvent;
    const to = { ArrowLeft: step - 1, ArrowRight: step + 1, Home: 0, End: moves.length }[e.key];
    if (to === undefined || e.altKey || e.ctrlKey || e.metaKey) return;
    e.preventDefault();
    go(to);
  };
  const facts = hand
    ? [h("span", { class: "fact" }, "turned card ", record.topDiscardCardId !== undefined ? tile(record.topDiscardCardId) : "none")]
    : [
        kishpa !== undefined ? h("span", { class: "fact" }, "kishpa ", tile(kishpa)) : null,
        record.replacementKishpaTileId !== undefined && record.kishpaTileId !== undefined ? h("span", { class: "fact" }, "replacing ", tile(record.kishpaTileId)) : null,
        jokerFace ? h("span", { class: "fact" }, `joker: the ${tileTitle(jokerFace)}`) : null,
      ];
  const root = h(
    "section",
    { class: "card wide replay", "data-game": hand ? "hand" : "kishpa", "data-moves": moves.length },
    h("p", {}, h("a", { href: `#/history/${tableId}` }, "Back to the table's rounds")),
    h("h1", {}, `${gameName(hand ? Game.HAND : Game.KISHPA)}: replay of ${roundWord(record.game)} ${record.round}`),
    verdict,
    h("p", { class: "facts" }, `Seat ${record.starterSeat + 1} started. `, ...facts),
    // The steps stay on screen (sticky) while the hands below them scroll.
    h("div", { class: "replay-steps" }, h("div", { class: "actions", role: "toolbar", "aria-label": "Step through the moves (← and →, Home, End)", "aria-controls": "replay-board", onkeydown: keys }, controls), moveLine),
    board,
  );
  board.id = "replay-board";
  go(0);
  // The table's own check (docs/web.md "Fairness in the browser"), from the archived record.
  const mine = record.contributions.find((c) => c.seat === record.mySeat)?.contribution;
  const mySeed = mine ?? knownSeed(tableId) ?? record.clientSeeds[record.mySeat] ?? "";
  void verifyTable(evidenceFromRecord(record, mySeed))
    .then((v) => {
      verdict.className = v.ok ? "good" : "bad";
      verdict.title = tableSummary(v);
      verdict.textContent = v.ok ? `${v.wholeTable ? "Table" : "Deal"} verified from the archived record (${v.passed.length} checks).` : `NOT verified: ${v.failed.map((f) => f.check).join(", ")}`;
    })
    .catch((err: unknown) => (verdict.textContent = `Could not check: ${errorText(err)}`));
  return root;
}
