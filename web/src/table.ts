// The table screen of both games: the view (GetTable) redrawn after every event of the
// WatchTable stream, the rack in the player's own order (kept on the server), actions,
// hints, the event log, the round-end summary and the fairness check. A dropped stream
// resumes after the last event id seen (kept in sessionStorage, so a reload resumes too):
// nothing lost, nothing twice. Hand adds the melds on the table, the opening count, laying
// off, releasing jokers and undo (its card logic is hand.ts).
import type { Tile } from "./gen/kishpa/common/v1/common_pb";
import { Game, GroupKind } from "./gen/kishpa/common/v1/common_pb";
import {
  DrawSource,
  PlayerAction,
  RoundPhase,
  TableStatus,
  type GetHintResponse,
  type Meld,
  type TableView,
} from "./gen/kishpa/table/v1/table_pb";
import type { Transfer } from "./gen/kishpa/wallet/v1/wallet_pb";
import { backoffMs, isTransient, knownSeed, onReconnecting, rememberNames, sleep, tables, wallet, withRetry, type Session } from "./api";
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
import type { TableVerdict } from "./fair";
import { OPENING_POINTS, arrangeCards, isJoker, layOrder, meldValue, suggestedDiscard } from "./hand";
import { rulesDialog } from "./rules";
import { leaveCostText, nextDealMs, pauseText, playAgain, readyButton, rematchText, rememberLeft, rememberTable } from "./between";
import { dealEnded, muteButton, yourTurn } from "./feel";
import { resumeAfter } from "./trimmed";
import { errorText, h, isRepeat, replace, tileClass, tileLabel, tileTitle, touchOnly, type Attrs } from "./ui";

interface Saved {
  lastId: string;
  log: { id: string; text: string; kind: string }[];
  arranged: number[];
  /** Hand: the player moved a card, so the rack keeps his order (else it is arranged for him). */
  ownOrder?: boolean;
  /** Every payment of each round, from its settlements' events (who paid whom and why). */
  payments: Record<number, UiPayment[]>;
  /** The reveal window now open (Kishpa): at the round's start or its end. */
  window?: string;
}

const LOG_LIMIT = 200;

function compareIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split("-").map(Number);
  const [bm = 0, bs = 0] = b.split("-").map(Number);
  return am - bm || as - bs;
}

/** The fairness check's verdict and its sentence (docs/fairness.md). */
type Verdict = TableVerdict & { summary: string };

interface Summary {
  round: number;
  /** The table as the deal ended: the summary is drawn from it only, so it never changes. */
  view: TableView;
  transfers: Transfer[] | null;
  wallet: bigint | null;
  fairness: Verdict | "checking" | string;
}

export function openTable(root: HTMLElement, tableId: string, session: Session): () => void {
  const storeKey = `kishpa.table.${tableId}`;
  const saved: Saved = { lastId: "", log: [], arranged: [], payments: {}, ...JSON.parse(sessionStorage.getItem(storeKey) ?? "{}") };
  const persist = () => sessionStorage.setItem(storeKey, JSON.stringify(saved));
  const abort = new AbortController();
  const keysShown = !touchOnly();
  let view: TableView | null = null;
  let hint: GetHintResponse | null = null;
  let hintFor = "";
  /** Picked tiles: one at Kishpa, any number at Hand (a meld to lay, cards to lay off). */
  let picked: number[] = [];
  let status = "";
  let statusAt = 0;
  let streamDown = false;
  let retrying = false;
  let summary: Summary | null = null;
  let rulesOpen = false;
  let dismissed = Number(sessionStorage.getItem(`${storeKey}.dismissed`) ?? "0");
  let refreshing: Promise<void> | null = null;
  let again = false;
  let busy = false;
  let focusAfterDraw: string | null = null;
  /** The last summary, kept as the record of its deal once the next deal began. */
  let record: Summary | null = null;
  let leaving = false;
  /** The card the last draw brought in (marked until the next move). */
  let drawnId: number | null = null;
  /** Hand, before opening: melds set aside to open with together. */
  let pending: number[][] = [];
  let turnKey = "";
  let rackFocused = false;

  const isHand = () => view?.settings?.game === Game.HAND;
  const seatName = (seat: number | null): string => {
    if (seat === null || !view) return "Nobody";
    const s = view.seats[seat];
    if (!s) return `Seat ${seat + 1}`;
    if (s.playerId === session.playerId) return "You";
    return s.displayName || `Player ${seat + 1}`;
  };
  const accountName = (account: string): string => {
    if (account === "bank") return "the bank";
    if (account.startsWith("bowl:")) return "the bowl";
    if (account.startsWith("pot:")) return "the pot";
    const player = account.replace(/^player:/, "");
    if (player === session.playerId) return "you";
    const seat = view?.seats.findIndex((s) => s.playerId === player) ?? -1;
    return seat >= 0 ? seatName(seat) : "another player";
  };
  const jokerFace = () => (view?.round?.gameRound.case === "kishpa" ? view.round.gameRound.value.jokerFace : "");
  const nameOf = (face: string) => tileTitle(face, jokerFace());

  const say = (text: string) => {
    status = text;
    statusAt = Date.now();
  };

  // ---- the stream ----------------------------------------------------------------------

  let summaryNeeded = false;

  function onEvent(ev: UiEvent): void {
    if (saved.lastId && compareIds(ev.id, saved.lastId) <= 0) return; // seen before a reconnect
    saved.lastId = ev.id;
    const text = describe(ev, (seat) => seatName(seat), view ? mySeatOf(view) : null, (face) => tileTitle(face, ev.joker ?? jokerFace()), isHand());
    if (text) {
      saved.log.push({ id: ev.id, text, kind: ev.kind });
      if (saved.log.length > LOG_LIMIT) saved.log.splice(0, saved.log.length - LOG_LIMIT);
    }
    if (dealtTiles(ev)) {
      saved.arranged = [];
      saved.ownOrder = false;
    }
    if (ev.kind === "reveal_window_opened") saved.window = ev.moment;
    if (ev.kind === "reveal_window_closed") delete saved.window;
    if (ev.payments?.length) saved.payments[ev.round] = [...(saved.payments[ev.round] ?? []), ...ev.payments];
    persist();
    // Between deals an event carries the round that ended: seed_committed is for the next.
    if (ev.kind === "seed_committed") void contribute(ev.round + 1);
    if (endsRound(ev)) summaryNeeded = true;
    // Any settlement moves the balances the summary shows (the next round's start can settle
    // while this round's summary is still open), so the wallet is read again after each one.
    else if (isSettled(ev) && summary) void readSettlement(summary, ev.round === summary.round);
    scheduleRefresh();
  }

  async function watch(): Promise<void> {
    for (let attempt = 0; !abort.signal.aborted; ) {
      try {
        const request = { tableId, afterEventId: saved.lastId, batched: true };
        for await (const message of tables.watchTable(request, { signal: abort.signal })) {
          if (streamDown) {
            streamDown = false;
            draw();
          }
          attempt = 0;
          for (const event of message.events) onEvent(fromWire(event));
        }
        if (view?.status === TableStatus.CLOSED) return;
      } catch (err) {
        if (abort.signal.aborted) return;
        // Away for more than a round: the table is shown as it is now, and followed from there.
        const from = await resumeAfter(err, reloadView);
        if (from !== null) {
          saved.lastId = from;
          persist();
          attempt = 0;
          continue;
        }
        if (!isTransient(err) && attempt > 8) {
          say(errorText(err));
        }
        streamDown = true;
        draw();
      }
      // Watch again after the last event seen: capped, jittered, for as long as the page is open.
      await sleep(backoffMs(attempt++), abort.signal);
      scheduleRefresh();
    }
  }
  async function reloadView(): Promise<string> {
    const got = (await withRetry(() => tables.getTable({ tableId }), abort.signal)).table;
    takeView(got);
    say("You were away for more than a round: here is the table as it is now.");
    draw();
    return got?.lastEventId ?? saved.lastId;
  }
  const stopListening = onReconnecting((on) => {
    retrying = on;
    draw();
  });

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

  function takeView(next: TableView | undefined): void {
    if (!next || (view && next.version < view.version)) return;
    if (view?.round && next.round && next.round.round !== view.round.round) {
      drawnId = null;
      pending = [];
    }
    view = next;
    if (view.settings) rememberTable(tableId, view.settings.game);
    rememberNames(view.seats.filter((s) => s.playerId && s.playerId !== session.playerId).map((s) => [s.playerId, s.displayName] as [string, string]));
    const rack = new Set(view.round?.myRack?.tiles.map((t) => t.id) ?? []);
    picked = picked.filter((id) => rack.has(id));
  }

  // ---- fair deals: a random contribution to each deal once its commitment is out ---------

  const contributed: Record<number, string> = {};

  async function contribute(deal: number): Promise<void> {
    if (deal in contributed || !view || mySeatOf(view) === null) return;
    const text = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
    contributed[deal] = text;
    try {
      await withRetry((requestId) => tables.contribute({ tableId, deal, contribution: text, requestId }), abort.signal);
    } catch {
      delete contributed[deal]; // too late (dealt already): the deal uses this seat's default
    }
  }

  async function refresh(): Promise<void> {
    try {
      takeView((await withRetry(() => tables.getTable({ tableId }), abort.signal)).table);
      if (view?.nextDeal && !view.contributed) void contribute(view.nextDeal);
    } catch (err) {
      say(errorText(err));
      draw();
      return;
    }
    if (status && Date.now() - statusAt > 6000) status = ""; // an old message does not linger for turns
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
      if (hint && !isHand() && saved.arranged.length === 0 && round!.myRack!.tiles.length >= 14) await arrange();
    }
    if (!live) hint = null;
    if (summary && summary !== record && round && round.round > summary.round) {
      // The next deal began: the summary goes (unchanged) to the record, the table shows.
      // (A record the player reopened stays open while the next deal plays on.)
      record = summary;
      dismissed = summary.round;
      sessionStorage.setItem(`${storeKey}.dismissed`, String(dismissed));
      summary = null;
      focusAfterDraw = "rack";
    }
    if (round && round.phase === RoundPhase.ENDED && round.round > dismissed && (summaryNeeded || summary?.round !== round.round)) {
      summaryNeeded = false;
      void buildSummary(round.round);
    }
    draw();
  }

  async function arrange(): Promise<void> {
    if (isHand()) {
      // Hand's rack is arranged as it is drawn (shownRack) until the player moves a card.
      saved.ownOrder = false;
      persist();
      draw();
      return;
    }
    if (!view?.round?.myRack || !hint) return;
    // Loose tiles by colour, then number (dolls last), so a pair or a near-run reads at a glance.
    const key = (face: string) => ("RBYK".indexOf(face[0]!) + (face[0] === "D" ? 9 : 0)) * 20 + (Number(face.slice(1)) || 0);
    const loose = [...hint.looseTiles].sort((a, b) => key(a.face) - key(b.face));
    const order = [...hint.groups.flatMap((g) => g.tiles.map((t) => t.id)), ...loose.map((t) => t.id)];
    const have = new Set(view.round.myRack.tiles.map((t) => t.id));
    const ids = [...order.filter((id) => have.has(id)), ...[...have].filter((id) => !order.includes(id))];
    await setOrder(ids);
  }

  async function setOrder(ids: number[]): Promise<void> {
    try {
      const answer = await withRetry((requestId) => tables.setRackOrder({ tableId, tileIds: ids, requestId }), abort.signal);
      if (answer.rack && view?.round) view.round.myRack = answer.rack;
      saved.arranged = ids;
      persist();
    } catch (err) {
      say(errorText(err));
    }
    draw();
  }

  // ---- actions ---------------------------------------------------------------------------

  const can = (action: PlayerAction) => !!view?.availableActions.includes(action);

  /** One move: sent (again on an outage, with the same request id); its answer redraws at once. */
  async function act(what: string, call: (requestId: string) => Promise<{ table?: TableView; tile?: Tile }>): Promise<void> {
    if (busy) return; // a double press: the first one is on its way
    busy = true;
    drawnId = null; // the drawn card is marked until the next move
    say(what);
    draw();
    try {
      const answer = await withRetry(call, abort.signal);
      takeView(answer.table);
      if (answer.tile) drawnId = answer.tile.id;
      status = "";
    } catch (err) {
      // A second press the server already answered ("not your turn" now): nothing to say.
      status = isRepeat(err) ? "" : errorText(err);
      statusAt = Date.now();
    } finally {
      busy = false;
    }
    draw();
    scheduleRefresh();
  }

  const rackTiles = () => view?.round?.myRack?.tiles ?? [];
  /** The rack as shown: Hand's arranged by melds, suit and rank unless the player ordered it. */
  const shownRack = (): Tile[] => {
    const rack = rackTiles();
    if (!isHand() || saved.ownOrder) return rack;
    return arrangeCards(rack, suggestedMelds().map((g) => g.tiles)) as Tile[];
  };
  const drawPile = () => act("Drawing…", (requestId) => tables.draw({ tableId, source: DrawSource.PILE, requestId }));
  const topDiscard = (): Tile | null => view?.round?.discards.at(-1) ?? null;
  const takeDiscard = () => {
    const top = topDiscard();
    return act("Taking the discard…", async (requestId) => {
      const answer = await tables.draw({ tableId, source: DrawSource.DISCARD, requestId });
      return { table: answer.table, tile: answer.tile ?? top ?? undefined };
    });
  };
  const suggested = (): Tile | null => {
    const rack = rackTiles();
    if (!rack.length) return null;
    if (isHand()) return suggestedDiscard(hint?.looseTiles ?? [], rack) as Tile | null;
    const loose = hint?.looseTiles ?? [];
    return loose.length ? loose[loose.length - 1]! : rack[rack.length - 1]!;
  };
  const discard = () => {
    const tile = picked.length === 1 ? picked[0]! : suggested()?.id;
    if (tile === undefined || tile === null) return;
    picked = [];
    void act("Discarding…", (requestId) => tables.discard({ tableId, tileId: tile, requestId }));
  };
  const win = () => {
    const tile = hint?.winningDiscards[0]?.id ?? picked[0];
    if (tile === undefined) return;
    void act("Winning…", (requestId) => tables.win({ tableId, discardTileId: tile, requestId }));
  };
  const reveal = () => act("Revealing…", (requestId) => tables.revealKishpa({ tableId, requestId }));
  const pass = () => act("Passing…", (requestId) => tables.declineReveal({ tableId, requestId }));
  const start = () => act("Starting…", (requestId) => tables.startGame({ tableId, requestId }));
  const lastRound = () => act("Pressing last round…", (requestId) => tables.pressLastRound({ tableId, requestId }));
  const askLeave = () => {
    leaving = true;
    draw();
    root.querySelector<HTMLElement>('[data-key="leave-confirm"]')?.focus({ preventScroll: true });
  };
  const leave = () => {
    leaving = false;
    const playing = view?.status === TableStatus.PLAYING;
    return act("Leaving…", async (requestId) => {
      const answer = await tables.leaveTable({ tableId, requestId });
      if (playing && answer.table?.status === TableStatus.PLAYING) rememberLeft(tableId);
      location.hash = "#/";
      return answer;
    });
  };
  /** Play again: a new table with the same players, bots and stake (each human accepts). */
  const replay = () =>
    act("Opening the new table…", async (requestId) => {
      const next = await playAgain(tableId, requestId);
      if (next) location.hash = `#/table/${next}`;
      return {};
    });
  const ready = () => {
    const round = summary?.round ?? view?.round?.round ?? 0;
    void act("Ready…", (requestId) => tables.ready({ tableId, round, requestId }));
  };

  // Hand
  const hand = () => (view?.round?.gameRound.case === "hand" ? view.round.gameRound.value : null);
  const opened = () => {
    const me = view ? mySeatOf(view) : null;
    return me !== null && !!hand()?.openedSeats.includes(me);
  };
  const pickedCards = () => rackTiles().filter((t) => picked.includes(t.id));
  const suggestedMelds = () => (isHand() ? hint?.groups.filter((g) => g.tiles.length >= 3) ?? [] : []);
  const suggestedValue = () => suggestedMelds().reduce((sum, g) => sum + meldValue(g.tiles.map((t) => t.face)), 0);
  const laySuggested = () => {
    const melds = suggestedMelds().map((g) => ({ tileIds: g.tiles.map((t) => t.id) }));
    if (!melds.length) return;
    picked = [];
    void act(opened() ? "Laying melds…" : "Opening…", (requestId) => tables.layMelds({ tableId, melds, requestId }));
  };
  const layPicked = () => {
    const cards = layOrder(pickedCards());
    if (cards.length < 3) {
      say("Pick three or more cards to lay as a meld.");
      draw();
      return;
    }
    picked = [];
    void act("Laying the meld…", (requestId) => tables.layMelds({ tableId, melds: [{ tileIds: cards.map((c) => c.id) }], requestId }));
  };
  const layOff = (meld: Meld) => {
    const [card] = picked;
    if (card === undefined || picked.length !== 1) {
      say("Pick one card of yours first, then the meld to add it to.");
      draw();
      return;
    }
    picked = [];
    focusAfterDraw = `meld-${meld.meldId}`;
    void act("Laying off…", (requestId) => tables.layOff({ tableId, meldId: meld.meldId, tileId: card, requestId }));
  };
  const release = (meld: Meld) => {
    const cards = [...picked];
    if (!cards.length) {
      say("Pick the card (or two) that takes the joker's place, then Release.");
      draw();
      return;
    }
    picked = [];
    void act("Releasing the joker…", (requestId) => tables.releaseJoker({ tableId, meldId: meld.meldId, tileIds: cards, requestId }));
  };
  const undo = () => act("Taking the turn back…", (requestId) => tables.undoTurn({ tableId, requestId }));
  // Composing an opening: picked cards set aside as melds until they reach 51 together.
  const pendingValue = () => pending.reduce((sum, m) => sum + meldValue(layOrder(rackTiles().filter((t) => m.includes(t.id))).map((c) => c.face)), 0);
  const setAside = () => {
    if (pickedCards().length < 3) {
      say("Pick three or more cards for each meld.");
      draw();
      return;
    }
    pending = [...pending, layOrder(pickedCards()).map((c) => c.id)];
    picked = [];
    draw();
  };
  const openPending = () => {
    const melds = pending.map((ids) => ({ tileIds: ids }));
    pending = [];
    void act("Opening…", (requestId) => tables.layMelds({ tableId, melds, requestId }));
  };

  function moveTile(id: number, delta: number): void {
    const ids = shownRack().map((t) => t.id);
    const from = ids.indexOf(id);
    const to = from + delta;
    if (from < 0 || to < 0 || to >= ids.length) return;
    ids.splice(to, 0, ...ids.splice(from, 1));
    focusAfterDraw = `tile-${id}`;
    saved.ownOrder = true;
    void setOrder(ids);
  }

  function dropTile(id: number, beforeId: number | null): void {
    const ids = shownRack().map((t) => t.id).filter((t) => t !== id);
    const at = beforeId === null ? ids.length : ids.indexOf(beforeId);
    ids.splice(at < 0 ? ids.length : at, 0, id);
    saved.ownOrder = true;
    void setOrder(ids);
  }

  function togglePick(id: number): void {
    if (pending.some((m) => m.includes(id))) {
      pending = pending.filter((m) => !m.includes(id)); // back from the melds set aside
      focusAfterDraw = `tile-${id}`;
      draw();
      return;
    }
    if (isHand()) picked = picked.includes(id) ? picked.filter((p) => p !== id) : [...picked, id];
    else picked = picked[0] === id ? [] : [id];
    focusAfterDraw = `tile-${id}`;
    draw();
  }

  function onKey(e: KeyboardEvent): void {
    if (!view || e.target instanceof HTMLInputElement || e.target instanceof HTMLSelectElement || e.ctrlKey || e.metaKey || e.altKey) return;
    const key = e.key.toLowerCase();
    if (key === "escape") {
      if (rulesOpen) closeRules();
      else if (leaving) ((leaving = false), draw());
      else if (summary) closeSummary();
      return;
    }
    if (summary || rulesOpen || leaving) return;
    if (key === "d" && can(PlayerAction.DRAW_PILE)) void drawPile();
    else if (key === "t" && can(PlayerAction.DRAW_DISCARD)) void takeDiscard();
    else if (key === "x" && can(PlayerAction.DISCARD)) discard();
    else if (key === "w" && can(PlayerAction.WIN) && hint?.winningDiscards.length) win();
    else if (key === "r" && can(PlayerAction.REVEAL_KISHPA)) void reveal();
    else if (key === "p" && can(PlayerAction.DECLINE_REVEAL)) void pass();
    else if (key === "m" && can(PlayerAction.LAY_MELDS) && suggestedMelds().length) laySuggested();
    else if (key === "g" && can(PlayerAction.LAY_MELDS) && picked.length >= 3) (opened() ? layPicked : setAside)();
    else if (key === "u" && can(PlayerAction.UNDO_TURN)) void undo();
    else if (key === "a") void arrange();
    else if (key === "?") openRules();
    else return;
    e.preventDefault();
  }
  document.addEventListener("keydown", onKey);

  // ---- round end -------------------------------------------------------------------------

  let summaryFocus = false;

  async function buildSummary(round: number): Promise<void> {
    if (summary?.round !== round) dealEnded();
    summary = { round, view: view!, transfers: summary?.round === round ? summary.transfers : null, wallet: null, fairness: summary?.round === round ? summary.fairness : "checking" };
    summaryFocus = true;
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
      if (transfers) current.transfers = [...(await withRetry(() => wallet.listTransfers({ tableId, round: current.round, pageSize: 100 }), abort.signal)).transfers].reverse();
      const tokens = (await withRetry(() => wallet.getBalance({}), abort.signal)).balance?.tokens ?? null;
      if (read === walletReads) current.wallet = tokens; // an older read answering late is stale
    } catch (err) {
      current.transfers ??= [];
      say(errorText(err));
    }
    draw();
  }

  async function checkFairness(round: number): Promise<Verdict | string> {
    try {
      const record = (await withRetry(() => tables.getRoundRecord({ tableId, round }), abort.signal)).record!;
      // What this seat handed in for the deal: its contribution (this page's, or after a
      // reload the one the record shows for it), else its sit-down seed.
      const mine = record.contributions.find((c) => c.seat === record.mySeat)?.contribution;
      const mySeed = contributed[round] ?? mine ?? knownSeed(tableId) ?? record.clientSeeds[record.mySeat] ?? "";
      // This page's own contribution, when it made one, must be in the deal (named if so).
      // The verifier is a part of its own, loaded when a round first ends (docs/web.md).
      const fair = await import("./fair");
      const verdict = await fair.verifyTable(fair.evidenceFromRecord(record, mySeed, { myContribution: contributed[round] ?? null }));
      return { ...verdict, summary: fair.tableSummary(verdict) };
    } catch (err) {
      return `could not check: ${errorText(err)}`;
    }
  }


  function closeSummary(): void {
    if (!summary) return;
    dismissed = summary.round;
    sessionStorage.setItem(`${storeKey}.dismissed`, String(dismissed));
    record = summary; // kept, unchanged, as the record of its deal
    summary = null;
    focusAfterDraw = "after-summary";
    draw();
  }

  function openRules(): void {
    rulesOpen = true;
    draw();
    (root.querySelector('[data-testid="rules-dialog"]') as HTMLElement | null)?.focus();
  }

  function closeRules(): void {
    rulesOpen = false;
    focusAfterDraw = "rules";
    draw();
  }

  // ---- drawing ---------------------------------------------------------------------------

  const tileEl = (tile: Tile, extra: Attrs = {}) =>
    h("span", { class: tileClass(tile.face), role: "img", "aria-label": nameOf(tile.face), title: nameOf(tile.face), "data-face": tile.face, "data-id": tile.id, ...extra }, tileLabel(tile.face));

  function rackEl(): HTMLElement | null {
    const rack = shownRack();
    if (!rack.length) return null;
    const groupOf = new Map<number, number>();
    // Hand: only the melds the hint would lay (3 cards or more) count as groups.
    hint?.groups.forEach((g, i) => (!isHand() || g.tiles.length >= 3) && g.tiles.forEach((t) => groupOf.set(t.id, i)));
    const winning = new Set(hint?.winningDiscards.map((t) => t.id));
    const suggestion = can(PlayerAction.DISCARD) ? suggested()?.id : undefined;
    const items: HTMLElement[] = [];
    rack.forEach((tile, index) => {
      const group = groupOf.get(tile.id);
      const prev = index > 0 ? groupOf.get(rack[index - 1]!.id) : undefined;
      if (index > 0 && group !== prev) items.push(h("span", { class: "gap", "aria-hidden": "true" }));
      const isPicked = picked.includes(tile.id);
      const aside = pending.some((m) => m.includes(tile.id));
      const notes = [
        tile.id === drawnId ? "just drawn" : "",
        aside ? "set aside for your opening" : "",
        group !== undefined ? `in a ${hint!.groups[group]!.kind === GroupKind.RUN ? "run" : "set"}` : "",
        suggestion === tile.id ? "suggested discard" : "",
        winning.has(tile.id) ? "discard it to win" : "",
      ].filter(Boolean);
      const name = `${nameOf(tile.face)}${notes.length ? `, ${notes.join(", ")}` : ""}`;
      items.push(
        h(
          "button",
          {
            class: `${tileClass(tile.face)} ${isPicked ? "selected" : ""} ${tile.id === drawnId ? "drawn" : ""} ${aside ? "aside" : ""} ${group !== undefined ? "grouped" : ""} ${winning.has(tile.id) ? "winning" : ""} ${tile.face === jokerFace() ? "joker" : ""}`,
            title: name,
            "aria-pressed": isPicked ? "true" : "false",
            "data-testid": "rack-tile",
            "data-key": `tile-${tile.id}`,
            "data-face": tile.face,
            "data-id": tile.id,
            "data-suggested": suggestion === tile.id ? "true" : undefined,
            "data-drawn": tile.id === drawnId ? "true" : undefined,
            draggable: "true",
            onclick: () => togglePick(tile.id),
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
          // The name is read from the content: the face shown, and its name for screen readers.
          h("span", { "aria-hidden": "true" }, tileLabel(tile.face)),
          h("span", { class: "visually-hidden" }, name),
        ),
      );
    });
    return h(
      "div",
      {
        class: "rack",
        role: "group",
        "aria-label": isHand() ? (keysShown ? "Your hand (Shift+arrows move the focused card)" : "Your hand") : keysShown ? "Your rack (Shift+arrows move the focused tile)" : "Your rack",
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
    const hr = hand();
    return h(
      "ol",
      { class: "seats", "data-testid": "seats", "aria-label": "Players" },
      ...v.seats.map((s, i) =>
        h(
          "li",
          { class: `seat ${turn === i ? "turn" : ""} ${me === i ? "me" : ""}`, "data-testid": `seat-${i}`, "data-bot": s.bot ? "true" : "false", "aria-current": turn === i ? "true" : undefined },
          h("span", { class: "name" }, s.playerId ? seatName(i) : "(free seat)", s.bot ? h("span", { class: "badge" }, "bot") : null, turn === i ? h("span", { class: "badge turn-badge" }, "playing") : null),
          h("span", { class: "count" }, `${s.tileCount} ${isHand() ? "cards" : "tiles"}`),
          h("span", { class: "balance", "data-testid": `balance-${i}`, title: "tokens" }, `${s.balance} tokens`),
          isHand() ? h("span", { class: "score", "data-testid": `score-${i}` }, `${s.score} points${hr?.openedSeats.includes(i) ? " · opened" : ""}`) : null,
          s.streak ? h("span", { class: "streak" }, `${s.streak} win${s.streak > 1 ? "s" : ""} in a row`) : null,
        ),
      ),
    );
  }

  /** The countdown, labelled by what it counts; other players' turns show no seconds. */
  function timerEl(): HTMLElement {
    const at = deadlineMsOf(view?.round);
    const el = h("span", { class: "timer", "data-testid": "timer" });
    const round = view?.round;
    if (at === null || !round || !view) return el;
    const left = Math.max(0, Math.ceil((at - Date.now()) / 1000));
    const me = mySeatOf(view);
    const turn = turnSeatOf(round);
    const windowOpen = round.phase === RoundPhase.START_REVEAL || round.phase === RoundPhase.END_REVEAL;
    if (windowOpen) el.textContent = `Reveal window: ${left} s`;
    else if (turn !== null && turn === me) {
      el.textContent = `Your turn: ${left} s left`;
      if (left <= 10) el.classList.add("urgent");
    } else return el;
    return el;
  }

  function turnText(): string {
    const v = view!;
    const round = v.round;
    if (v.status === TableStatus.WAITING && v.rematchOf) return rematchText(v);
    if (v.status === TableStatus.WAITING) return `Waiting for players (${v.seats.filter((s) => s.playerId).length} of ${v.settings?.seats ?? 0} seated).`;
    if (v.status === TableStatus.CLOSED) return "The table has closed.";
    if (!round) return "";
    const me = mySeatOf(v);
    const turn = turnSeatOf(round);
    const winner = winnerSeatOf(round.result);
    if (round.phase === RoundPhase.START_REVEAL || (round.phase !== RoundPhase.END_REVEAL && saved.window === "start" && turn === null)) {
      return can(PlayerAction.REVEAL_KISHPA)
        ? "Nobody holds a joker, so the kishpa will be replaced. You hold the kishpa: reveal it now for its bonus, or pass."
        : "Nobody holds a joker, so the kishpa will be replaced: a reveal window is open for whoever holds the kishpa.";
    }
    if (round.phase === RoundPhase.END_REVEAL) {
      const who = winner === null ? "The pile ran out: nobody won." : `${seatName(winner)} won the round.`;
      return can(PlayerAction.REVEAL_KISHPA)
        ? `${who} Reveal window: you hold the kishpa — reveal it for its bonus, or pass.`
        : `${who} A reveal window is open for whoever holds the kishpa.`;
    }
    if (round.phase === RoundPhase.ENDED) {
      // No countdown here (a live region): the summary and the dock's Ready say the time.
      const next = v.status === TableStatus.PLAYING && nextDealMs(v) !== null ? ` The next ${isHand() ? "deal" : "round"} starts when everyone is ready.` : "";
      if (isHand()) return `Deal ${round.round} is over.${next}`;
      return `${winner === null ? "Nobody won" : `${seatName(winner)} won`} round ${round.round}.${next}`;
    }
    if (turn !== null && turn === me) {
      if (can(PlayerAction.DRAW_PILE)) return isHand() ? "Your turn: draw a card (or take the top discard)." : "Your turn: draw a tile.";
      if (isHand()) return hand()?.mustUse ? `Your turn: use the ${nameOf(hand()!.mustUse!.face)} you took in a meld, then discard.` : "Your turn: lay melds or lay off if you can, then discard.";
      return hint?.winningDiscards.length ? "Your turn: you can win now!" : "Your turn: discard a tile.";
    }
    return turn === null ? "" : `${seatName(turn)}${seatName(turn) === "You" ? "r" : "'s"} turn.`;
  }

  function hintText(): string {
    if (!hint || !can(PlayerAction.DISCARD)) return "";
    if (hint.winningDiscards.length) return `You can win: discard the ${nameOf(hint.winningDiscards[0]!.face)}.`;
    const tile = picked.length === 1 ? null : suggested();
    const [group, piece] = isHand() ? ["meld", "card"] : ["group", "tile"];
    const count = isHand() ? suggestedMelds().length : hint.groups.length;
    const groups = `${count} ${group}${count === 1 ? "" : "s"}, ${hint.looseTiles.length} loose ${piece}${hint.looseTiles.length === 1 ? "" : "s"}.`;
    return tile ? `Suggested discard: the ${nameOf(tile.face)} (highlighted). ${groups}` : groups;
  }

  function meldsEl(): HTMLElement | null {
    const hr = hand();
    if (!hr) return null;
    const mine = can(PlayerAction.LAY_OFF) || can(PlayerAction.RELEASE_JOKER);
    return h(
      "section",
      { class: "melds", "aria-labelledby": "melds-title", "data-testid": "melds" },
      h("h2", { id: "melds-title", class: "small" }, "Melds on the table"),
      hr.melds.length === 0
        ? h("p", { class: "muted" }, "None yet.")
        : h(
            "ul",
            { class: "meld-list" },
            ...hr.melds.map((m) =>
              h(
                "li",
                { class: "meld", "data-testid": "meld", "data-meld": m.meldId },
                h("span", { class: "owner" }, `${seatName(m.seat)}:`),
                h("span", { class: "group" }, ...m.cards.map((c) => tileEl(c))),
                mine && can(PlayerAction.LAY_OFF) ? h("button", { class: "small", onclick: () => layOff(m), "data-key": `meld-${m.meldId}`, "data-testid": "lay-off" }, "Add here", h("span", { class: "visually-hidden" }, `: the picked card to ${m.cards.map((c) => nameOf(c.face)).join(", ")}`)) : null,
                mine && can(PlayerAction.RELEASE_JOKER) && m.cards.some((c) => isJoker(c.face)) ? h("button", { class: "small", onclick: () => release(m), "data-key": `release-${m.meldId}`, "data-testid": "release" }, "Release joker", h("span", { class: "visually-hidden" }, ` of ${m.cards.map((c) => nameOf(c.face)).join(", ")} with the picked cards`)) : null,
              ),
            ),
          ),
    );
  }

  function openingEl(): HTMLElement | null {
    const hr = hand();
    const me = view ? mySeatOf(view) : null;
    if (!hr || me === null || view?.round?.phase !== RoundPhase.TURNS) return null;
    if (opened()) return h("p", { class: "opening done", "data-testid": "opening" }, "✓ You have opened: lay off and meld freely.");
    const value = suggestedValue();
    const pickedValue = pickedCards().length >= 3 ? meldValue(layOrder(pickedCards()).map((c) => c.face)) : 0;
    if (pending.length) {
      const total = pendingValue();
      return h(
        "p",
        { class: `opening ${total >= OPENING_POINTS ? "ready" : ""}`, "data-testid": "opening" },
        h("meter", { min: 0, max: OPENING_POINTS, value: Math.min(total, OPENING_POINTS), "aria-label": "Opening points of the melds set aside" }),
        ` Your opening: ${pending.length} meld${pending.length === 1 ? "" : "s"} set aside, ${total} of the ${OPENING_POINTS} points${pickedValue ? ` (picked: ${pickedValue} more)` : ""}. Best possible: ${value}.`,
      );
    }
    return h(
      "p",
      { class: `opening ${value >= OPENING_POINTS ? "ready" : ""}`, "data-testid": "opening" },
      h("meter", { min: 0, max: OPENING_POINTS, value: Math.min(value, OPENING_POINTS), "aria-label": "Opening points in your best melds" }),
      ` Opening: your best melds are worth ${value} of the ${OPENING_POINTS} points you need${pickedValue ? ` (picked: ${pickedValue})` : ""}.`,
    );
  }

  /** The cards a seat was left holding, by suit and rank (none: the one who went out). */
  const leftInHand = (tiles: Tile[]): HTMLElement =>
    tiles.length ? h("span", { class: "group" }, ...(arrangeCards(tiles, []) as Tile[]).map((t) => tileEl(t))) : h("span", { class: "muted" }, "none");

  function summaryEl(): HTMLElement | null {
    if (!summary || !summary.view.round || !view) return null;
    const s = summary;
    // Everything about the deal comes from the view it ended with (the record never changes);
    // only the payments, the wallet and the pause below are live.
    const sv = s.view;
    const round = sv.round!;
    const result = round.result;
    const winner = winnerSeatOf(result);
    const me = mySeatOf(sv);
    const mySeat = me === null ? null : view.seats[me];
    const hr = round.gameRound.case === "hand" ? round.gameRound.value : null;
    const gameOver = !!hr?.payouts.length;
    const fairness =
      s.fairness === "checking"
        ? h("span", {}, "checking the deal…")
        : typeof s.fairness === "string"
          ? h("span", { class: "bad" }, s.fairness)
          : h("strong", { class: s.fairness.ok ? "good" : "bad", title: s.fairness.summary }, s.fairness.ok ? (s.fairness.wholeTable ? "table verified" : "deal verified") : `NOT verified: ${s.fairness.failed.map((f) => f.check).join(", ")}`);
    const title = gameOver
      ? gameEndTitle(sv, hr!.payouts)
      : hr
      ? `Deal ${s.round}${hr.dealsPerGame ? ` of ${hr.dealsPerGame}` : ""}: ${winner === null ? "the stock ran out, nobody went out" : `${seatName(winner)} went out${hr.handWin ? " with a hand" : ""}`}`
      : `Round ${s.round}: ${winner === null ? "nobody won (the pile ran out)" : `${seatName(winner)} won`}`;
    const handScores = hr
      ? h(
          "table",
          { class: "scores", "data-testid": "deal-scores" },
          h("caption", {}, "Points"),
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Player"), h("th", { scope: "col" }, "This deal"), h("th", { scope: "col" }, "Total"), hr.payouts.length ? h("th", { scope: "col" }, "From the pot") : null, h("th", { scope: "col" }, "Left in hand"))),
          h(
            "tbody",
            {},
            ...sv.seats.map((seat, i) =>
              h(
                "tr",
                {},
                h("th", { scope: "row" }, seatName(i)),
                h("td", {}, `${hr.dealScores[i] ?? ""}`),
                h("td", {}, `${seat.score}`),
                hr.payouts.length ? h("td", { "data-testid": `payout-${i}` }, `${hr.payouts[i] ?? 0n} tokens`) : null,
                h("td", {}, leftInHand(hr.endHands.find((e) => e.seat === i)?.tiles ?? [])),
              ),
            ),
          ),
        )
      : null;
    const payments = saved.payments[s.round]?.length
      ? h("ul", { class: "payments", "data-testid": "payments" }, ...saved.payments[s.round]!.map((p) => h("li", {}, `${accountName(p.from)} → ${accountName(p.to)}: ${p.amount} (${p.reason})`)))
      : s.transfers === null
        ? h("p", {}, "settling…")
        : s.transfers.length
          ? h(
              "ul",
              { class: "payments", "data-testid": "payments" },
              ...s.transfers.map((t) => {
                const p = t.posting!;
                return h("li", {}, `${accountName(p.fromAccount)} → ${accountName(p.toAccount)}: ${p.amount} (${reasonText(p.reason)})`);
              }),
            )
          : h("p", { "data-testid": "payments" }, hr ? (hr.payouts.length ? "The pot is being paid out…" : "No tokens move until the game's last deal: then the pot is split by the totals.") : "No payments this round.");
    return h(
      "div",
      { class: "overlay" },
      h(
        "section",
        { class: "card summary", role: "dialog", "aria-modal": "true", "aria-labelledby": "summary-title", "data-testid": "summary", tabindex: -1 },
        h("h2", { id: "summary-title" }, title),
        !hr && winner !== null && result
          ? h(
              "div",
              { class: "groups", "data-testid": "winning-groups", role: "group", "aria-label": "The winning hand" },
              ...result.winningGroups.map((g) => h("span", { class: "group" }, ...g.tiles.map((t) => tileEl(t)))),
              result.finalDiscard ? h("span", { class: "group final" }, "discarded ", tileEl(result.finalDiscard)) : null,
            )
          : null,
        !hr && result && winner !== null ? h("p", {}, `Each other player pays ${result.winPayout}${result.bowlTaken ? "; the winner also takes the bowl (two wins in a row)" : ""}.`) : null,
        handScores,
        gameOver ? gameEndEl(sv, hr!.payouts, winner) : null,
        h("h3", {}, "Who paid whom"),
        payments,
        h(
          "p",
          {},
          // One balance, two moments: the wallet after this table's last payment, and now
          // (every table counted), so the two never read as a contradiction.
          "Your wallet after this table's last payment: ",
          h("strong", { "data-testid": "summary-seat-balance" }, `${mySeat?.balance ?? ""}`),
          " — now, with all your tables: ",
          h("strong", { "data-testid": "summary-wallet-balance" }, s.wallet === null ? "…" : `${s.wallet}`),
        ),
        h("p", { "data-testid": "fairness" }, "Fair deal: ", fairness),
        summaryFooter(s),
      ),
    );
  }

  /** The live part under the record: the pause ("Next deal in 12 s · Ready"), or the way out. */
  function summaryFooter(s: Summary): HTMLElement {
    const v = view!;
    const closed = v.status === TableStatus.CLOSED;
    const pausing = nextDealMs(v) !== null && v.round?.round === s.round;
    // Continue, in the pause, is "Ready": the player has read the summary (the record stays
    // one click away once the next deal began).
    const canReady = pausing && can(PlayerAction.READY);
    const onContinue = canReady ? () => (ready(), closeSummary()) : closeSummary;
    return h(
      "div",
      { class: "summary-actions" },
      pausing ? h("p", { class: "pause", "data-testid": "pause" }, pauseText(v)) : null,
      closed && mySeatOf(s.view) !== null ? h("button", { class: "primary", onclick: replay, "data-testid": "play-again", "data-key": "play-again" }, "Play again") : null,
      closed ? h("a", { class: "button", href: "#/", "data-testid": "to-lobby", "data-key": "to-lobby" }, "Back to the lobby") : null,
      h("button", { class: closed ? "" : "primary", onclick: onContinue, "data-testid": "close-summary", "data-key": "close-summary", "data-ready": canReady ? "true" : undefined }, closed ? "See the table" : canReady ? "Ready" : "Continue"),
    );
  }

  /** "Ann wins the game: 30 of the pot's 40 tokens" (tied leaders share the headline). */
  function gameEndTitle(sv: TableView, payouts: bigint[]): string {
    const best = sv.seats.reduce((top, seat) => (seat.score > top ? seat.score : top), sv.seats[0]?.score ?? 0n);
    const leaders = sv.seats.map((seat, i) => (seat.score === best ? i : -1)).filter((i) => i >= 0);
    const pot = payouts.reduce((sum, p) => sum + p, 0n);
    const names = leaders.map((i) => seatName(i));
    const share = leaders.map((i) => payouts[i] ?? 0n).reduce((a, b) => a + b, 0n);
    const verb = names.length === 1 ? (names[0] === "You" ? "win" : "wins") : "share";
    return `${names.join(" and ")} ${verb} the game: ${share} of the pot's ${pot} tokens`;
  }

  /** The player's result in tokens and the pot rule in a sentence. */
  function gameEndEl(sv: TableView, payouts: bigint[], lastWinner: number | null): HTMLElement {
    const me = mySeatOf(sv);
    const stake = sv.settings?.stake || 1n;
    const got = me === null ? 0n : payouts[me] ?? 0n;
    const net = got - stake;
    const result = me === null ? "" : net > 0n ? `You won ${net} tokens (${got} from the pot, less your ${stake} buy-in).` : net < 0n ? `You lost ${-net} tokens (your ${stake} buy-in${got ? `, ${got} back from the pot` : ""}).` : `You are even: your ${stake} buy-in came back.`;
    return h(
      "div",
      { "data-testid": "pot-split" },
      h("p", { class: "result", "data-testid": "my-result" }, result),
      h("p", {}, `The best total takes at least 75% of the pot; the other 25% is shared by the players within 50 points of it, the closer the more${lastWinner !== null ? ` (the last deal went to ${seatName(lastWinner)})` : ""}.`),
    );
  }

  /** Leaving, said in tokens before it happens (docs/rules "leaving the table"). */
  function leaveEl(): HTMLElement | null {
    if (!leaving || !view) return null;
    return h(
      "div",
      { class: "overlay" },
      h(
        "section",
        { class: "card summary", role: "alertdialog", "aria-modal": "true", "aria-labelledby": "leave-title", "aria-describedby": "leave-cost", "data-testid": "leave-dialog" },
        h("h2", { id: "leave-title" }, "Leave the table?"),
        h("p", { id: "leave-cost", "data-testid": "leave-cost" }, leaveCostText(view)),
        view.status === TableStatus.PLAYING ? h("p", {}, "You can come back to your seat from the lobby while the table plays.") : null,
        h(
          "div",
          { class: "summary-actions" },
          h("button", { class: "primary", onclick: () => ((leaving = false), draw()), "data-testid": "stay", "data-key": "leave-stay" }, "Stay"),
          h("button", { onclick: () => void leave(), "data-testid": "leave-confirm", "data-key": "leave-confirm" }, "Leave"),
        ),
      ),
    );
  }

  /** "Take the 7 of hearts": the card named; a warning when it cannot be used now. */
  function takeButton(key: string): HTMLElement {
    const top = topDiscard();
    const name = top ? nameOf(top.face) : "discard";
    // Hand: a card taken from the pile must be used this turn; before the opening, in it.
    const warn = isHand() && !opened() ? " (only to open with it)" : isHand() ? " (to use this turn)" : "";
    return h("button", { onclick: takeDiscard, "data-testid": "take", "aria-keyshortcuts": "t", "data-warn": warn ? "true" : undefined }, `Take the ${name}${warn}${key}`);
  }

  /** "Discard the red 8": the card the button acts on, picked or suggested. */
  function discardButton(pickedOne: boolean, key: string): HTMLElement {
    const tile = pickedOne ? rackTiles().find((t) => t.id === picked[0]) : suggested();
    const name = tile ? nameOf(tile.face) : pickedOne ? "picked" : "suggested";
    return h("button", { onclick: discard, "data-testid": "discard", "aria-keyshortcuts": "x" }, `Discard the ${name}${key}`);
  }

  const v0 = () => view!;

  function actionsEl(): HTMLElement {
    const k = (key: string) => (keysShown ? ` (${key})` : "");
    const handy = isHand();
    const pickedOne = picked.length === 1;
    const value = suggestedValue();
    const buttons = [
      can(PlayerAction.START_GAME) ? h("button", { class: "primary", onclick: start, "data-testid": "start" }, "Start") : null,
      view ? readyButton(view, ready) : null,
      can(PlayerAction.REVEAL_KISHPA) ? h("button", { class: "primary", onclick: reveal, "data-testid": "reveal", "aria-keyshortcuts": "r" }, `Reveal the kishpa${k("r")}`) : null,
      can(PlayerAction.DECLINE_REVEAL) ? h("button", { onclick: pass, "data-testid": "pass", "aria-keyshortcuts": "p" }, `Pass${k("p")}`) : null,
      can(PlayerAction.DRAW_PILE) ? h("button", { class: "primary", onclick: drawPile, "data-testid": "draw", "aria-keyshortcuts": "d" }, `Draw${k("d")}`) : null,
      can(PlayerAction.DRAW_DISCARD) ? takeButton(k("t")) : null,
      can(PlayerAction.WIN) && hint?.winningDiscards.length ? h("button", { class: "win", onclick: win, "data-testid": "win", "aria-keyshortcuts": "w" }, `Win${k("w")}`) : null,
      handy && can(PlayerAction.LAY_MELDS) && suggestedMelds().length && (opened() || value >= OPENING_POINTS)
        ? h("button", { class: "primary", onclick: laySuggested, "data-testid": "lay-suggested", "aria-keyshortcuts": "m" }, `${opened() ? "Lay" : "Open with"} the suggested melds (${value})${k("m")}`)
        : null,
      handy && can(PlayerAction.LAY_MELDS) && picked.length >= 3 && opened() ? h("button", { onclick: layPicked, "data-testid": "lay-picked", "aria-keyshortcuts": "g" }, `Lay the picked cards${k("g")}`) : null,
      handy && can(PlayerAction.LAY_MELDS) && picked.length >= 3 && !opened() ? h("button", { onclick: setAside, "data-testid": "set-aside", "aria-keyshortcuts": "g" }, `Set aside as a meld (${meldValue(layOrder(pickedCards()).map((c) => c.face))})${k("g")}`) : null,
      handy && can(PlayerAction.LAY_MELDS) && pending.length && !opened()
        ? h("button", { class: pendingValue() >= OPENING_POINTS ? "primary" : "", onclick: openPending, disabled: pendingValue() < OPENING_POINTS, "data-testid": "open-pending" }, `Open (${pendingValue()} of ${OPENING_POINTS})`)
        : null,
      handy && pending.length ? h("button", { class: "link", onclick: () => ((pending = []), draw()), "data-testid": "clear-pending" }, "Clear the melds set aside") : null,
      can(PlayerAction.DISCARD) ? discardButton(pickedOne, k("x")) : null,
      handy && can(PlayerAction.UNDO_TURN) ? h("button", { onclick: () => void undo(), "data-testid": "undo", "aria-keyshortcuts": "u" }, `Undo${k("u")}`) : null,
      rackTiles().length && (!handy || saved.ownOrder) ? h("button", { class: "link", onclick: () => void arrange(), "data-testid": "arrange", "aria-keyshortcuts": "a" }, `Arrange${k("a")}`) : null,
      can(PlayerAction.PRESS_LAST_ROUND) ? h("button", { class: "link", onclick: lastRound, "data-testid": "last-round" }, "Last round") : null,
      h("button", { class: "link", onclick: openRules, "data-testid": "rules", "data-key": "rules", "aria-keyshortcuts": "?" }, "How to play"),
      v0().status === TableStatus.CLOSED && mySeatOf(v0()) !== null ? h("button", { class: "primary", onclick: replay, "data-testid": "play-again" }, "Play again") : null,
      record ? h("button", { class: "link", onclick: () => ((summary = record), (summaryFocus = true), draw()), "data-testid": "last-summary" }, `${isHand() ? "Deal" : "Round"} ${record.round} summary`) : null,
      muteButton(draw),
      h("button", { class: "link", onclick: askLeave, "data-testid": "leave", "data-key": "leave" }, "Leave"),
    ];
    return h("div", { class: "actions", role: "toolbar", "aria-label": "Actions" }, ...buttons.map((b) => (b && !b.dataset.key ? ((b.dataset.key = b.dataset.testid ?? ""), b) : b)));
  }

  function connectionText(): string {
    if (view?.status === TableStatus.CLOSED) return "table closed";
    if (streamDown || retrying) return "reconnecting…";
    return "live";
  }

  function draw(): void {
    if (abort.signal.aborted) return;
    if (!view) {
      replace(root, h("h1", { class: "visually-hidden" }, "Table"), h("p", { class: "status", role: "status" }, status || "Loading the table…"));
      return;
    }
    // Keep the keyboard where it was: remember the focused control by its key.
    const active = document.activeElement as HTMLElement | null;
    const hadFocus = active && root.contains(active) ? active.dataset.key ?? null : null;
    const logScroll = root.querySelector(".log ol")?.scrollTop ?? 0;
    const topScroll = root.querySelector(".table-top")?.scrollTop ?? 0;
    const v = view;
    const round = v.round;
    const me = mySeatOf(v);
    const invite = sessionStorage.getItem(`kishpa.invite.${tableId}`);
    const kishpa = round?.gameRound.case === "kishpa" ? round.gameRound.value : null;
    const hr = hand();
    const myTurn = round !== undefined && turnSeatOf(round) === me && me !== null;
    const windowOpen = can(PlayerAction.REVEAL_KISHPA) || can(PlayerAction.DECLINE_REVEAL);
    const gameName = isHand() ? "Hand" : "Kishpa";
    const connection = connectionText();
    replace(
      root,
      h(
        "div",
        { class: `table ${isHand() ? "hand-game" : "kishpa-game"}`, "data-testid": "table", "data-game": gameName.toLowerCase(), "data-round": round?.round ?? 0, "data-phase": round ? RoundPhase[round.phase] : "", "data-my-turn": myTurn ? "true" : "false" },
        h("h1", { class: "visually-hidden" }, `${gameName} table`),
        h(
          "div",
          { class: "table-top", "data-testid": "table-top", role: "region", "aria-label": "The table" },
          h(
            "div",
            { class: "facts" },
            h("span", { class: "fact strong" }, v.status === TableStatus.WAITING ? `${gameName}: waiting` : v.status === TableStatus.CLOSED ? `${gameName}: closed` : hr ? `Hand · deal ${round?.round ?? ""} of ${hr.dealsPerGame}` : `Kishpa · round ${round?.round ?? ""}`),
            kishpa?.kishpa ? h("span", { class: "fact" }, "kishpa ", tileEl(kishpa.kishpa, { "data-testid": "kishpa" })) : null,
            kishpa?.jokerFace ? h("span", { class: "fact" }, "joker ", tileEl({ id: -1, face: kishpa.jokerFace } as Tile, { class: `${tileClass(kishpa.jokerFace)} joker` })) : null,
            hr
              ? h("span", { class: "fact", "data-testid": "pot" }, `pot ${hr.pot} tokens`)
              : isHand()
                ? h("span", { class: "fact", "data-testid": "pot" }, `pot ${BigInt(v.seats.filter((s) => s.playerId).length) * (v.settings?.stake || 1n)} tokens at the start`)
                : h("span", { class: "fact", "data-testid": "bowl" }, `bowl ${v.bowl}`),
            round ? h("span", { class: "fact" }, `${hr ? "stock" : "pile"} ${round.pileCount}`) : null,
            h("span", { class: "fact" }, `stake ${v.settings?.stake || 1n}`),
            h("span", { class: `conn ${connection === "live" ? "ok" : "down"}`, "data-testid": "connection", role: "status" }, connection),
          ),
          invite && v.status === TableStatus.WAITING ? h("p", { class: "invite" }, "Invite code: ", h("strong", { "data-testid": "invite-code" }, invite)) : null,
          seatsEl(),
          discardsEl(),
          meldsEl(),
        ),
        h(
          "div",
          { class: "dock", "data-testid": "dock" },
          h("div", { class: "dock-line" }, h("p", { class: `turn ${myTurn || windowOpen ? "mine" : ""}`, "data-testid": "turn", "aria-live": "polite" }, turnText()), timerEl()),
          openingEl(),
          rackEl(),
          actionsEl(),
          h("p", { class: "hint", "data-testid": "hint" }, hintText()),
          status ? h("p", { class: "status", role: "status", "data-testid": "status" }, status) : null,
        ),
        h("details", { class: "log", open: true }, h("summary", {}, "Events"), h("ol", { "data-testid": "log", reversed: true, tabindex: 0, "aria-label": "Events, newest first" }, ...[...saved.log].reverse().slice(0, 40).map((e) => h("li", { "data-id": e.id }, e.text)))),
        keysShown ? h("p", { class: "keys" }, isHand() ? "Keys: d draw · t take · m lay suggested melds · g lay picked · u undo · x discard · a arrange · ? rules · Shift+←/→ move a card" : "Keys: d draw · t take · x discard · w win · r reveal · p pass · a arrange · ? rules · Shift+←/→ move a tile") : null,
      ),
      summaryEl(),
      leaveEl(),
      rulesOpen ? rulesDialog(isHand() ? "hand" : "kishpa", closeRules) : null,
    );
    const log = root.querySelector(".log ol");
    if (log) log.scrollTop = logScroll;
    // On a phone the dock is fixed at the bottom: the table leaves room for it.
    const dock = root.querySelector<HTMLElement>(".dock");
    if (dock) root.style.setProperty("--dock-h", `${dock.offsetHeight + 12}px`);
    fitTop(dock, topScroll);
    const key = myTurn ? `${round?.round}:${round?.phase}:${turnSeatOf(round)}` : "";
    if (key && key !== turnKey && !turnKey.startsWith(`${round?.round}:${round?.phase}:`)) yourTurn();
    turnKey = key;
    if (!rackFocused && !summary && !hadFocus && root.querySelector('[data-testid="rack-tile"]')) {
      rackFocused = true; // a table opens with the focus on the rack (not the page body)
      focusAfterDraw ??= "rack";
    }
    restoreFocus(hadFocus);
  }

  /**
   * On a phone (the dock fixed at the bottom) the table above the dock — facts, seats,
   * discards, melds — scrolls in its own box that ends where the dock begins, so reaching
   * the last meld of a long table (to lay off) needs no page scroll (issue 33); the box keeps
   * its scroll across redraws, as every pick and event redraws the table.
   */
  function fitTop(dock: HTMLElement | null, scrollTop: number): void {
    const top = root.querySelector<HTMLElement>(".table-top");
    if (!top) return;
    if (!dock || getComputedStyle(dock).position !== "fixed") return;
    top.tabIndex = 0; // a scroll box a keyboard can reach (axe: scrollable-region-focusable)
    const from = top.getBoundingClientRect().top + window.scrollY;
    top.style.maxHeight = `${Math.max(window.innerHeight - dock.offsetHeight - from - 4, 120)}px`;
    top.scrollTop = scrollTop;
  }

  /** The discards: the top one and how many, the others on request (a phone's screen). */
  function discardsEl(): HTMLElement {
    const all = view?.round?.discards ?? [];
    const top = all.at(-1);
    return h(
      "div",
      { class: "discards", "data-testid": "discards", role: "group", "aria-label": "Discards" },
      h("span", { class: "label" }, `Discards (${all.length})`),
      top ? tileEl(top, { class: `${tileClass(top.face)} top`, "aria-label": `${nameOf(top.face)} (top)`, "data-testid": "top-discard" }) : h("span", { class: "muted" }, "none"),
      all.length > 1
        ? h(
            "details",
            { class: "older" },
            h("summary", {}, "earlier"),
            h("span", { class: "group", role: "group", "aria-label": "Earlier discards, oldest first" }, ...all.slice(-13, -1).map((t) => tileEl(t))),
          )
        : null,
    );
  }

  function restoreFocus(hadFocus: string | null): void {
    const find = (key: string) => root.querySelector<HTMLElement>(`[data-key="${key}"]`);
    if (summary && summaryFocus) {
      summaryFocus = false;
      find("close-summary")?.focus({ preventScroll: true }); // its title stays in view
      return;
    }
    if (rulesOpen) return;
    const wanted = focusAfterDraw ?? hadFocus;
    focusAfterDraw = null;
    if (!wanted) return;
    if (wanted === "rack") {
      root.querySelector<HTMLElement>('[data-testid="rack-tile"]')?.focus({ preventScroll: true });
      return;
    }
    // The same control, else the first action (the one pressed is gone: Draw after drawing).
    const target = find(wanted) ?? root.querySelector<HTMLElement>(".actions button");
    target?.focus({ preventScroll: true }); // the dock is on screen: the page never scrolls to it
  }

  const ticker = setInterval(() => {
    const el = root.querySelector('[data-testid="timer"]');
    if (el && view) el.replaceWith(timerEl());
    const pause = root.querySelector('[data-testid="pause"]');
    if (pause && view) pause.textContent = pauseText(view);
    const turn = root.querySelector('[data-testid="turn"]');
    if (turn && view?.rematchOf && view.status === TableStatus.WAITING) turn.textContent = rematchText(view);
  }, 500);

  draw();
  scheduleRefresh();
  void watch();
  return () => {
    abort.abort();
    clearInterval(ticker);
    stopListening();
    document.removeEventListener("keydown", onKey);
  };
}
