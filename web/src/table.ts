// The table screen: the view (GetTable) redrawn after every event of the WatchTable stream,
// the rack in the player's own order (kept on the server), actions, hints, the event log,
// the round-end summary and the fairness check. A dropped stream resumes after the last
// event id seen (kept in sessionStorage, so a reload resumes too): nothing lost, nothing twice.
import { ConnectError } from "@connectrpc/connect";
import type { Tile } from "./gen/kishpa/common/v1/common_pb";
import { GroupKind } from "./gen/kishpa/common/v1/common_pb";
import {
  DrawSource,
  PlayerAction,
  RoundPhase,
  TableStatus,
  type GetHintResponse,
  type TableView,
} from "./gen/kishpa/table/v1/table_pb";
import type { Transfer } from "./gen/kishpa/wallet/v1/wallet_pb";
import { knownSeed, requestId, tables, wallet, type Session } from "./api";
import {
  dealtTiles,
  deadlineMsOf,
  describe,
  endsRound,
  fromWire,
  isSettled,
  mySeatOf,
  turnSeatOf,
  winnerSeatOf,
  reasonText,
  type UiEvent,
  type UiPayment,
} from "./events";
import { evidenceFromRecord, tableSummary, verifyTable, type TableVerdict } from "./fair";
import { errorText, h, replace, tileClass, tileLabel, tileTitle } from "./ui";

interface Saved {
  lastId: string;
  log: { id: string; text: string; kind: string }[];
  arranged: number[];
  /** Every payment of each round, from its settlements' events (who paid whom and why). */
  payments: Record<number, UiPayment[]>;
}

const LOG_LIMIT = 200;

function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am - bm || as - bs;
}

interface Summary {
  round: number;
  transfers: Transfer[] | null;
  wallet: bigint | null;
  fairness: TableVerdict | "checking" | string;
}

export function openTable(root: HTMLElement, tableId: string, session: Session): () => void {
  const storeKey = `kishpa.table.${tableId}`;
  const saved: Saved = { lastId: "", log: [], arranged: [], payments: {}, ...JSON.parse(sessionStorage.getItem(storeKey) ?? "{}") };
  const persist = () => sessionStorage.setItem(storeKey, JSON.stringify(saved));
  const abort = new AbortController();
  let view: TableView | null = null;
  let hint: GetHintResponse | null = null;
  let hintFor = "";
  let selected: number | null = null;
  let status = "";
  let connection = "connecting…";
  let summary: Summary | null = null;
  let dismissed = Number(sessionStorage.getItem(`${storeKey}.dismissed`) ?? "0");
  let refreshing: Promise<void> | null = null;
  let again = false;
  let busy = false;
  let focusTile: number | null = null;

  const seatName = (seat: number | null): string => {
    if (seat === null || !view) return "The table";
    const s = view.seats[seat];
    if (!s) return `Seat ${seat + 1}`;
    return s.displayName || (s.playerId === session.playerId ? session.name : `Player ${seat + 1}`);
  };
  const accountName = (account: string): string => {
    if (account === "bank") return "the bank";
    if (account.startsWith("bowl:")) return "the bowl";
    const player = account.replace(/^player:/, "");
    if (player === session.playerId) return "you";
    const seat = view?.seats.findIndex((s) => s.playerId === player) ?? -1;
    return seat >= 0 ? seatName(seat) : player;
  };

  // ---- the stream ----------------------------------------------------------------------

  function onEvent(ev: UiEvent): void {
    if (saved.lastId && compareIds(ev.id, saved.lastId) <= 0) return; // seen before a reconnect
    saved.lastId = ev.id;
    const text = describe(ev, seatName, view ? mySeatOf(view) : null);
    if (text) {
      saved.log.push({ id: ev.id, text, kind: ev.kind });
      if (saved.log.length > LOG_LIMIT) saved.log.splice(0, saved.log.length - LOG_LIMIT);
    }
    if (dealtTiles(ev)) saved.arranged = [];
    if (ev.payments?.length) saved.payments[ev.round] = [...(saved.payments[ev.round] ?? []), ...ev.payments];
    persist();
    if (ev.kind === "seed_committed") void contribute(ev.round);
    if (endsRound(ev)) summaryNeeded = true;
    // Any settlement moves the balances the summary shows (the next round's start can settle
    // while this round's summary is still open), so the wallet is read again after each one.
    else if (isSettled(ev) && summary) void readSettlement(summary, ev.round === summary.round);
    scheduleRefresh();
  }

  let summaryNeeded = false;

  async function watch(): Promise<void> {
    let delay = 250;
    while (!abort.signal.aborted) {
      try {
        connection = "live";
        draw();
        const request = { tableId, afterEventId: saved.lastId, batched: true };
        for await (const message of tables.watchTable(request, { signal: abort.signal })) {
          delay = 250;
          for (const event of message.events) onEvent(fromWire(event));
        }
        if (view?.status === TableStatus.CLOSED) {
          connection = "table closed";
          draw();
          return;
        }
      } catch (err) {
        if (abort.signal.aborted) return;
        connection = `reconnecting… (${errorText(err)})`;
        draw();
      }
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 5000);
      scheduleRefresh();
    }
  }

  // ---- the view --------------------------------------------------------------------------

  function scheduleRefresh(): void {
    if (refreshing) {
      again = true;
      return;
    }
    refreshing = refresh().finally(() => {
      refreshing = null;
      if (again) {
        again = false;
        scheduleRefresh();
      }
    });
  }

  // ---- fair deals: a random contribution to each deal once its commitment is out ---------

  const contributed: Record<number, string> = {};

  async function contribute(deal: number): Promise<void> {
    if (deal in contributed || !view || mySeatOf(view) === null) return;
    const text = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
    contributed[deal] = text;
    try {
      await tables.contribute({ tableId, deal, contribution: text, requestId: requestId() });
    } catch {
      delete contributed[deal]; // too late (dealt already): the deal uses this seat's default
    }
  }

  async function refresh(): Promise<void> {
    try {
      view = (await tables.getTable({ tableId })).table ?? null;
      if (view?.nextDeal && !view.contributed) void contribute(view.nextDeal);
    } catch (err) {
      status = errorText(err);
      draw();
      return;
    }
    const round = view?.round;
    const live = round && round.phase !== RoundPhase.ENDED && round.phase !== RoundPhase.UNSPECIFIED && mySeatOf(view!) !== null;
    const rackKey = round ? `${round.round}:${round.myRack?.tiles.map((t) => t.id).join(",")}` : "";
    if (live && rackKey !== hintFor) {
      try {
        hint = await tables.getHint({ tableId });
        hintFor = rackKey;
      } catch {
        hint = null;
      }
      if (hint && saved.arranged.length === 0 && round!.myRack!.tiles.length >= 14) await arrange();
    }
    if (!live) hint = null;
    if (round && round.phase === RoundPhase.ENDED && round.round > dismissed && (summaryNeeded || summary?.round !== round.round)) {
      summaryNeeded = false;
      void buildSummary(round.round);
    }
    draw();
  }

  async function arrange(): Promise<void> {
    if (!view?.round?.myRack || !hint) return;
    const order = [...hint.groups.flatMap((g) => g.tiles.map((t) => t.id)), ...hint.looseTiles.map((t) => t.id)];
    const have = new Set(view.round.myRack.tiles.map((t) => t.id));
    const ids = [...order.filter((id) => have.has(id)), ...[...have].filter((id) => !order.includes(id))];
    await setOrder(ids);
  }

  async function setOrder(ids: number[]): Promise<void> {
    try {
      const answer = await tables.setRackOrder({ tableId, tileIds: ids, requestId: requestId() });
      if (answer.rack && view?.round) view.round.myRack = answer.rack;
      saved.arranged = ids;
      persist();
    } catch (err) {
      status = errorText(err);
    }
    draw();
  }

  // ---- actions ---------------------------------------------------------------------------

  const can = (action: PlayerAction) => !!view?.availableActions.includes(action);

  async function act(what: string, call: () => Promise<unknown>): Promise<void> {
    if (busy) return;
    busy = true;
    status = what;
    draw();
    try {
      await call();
      status = "";
    } catch (err) {
      status = err instanceof ConnectError ? err.rawMessage : errorText(err);
    } finally {
      busy = false;
    }
    scheduleRefresh();
  }

  const drawPile = () => act("Drawing…", () => tables.draw({ tableId, source: DrawSource.PILE, requestId: requestId() }));
  const takeDiscard = () => act("Taking…", () => tables.draw({ tableId, source: DrawSource.DISCARD, requestId: requestId() }));
  const suggested = (): number | null => {
    const rack = view?.round?.myRack?.tiles ?? [];
    if (!rack.length) return null;
    const loose = hint?.looseTiles ?? [];
    return loose.length ? loose[loose.length - 1]!.id : rack[rack.length - 1]!.id;
  };
  const discard = () => {
    const tile = selected ?? suggested();
    if (tile === null) return;
    selected = null;
    void act("Discarding…", () => tables.discard({ tableId, tileId: tile, requestId: requestId() }));
  };
  const win = () => {
    const tile = hint?.winningDiscards[0]?.id ?? selected;
    if (tile === undefined || tile === null) return;
    void act("Winning…", () => tables.win({ tableId, discardTileId: tile, requestId: requestId() }));
  };
  const reveal = () => act("Revealing…", () => tables.revealKishpa({ tableId, requestId: requestId() }));
  const pass = () => act("Passing…", () => tables.declineReveal({ tableId, requestId: requestId() }));
  const start = () => act("Starting…", () => tables.startGame({ tableId, requestId: requestId() }));
  const lastRound = () => act("Pressing last round…", () => tables.pressLastRound({ tableId, requestId: requestId() }));
  const leave = () =>
    act("Leaving…", async () => {
      await tables.leaveTable({ tableId, requestId: requestId() });
      location.hash = "#/";
    });

  function moveTile(id: number, delta: number): void {
    const ids = view?.round?.myRack?.tiles.map((t) => t.id) ?? [];
    const from = ids.indexOf(id);
    const to = from + delta;
    if (from < 0 || to < 0 || to >= ids.length) return;
    ids.splice(to, 0, ...ids.splice(from, 1));
    focusTile = id;
    void setOrder(ids);
  }

  function dropTile(id: number, beforeId: number | null): void {
    const ids = (view?.round?.myRack?.tiles.map((t) => t.id) ?? []).filter((t) => t !== id);
    const at = beforeId === null ? ids.length : ids.indexOf(beforeId);
    ids.splice(at < 0 ? ids.length : at, 0, id);
    void setOrder(ids);
  }

  function onKey(e: KeyboardEvent): void {
    if (!view || e.target instanceof HTMLInputElement) return;
    const key = e.key.toLowerCase();
    if (key === "d" && can(PlayerAction.DRAW_PILE)) void drawPile();
    else if (key === "t" && can(PlayerAction.DRAW_DISCARD)) void takeDiscard();
    else if (key === "x" && can(PlayerAction.DISCARD)) discard();
    else if (key === "w" && can(PlayerAction.WIN) && hint?.winningDiscards.length) win();
    else if (key === "a") void arrange();
    else if (key === "escape" && summary) closeSummary();
  }
  document.addEventListener("keydown", onKey);

  // ---- round end -------------------------------------------------------------------------

  async function buildSummary(round: number): Promise<void> {
    summary = { round, transfers: summary?.round === round ? summary.transfers : null, wallet: null, fairness: summary?.round === round ? summary.fairness : "checking" };
    draw();
    const current = summary;
    await readSettlement(current, true);
    if (current.fairness === "checking") {
      current.fairness = await checkFairness(round);
      draw();
    }
  }

  let walletReads = 0;

  /** Reads the summary's round transfers (when they may have changed) and the wallet balance. */
  async function readSettlement(current: Summary, transfers: boolean): Promise<void> {
    const read = ++walletReads;
    try {
      if (transfers) current.transfers = [...(await wallet.listTransfers({ tableId, round: current.round, pageSize: 100 })).transfers].reverse();
      const tokens = (await wallet.getBalance({})).balance?.tokens ?? null;
      if (read === walletReads) current.wallet = tokens; // an older read answering late is stale
    } catch (err) {
      current.transfers ??= [];
      status = errorText(err);
    }
    draw();
  }

  async function checkFairness(round: number): Promise<TableVerdict | string> {
    try {
      const record = (await tables.getRoundRecord({ tableId, round })).record!;
      // What this seat handed in for the deal: its contribution (this page's, or after a
      // reload the one the record shows for it), else its sit-down seed.
      const mine = record.contributions.find((c) => c.seat === record.mySeat)?.contribution;
      const mySeed = contributed[round] ?? mine ?? knownSeed(tableId) ?? record.clientSeeds[record.mySeat] ?? "";
      return await verifyTable(evidenceFromRecord(record, mySeed));
    } catch (err) {
      return `could not check: ${errorText(err)}`;
    }
  }


  function closeSummary(): void {
    if (!summary) return;
    dismissed = summary.round;
    sessionStorage.setItem(`${storeKey}.dismissed`, String(dismissed));
    summary = null;
    draw();
  }

  // ---- drawing ---------------------------------------------------------------------------

  const tileEl = (tile: Tile, extra: Record<string, string | number | boolean | ((e: Event) => void) | undefined> = {}) =>
    h("span", { class: tileClass(tile.face), title: tileTitle(tile.face), "data-face": tile.face, "data-id": tile.id, ...extra }, tileLabel(tile.face));

  function rackEl(): HTMLElement | null {
    const rack = view?.round?.myRack?.tiles ?? [];
    if (!rack.length) return null;
    const groupOf = new Map<number, number>();
    hint?.groups.forEach((g, i) => g.tiles.forEach((t) => groupOf.set(t.id, i)));
    const winning = new Set(hint?.winningDiscards.map((t) => t.id));
    const suggestion = suggested();
    const items: HTMLElement[] = [];
    rack.forEach((tile, index) => {
      const group = groupOf.get(tile.id);
      const prev = index > 0 ? groupOf.get(rack[index - 1]!.id) : undefined;
      if (index > 0 && group !== prev) items.push(h("span", { class: "gap", "aria-hidden": "true" }));
      const button = h(
        "button",
        {
          class: `${tileClass(tile.face)} ${selected === tile.id ? "selected" : ""} ${group !== undefined ? "grouped" : ""} ${winning.has(tile.id) ? "winning" : ""}`,
          title: `${tileTitle(tile.face)}${group !== undefined ? ` (in a ${hint!.groups[group]!.kind === GroupKind.RUN ? "run" : "set"})` : ""}`,
          "aria-pressed": selected === tile.id ? "true" : "false",
          "data-testid": "rack-tile",
          "data-face": tile.face,
          "data-id": tile.id,
          "data-suggested": suggestion === tile.id ? "true" : undefined,
          draggable: "true",
          onclick: () => {
            selected = selected === tile.id ? null : tile.id;
            focusTile = tile.id;
            draw();
          },
          onkeydown: (e: Event) => {
            const k = e as KeyboardEvent;
            if (k.shiftKey && (k.key === "ArrowLeft" || k.key === "ArrowRight")) {
              e.preventDefault();
              moveTile(tile.id, k.key === "ArrowLeft" ? -1 : 1);
            }
          },
          ondragstart: (e: Event) => (e as DragEvent).dataTransfer?.setData("text/plain", String(tile.id)),
          ondragover: (e: Event) => e.preventDefault(),
          ondrop: (e: Event) => {
            e.preventDefault();
            const id = Number((e as DragEvent).dataTransfer?.getData("text/plain"));
            if (!Number.isNaN(id) && id !== tile.id) dropTile(id, tile.id);
          },
        },
        tileLabel(tile.face),
      );
      items.push(button);
    });
    return h(
      "div",
      {
        class: "rack",
        role: "group",
        "aria-label": "Your rack (Shift+arrows move a tile)",
        "data-testid": "rack",
        ondragover: (e: Event) => e.preventDefault(),
        ondrop: (e: Event) => {
          if (e.target !== e.currentTarget) return;
          const id = Number((e as DragEvent).dataTransfer?.getData("text/plain"));
          if (!Number.isNaN(id)) dropTile(id, null);
        },
      },
      ...items,
    );
  }

  function seatsEl(): HTMLElement {
    const v = view!;
    const turn = turnSeatOf(v.round);
    const me = mySeatOf(v);
    return h(
      "ol",
      { class: "seats", "data-testid": "seats" },
      ...v.seats.map((s, i) =>
        h(
          "li",
          { class: `seat ${turn === i ? "turn" : ""} ${me === i ? "me" : ""}`, "data-testid": `seat-${i}`, "data-bot": s.bot ? "true" : "false" },
          h("span", { class: "name" }, s.playerId ? seatName(i) : "(free seat)", s.bot ? h("span", { class: "badge" }, "bot") : null, me === i ? h("span", { class: "badge you" }, "you") : null),
          h("span", { class: "count", title: "tiles" }, `${s.tileCount} tiles`),
          h("span", { class: "balance", "data-testid": `balance-${i}` }, `${s.balance}`),
          s.streak ? h("span", { class: "streak", title: "wins in a row" }, `★${s.streak}`) : null,
        ),
      ),
    );
  }

  function timerEl(): HTMLElement {
    const at = deadlineMsOf(view?.round);
    const el = h("span", { class: "timer", "data-testid": "timer", role: "timer" });
    if (at !== null) {
      const left = Math.max(0, Math.ceil((at - Date.now()) / 1000));
      el.textContent = `${left}s`;
      if (left <= 10) el.classList.add("urgent");
    }
    return el;
  }

  function summaryEl(): HTMLElement | null {
    if (!summary || !view?.round) return null;
    const s = summary;
    const result = view.round.result;
    const winner = winnerSeatOf(result);
    const me = mySeatOf(view);
    const mySeat = me === null ? null : view.seats[me];
    const fairness =
      s.fairness === "checking"
        ? h("span", {}, "checking the deal…")
        : typeof s.fairness === "string"
          ? h("span", { class: "bad" }, s.fairness)
          : h("strong", { class: s.fairness.ok ? "good" : "bad", title: tableSummary(s.fairness) }, s.fairness.ok ? (s.fairness.wholeTable ? "table verified" : "deal verified") : `NOT verified: ${s.fairness.failed.map((f) => f.check).join(", ")}`);
    return h(
      "div",
      { class: "overlay", role: "dialog", "aria-modal": "true", "aria-labelledby": "summary-title" },
      h(
        "section",
        { class: "card summary", "data-testid": "summary" },
        h("h2", { id: "summary-title" }, `Round ${s.round}: `, winner === null ? "nobody won (the pile ran out)" : `${seatName(winner)} won`),
        winner !== null && result
          ? h(
              "div",
              { class: "groups", "data-testid": "winning-groups" },
              ...result.winningGroups.map((g) => h("span", { class: "group" }, ...g.tiles.map((t) => tileEl(t)))),
              result.finalDiscard ? h("span", { class: "group final" }, "discarded ", tileEl(result.finalDiscard)) : null,
            )
          : null,
        result && winner !== null ? h("p", {}, `Each loser pays ${result.winPayout}${result.bowlTaken ? "; the winner takes the bowl" : ""}.`) : null,
        h("h3", {}, "Who paid whom this round"),
        saved.payments[s.round]?.length
          ? h(
              "ul",
              { class: "payments", "data-testid": "payments" },
              ...saved.payments[s.round]!.map((p) => h("li", {}, `${accountName(p.from)} → ${accountName(p.to)}: ${p.amount} (${p.reason})`)),
            )
          : s.transfers === null
            ? h("p", {}, "settling…")
            : h(
                "ul",
                { class: "payments", "data-testid": "payments" },
                ...s.transfers.map((t) => {
                  const p = t.posting!;
                  return h("li", {}, `${accountName(p.fromAccount)} → ${accountName(p.toAccount)}: ${p.amount} (${reasonText(p.reason)})`);
                }),
              ),
        h(
          "p",
          {},
          "Your balance at the table: ",
          h("strong", { "data-testid": "summary-seat-balance" }, `${mySeat?.balance ?? ""}`),
          " — in your wallet: ",
          h("strong", { "data-testid": "summary-wallet-balance" }, s.wallet === null ? "…" : `${s.wallet}`),
        ),
        h("p", { "data-testid": "fairness" }, "Fair deal: ", fairness),
        h("button", { class: "primary", onclick: closeSummary, "data-testid": "close-summary" }, "Continue"),
      ),
    );
  }

  function draw(): void {
    if (abort.signal.aborted) return;
    if (!view) {
      replace(root, h("p", { class: "status" }, status || "Loading the table…"));
      return;
    }
    const v = view;
    const round = v.round;
    const me = mySeatOf(v);
    const invite = sessionStorage.getItem(`kishpa.invite.${tableId}`);
    const kishpa = round?.gameRound.case === "kishpa" ? round.gameRound.value : null;
    const myTurn = round !== undefined && turnSeatOf(round) === me && me !== null;
    const windowOpen = can(PlayerAction.REVEAL_KISHPA) || can(PlayerAction.DECLINE_REVEAL);
    const buttons = [
      can(PlayerAction.START_GAME) ? h("button", { class: "primary", onclick: start, "data-testid": "start" }, "Start") : null,
      can(PlayerAction.DRAW_PILE) ? h("button", { class: "primary", onclick: drawPile, "data-testid": "draw", "aria-keyshortcuts": "d" }, "Draw (d)") : null,
      can(PlayerAction.DRAW_DISCARD) ? h("button", { onclick: takeDiscard, "data-testid": "take", "aria-keyshortcuts": "t" }, "Take discard (t)") : null,
      can(PlayerAction.DISCARD) ? h("button", { onclick: discard, "data-testid": "discard", "aria-keyshortcuts": "x" }, selected !== null ? "Discard selected (x)" : "Discard suggested (x)") : null,
      can(PlayerAction.WIN) && hint?.winningDiscards.length ? h("button", { class: "win", onclick: win, "data-testid": "win", "aria-keyshortcuts": "w" }, "Win (w)") : null,
      can(PlayerAction.REVEAL_KISHPA) ? h("button", { class: "primary", onclick: reveal, "data-testid": "reveal" }, "Reveal kishpa") : null,
      can(PlayerAction.DECLINE_REVEAL) ? h("button", { onclick: pass, "data-testid": "pass" }, "Pass") : null,
      round?.myRack?.tiles.length ? h("button", { class: "link", onclick: () => void arrange(), "data-testid": "arrange", "aria-keyshortcuts": "a" }, "Arrange (a)") : null,
      can(PlayerAction.PRESS_LAST_ROUND) ? h("button", { class: "link", onclick: lastRound, "data-testid": "last-round" }, "Last round") : null,
      h("button", { class: "link", onclick: leave, "data-testid": "leave" }, "Leave"),
    ];
    const hintText = hint
      ? hint.winningDiscards.length
        ? `You can win: discard ${hint.winningDiscards[0]!.face}.`
        : `${hint.groups.length} group${hint.groups.length === 1 ? "" : "s"}, ${hint.looseTiles.length} loose tile${hint.looseTiles.length === 1 ? "" : "s"}.`
      : "";
    replace(
      root,
      h(
        "div",
        { class: "table", "data-testid": "table", "data-round": round?.round ?? 0, "data-phase": round ? RoundPhase[round.phase] : "", "data-my-turn": myTurn ? "true" : "false" },
        h(
          "div",
          { class: "facts" },
          h("span", {}, v.status === TableStatus.WAITING ? "Waiting for players" : v.status === TableStatus.CLOSED ? "Table closed" : `Round ${round?.round ?? ""}`),
          kishpa?.kishpa ? h("span", { class: "fact" }, "kishpa ", tileEl(kishpa.kishpa, { "data-testid": "kishpa" })) : null,
          kishpa?.jokerFace ? h("span", { class: "fact" }, "joker ", tileEl({ id: -1, face: kishpa.jokerFace } as Tile)) : null,
          h("span", { class: "fact", "data-testid": "bowl" }, `bowl ${v.bowl}`),
          round ? h("span", { class: "fact" }, `pile ${round.pileCount}`) : null,
          timerEl(),
          h("span", { class: `conn ${connection === "live" ? "ok" : ""}`, "data-testid": "connection" }, connection),
        ),
        invite && v.status === TableStatus.WAITING ? h("p", { class: "invite" }, "Invite code: ", h("strong", { "data-testid": "invite-code" }, invite)) : null,
        seatsEl(),
        h(
          "div",
          { class: "discards", "data-testid": "discards", "aria-label": "discards, oldest first" },
          h("span", { class: "label" }, "Discards"),
          ...(round?.discards ?? []).slice(-16).map((t, i, all) => tileEl(t, { class: `${tileClass(t.face)} ${i === all.length - 1 ? "top" : ""}` })),
        ),
        h("p", { class: `turn ${myTurn || windowOpen ? "mine" : ""}`, "data-testid": "turn", "aria-live": "polite" }, windowOpen ? "Reveal window: reveal the kishpa if you hold it, or pass." : myTurn ? (can(PlayerAction.DRAW_PILE) ? "Your turn: draw a tile." : "Your turn: discard a tile, or win.") : round ? `${seatName(turnSeatOf(round))}${turnSeatOf(round) === null ? "" : "'s turn"}` : ""),
        rackEl(),
        h("div", { class: "actions" }, ...buttons),
        h("p", { class: "hint", "data-testid": "hint", "aria-live": "polite" }, hintText),
        status ? h("p", { class: "status", role: "status", "data-testid": "status" }, status) : null,
        h("details", { class: "log", open: true }, h("summary", {}, "Events"), h("ol", { "data-testid": "log", reversed: true }, ...[...saved.log].reverse().slice(0, 40).map((e) => h("li", { "data-id": e.id }, e.text)))),
        h("p", { class: "keys" }, "Keys: d draw · t take · x discard · w win · a arrange · Shift+←/→ move the focused tile"),
      ),
      summaryEl(),
    );
    if (focusTile !== null) {
      (root.querySelector(`[data-testid="rack-tile"][data-id="${focusTile}"]`) as HTMLElement | null)?.focus();
    }
  }

  const ticker = setInterval(() => {
    const el = root.querySelector('[data-testid="timer"]');
    if (el && view) el.replaceWith(timerEl());
  }, 500);

  draw();
  scheduleRefresh();
  void watch();
  return () => {
    abort.abort();
    clearInterval(ticker);
    document.removeEventListener("keydown", onKey);
  };
}
