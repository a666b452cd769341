// The web client: guest login, lobby, table, wallet, how to play. Screens are plain DOM
// built on each change; the table screen lives in table.ts, the rules in rules.ts.
import { ConnectError, Code } from "@connectrpc/connect";
import { Game } from "./gen/kishpa/common/v1/common_pb";
import { TicketState } from "./gen/kishpa/matchmaking/v1/matchmaking_pb";
import { BotLevel } from "./gen/kishpa/table/v1/table_pb";
import { auth, clientSeed, knownNames, loadSession, matchmaking, rememberSeed, saveSession, tables, wallet, withRetry } from "./api";
import { leftTableCard, tableLabel } from "./between";
import { reasonText, settingsOf } from "./events";
import { rulesScreen } from "./rules";
import { openTable } from "./table";
import { errorText, h, replace } from "./ui";

const app = document.getElementById("app")!;
let leaveScreen: (() => void) | null = null;

function screen(...children: (Node | null)[]): void {
  leaveScreen?.();
  leaveScreen = null;
  replace(app, ...children);
}

function header(): HTMLElement {
  const session = loadSession();
  return h(
    "header",
    { class: "top" },
    h("a", { href: "#/", class: "brand", "data-testid": "home" }, "Kishpa"),
    h(
      "nav",
      { "aria-label": "Main" },
      session ? h("a", { href: "#/", "data-testid": "lobby-link" }, "Lobby") : null,
      session ? h("a", { href: "#/wallet", "data-testid": "wallet-link" }, "Wallet") : null,
      session ? h("a", { href: "#/history", "data-testid": "history-link" }, "History") : null,
      h("a", { href: "#/rules", "data-testid": "rules-link" }, "Rules"),
      session ? h("span", { class: "who", "data-testid": "player-name" }, session.name) : null,
      session ? h("button", { class: "link", onclick: () => { saveSession(null); location.hash = "#/"; route(); } }, "Sign out") : null,
    ),
  );
}

function loginScreen(): void {
  const input = h("input", { id: "name", maxlength: 32, autocomplete: "nickname", placeholder: "Your name", required: true, "data-testid": "name" });
  const status = h("p", { class: "status", role: "status" });
  const form = h(
    "form",
    {
      class: "card narrow",
      onsubmit: async (e: Event) => {
        e.preventDefault();
        status.textContent = "Signing in…";
        try {
          // One request id for the attempt, sent again on every retry: a retry whose answer
          // was lost gets the same guest (and his starting tokens), not a second one.
          const displayName = input.value.trim();
          const answer = await withRetry((requestId) => auth.login({ displayName, requestId }));
          saveSession({ token: answer.token, playerId: answer.playerId, name: answer.displayName });
          location.hash = "#/";
          route();
        } catch (err) {
          status.textContent = errorText(err);
        }
      },
    },
    h("h1", {}, "Play Kishpa and Hand"),
    h("p", {}, "Two tile-and-card games for tokens: Kishpa (win two rounds in a row to take the bowl) and Hand (open with 51, go out first, split the pot). ", h("a", { href: "#/rules" }, "How to play")),
    h("label", { for: "name" }, "Your name"),
    input,
    h("button", { type: "submit", class: "primary", "data-testid": "login" }, "Play as guest"),
    status,
  );
  screen(header(), h("main", {}, form));
  input.focus();
}

// ---- the lobby ---------------------------------------------------------------------------

interface Offer {
  game: Game;
  stakes: bigint[];
  seats: number[];
  /** The server's turn time and longest pause between deals (ListOffers), in seconds. */
  turnSeconds?: number;
  pauseSeconds?: number;
}

const GAME_NAMES: Record<number, string> = { [Game.KISHPA]: "Kishpa", [Game.HAND]: "Hand" };
/** How long a house bot takes over its turn (TableSettings.bot_pause), in ms. */
const BOT_PACE = { steady: 1000, quick: 200 };
const CHOICE_KEY = "kishpa.lobby";

function labelled(id: string, label: string, control: HTMLElement): HTMLElement {
  return h("span", { class: "field" }, h("label", { for: id }, label), control);
}

function select(id: string, options: [string, string][], value: string): HTMLSelectElement {
  return h("select", { id, "data-testid": id }, ...options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
}

async function lobbyScreen(): Promise<void> {
  const status = h("p", { class: "status", role: "status", "data-testid": "lobby-status" });
  const fail = (err: unknown) => (status.textContent = errorText(err));
  const resume = h("div", {});
  const balance = h("strong", { "data-testid": "lobby-balance" }, "…");
  const saved = JSON.parse(localStorage.getItem(CHOICE_KEY) ?? "{}") as { game?: string; stake?: string };
  let offers: Offer[] = [
    { game: Game.KISHPA, stakes: [1n], seats: [2, 3, 4] },
    { game: Game.HAND, stakes: [1n], seats: [2, 3, 4] },
  ];
  const gameSelect = select("game", offers.map((o) => [String(o.game), GAME_NAMES[o.game]!]), saved.game ?? String(Game.KISHPA));
  const stakeSelect = h("select", { id: "stake", "data-testid": "stake" });
  const stakeLabel = h("label", { for: "stake" }, "Stake");
  const stakeHelp = h("p", { class: "help", id: "stake-help" });
  stakeSelect.setAttribute("aria-describedby", "stake-help");
  const gameOf = (): Game => Number(gameSelect.value) as Game;
  const stakeOf = (): bigint => BigInt(stakeSelect.value || "1");
  const fillStakes = () => {
    const offer = offers.find((o) => o.game === gameOf()) ?? offers[0]!;
    const keep = stakeSelect.value || saved.stake || "";
    replace(stakeSelect, ...offer.stakes.map((s) => h("option", { value: String(s), selected: String(s) === keep }, `${s} token${s === 1n ? "" : "s"}`)));
    const hand = gameOf() === Game.HAND;
    stakeLabel.textContent = hand ? "Buy-in" : "Stake";
    stakeHelp.textContent = hand
      ? "Hand: every player pays the buy-in into the pot; after 7 deals the best total takes at least 75% of it."
      : "Kishpa: every payment of the rules (bowl, bonuses, the win) is multiplied by the stake.";
    if (offer.turnSeconds) stakeHelp.textContent += ` ${offer.turnSeconds} s a turn; up to ${offer.pauseSeconds ?? 0} s between ${hand ? "deals" : "rounds"} (less once everyone is ready).`;
  };
  const remember = () => localStorage.setItem(CHOICE_KEY, JSON.stringify({ game: gameSelect.value, stake: stakeSelect.value }));
  gameSelect.addEventListener("change", () => (fillStakes(), remember()));
  stakeSelect.addEventListener("change", remember);
  fillStakes();

  const botsCount = select("bots", [["1", "1 bot"], ["2", "2 bots"], ["3", "3 bots"]], "3");
  const botLevel = select("bot-level", [[String(BotLevel.NORMAL), "Normal: plays to win"], [String(BotLevel.EASY), "Easy: draws and discards"]], String(BotLevel.NORMAL));
  const botPace = select("bot-pace", [[String(BOT_PACE.steady), "Steady: a second a turn"], [String(BOT_PACE.quick), "Quick: a fifth of a second"]], String(BOT_PACE.steady));
  const quickSeats = select("quick-seats", [["2", "2 players"], ["3", "3 players"], ["4", "4 players"]], "4");
  const privateSeats = select("private-seats", [["2", "2 seats"], ["3", "3 seats"], ["4", "4 seats"]], "4");
  const privateBots = select("private-bots", [["0", "no bots"], ["1", "1 bot"], ["2", "2 bots"]], "0");
  const code = h("input", { id: "code", placeholder: "e.g. K7Q2MX", maxlength: 12, autocapitalize: "characters", autocomplete: "off", "data-testid": "code" });
  // The timers are the server's (ListOffers): a table made here leaves them unset, so the
  // lobby, the table and the rules pages say the same (KISHPA_TABLE_TURN_SECONDS...).

  const playWithBots = async () => {
    status.textContent = "Dealing…";
    try {
      const bots = Number(botsCount.value);
      const seed = clientSeed(`new-${Date.now()}`);
      const level = Number(botLevel.value) as BotLevel;
      const settings = settingsOf({ game: gameOf(), stake: stakeOf(), seats: bots + 1, bots, botLevel: level, botPauseMs: Number(botPace.value) });
      const created = await withRetry((requestId) => tables.createTable({ settings, requestId, clientSeed: seed, willContribute: true }));
      const tableId = created.table!.tableId;
      rememberSeed(tableId, seed);
      await withRetry((requestId) => tables.startGame({ tableId, requestId }));
      location.hash = `#/table/${tableId}`;
    } catch (err) {
      fail(err);
    }
  };
  const quickMatch = async () => {
    status.textContent = "Looking for players…";
    try {
      const joined = await withRetry((requestId) => matchmaking.joinQueue({ game: gameOf(), seats: Number(quickSeats.value), stake: stakeOf(), requestId, willContribute: true }));
      let ticket = joined.ticket!;
      const cancel = h("button", { onclick: () => void withRetry((requestId) => matchmaking.cancelQueue({ ticketId: ticket.ticketId, requestId })).catch(fail) }, "Cancel");
      replace(resume, h("section", { class: "card highlight" }, h("p", { "data-testid": "queue" }, `Waiting for players for ${GAME_NAMES[gameOf()]} at ${stakeOf()}… `), cancel));
      if (ticket.state !== TicketState.MATCHED) {
        for await (const update of matchmaking.watchQueue({ ticketId: ticket.ticketId })) {
          ticket = update.ticket!;
          status.textContent = `${ticket.playersWaiting} waiting`;
          if (ticket.state !== TicketState.WAITING) break;
        }
      }
      if (ticket.state === TicketState.MATCHED) location.hash = `#/table/${ticket.tableId}`;
      else status.textContent = "You left the queue.";
    } catch (err) {
      fail(err);
    }
  };
  const createPrivate = async () => {
    try {
      const settings = settingsOf({ game: gameOf(), stake: stakeOf(), seats: Number(privateSeats.value), bots: Number(privateBots.value) });
      const created = await withRetry((requestId) => matchmaking.createPrivateTable({ settings, requestId, willContribute: true }));
      sessionStorage.setItem(`kishpa.invite.${created.tableId}`, created.inviteCode);
      location.hash = `#/table/${created.tableId}`;
    } catch (err) {
      fail(err);
    }
  };
  const joinByCode = async (e: Event) => {
    e.preventDefault();
    try {
      const joined = await withRetry((requestId) => matchmaking.joinByCode({ inviteCode: code.value.trim(), requestId, willContribute: true }));
      location.hash = `#/table/${joined.tableId}`;
    } catch (err) {
      fail(err);
    }
  };

  screen(
    header(),
    h(
      "main",
      { "data-testid": "lobby" },
      h("h1", {}, "Lobby"),
      h("p", { class: "balance-line" }, "Your balance: ", balance, " tokens"),
      resume,
      h(
        "section",
        { class: "card choose", "aria-labelledby": "choose-title" },
        h("h2", { id: "choose-title" }, "Game and stake"),
        h("div", { class: "row" }, labelled("game", "Game", gameSelect), h("span", { class: "field" }, stakeLabel, stakeSelect)),
        stakeHelp,
        h("p", { class: "help" }, h("a", { href: "#/rules", "data-testid": "lobby-rules" }, "How to play")),
      ),
      h(
        "div",
        { class: "lobby" },
        h("section", { class: "card" }, h("h2", {}, "Play with bots"), h("p", {}, "A table of your own with bots played by the server."), h("div", { class: "row" }, labelled("bots", "Bots", botsCount), labelled("bot-level", "Level", botLevel), labelled("bot-pace", "Pace", botPace), h("button", { class: "primary", onclick: playWithBots, "data-testid": "play-bots" }, "Play"))),
        h("section", { class: "card" }, h("h2", {}, "Quick match"), h("p", {}, "Play other people at this stake."), h("div", { class: "row" }, labelled("quick-seats", "Table size", quickSeats), h("button", { onclick: quickMatch, "data-testid": "quick-match" }, "Find a table"))),
        h("section", { class: "card" }, h("h2", {}, "Private table"), h("p", {}, "Get an invite code for friends."), h("div", { class: "row" }, labelled("private-seats", "Seats", privateSeats), labelled("private-bots", "Bots", privateBots), h("button", { onclick: createPrivate, "data-testid": "create-private" }, "Create"))),
        h("section", { class: "card" }, h("h2", {}, "Join a friend"), h("form", { class: "row", onsubmit: joinByCode }, labelled("code", "Invite code", code), h("button", { type: "submit", "data-testid": "join-code" }, "Join"))),
      ),
      status,
    ),
  );
  const reads: Promise<unknown>[] = [
    matchmaking.listOffers({}).then((answer) => {
      offers = answer.offers.map((o) => ({
        game: o.game,
        stakes: [...o.stakes],
        seats: [...o.seats],
        turnSeconds: o.turnTime ? Number(o.turnTime.seconds) : undefined,
        pauseSeconds: o.nextRoundPause ? Math.round(Number(o.nextRoundPause.seconds) + o.nextRoundPause.nanos / 1e9) : undefined,
      }));
      fillStakes();
    }),
    wallet.getBalance({}).then((answer) => (balance.textContent = String(answer.balance?.tokens ?? 0n))),
    matchmaking.getMyTable({}).then(
      (mine) => replace(resume, h("section", { class: "card highlight" }, h("p", {}, `You are seated at a ${GAME_NAMES[mine.game] ?? ""} table.`), h("a", { class: "button primary", href: `#/table/${mine.tableId}`, "data-testid": "resume" }, "Back to the table"))),
      (err: unknown) => {
        if (!(err instanceof ConnectError && err.code === Code.NotFound)) throw err;
      },
    ),
  ];
  for (const read of reads) read.catch(fail);
  void leftTableCard().then((card) => card && resume.append(card));
}

// ---- the wallet --------------------------------------------------------------------------

const BOT_NAMES = ["Bot Noa", "Bot Eitan", "Bot Maya"];

/** A wallet account as a person reads it: "you", "the bowl", a player's or a bot's name. */
export function accountLabel(account: string, me: string, names: Record<string, string>): string {
  if (account === "bank") return "the bank";
  if (account.startsWith("bowl:")) return "the table's bowl";
  if (account.startsWith("pot:")) return "the table's pot";
  const player = account.replace(/^player:/, "");
  if (player === me) return "you";
  if (names[player]) return names[player]!;
  const bot = /^bot-(\d+)-/.exec(player);
  if (bot) return BOT_NAMES[Number(bot[1]) - 1] ?? "a bot";
  return account.startsWith("player:") ? "another player" : account.split(":")[0]!;
}

async function walletScreen(): Promise<void> {
  const list = h("tbody", {});
  const balance = h("strong", { "data-testid": "wallet-balance" }, "…");
  const status = h("p", { class: "status", role: "status" });
  const more = h("button", { class: "more", hidden: true, "data-testid": "wallet-more" }, "Show older");
  const seen = new Set<bigint>();
  let token = "";
  const me = loadSession()?.playerId ?? "";
  const names = knownNames();
  const page = async () => {
    more.hidden = true;
    const answer = await wallet.listTransfers({ pageSize: 50, pageToken: token });
    for (const t of answer.transfers) {
      if (seen.has(t.transferId)) continue; // a page boundary that moved: never a row twice
      seen.add(t.transferId);
      const p = t.posting!;
      const incoming = p.toAccount === `player:${me}`;
      const other = accountLabel(incoming ? p.fromAccount : p.toAccount, me, names);
      list.append(
        h(
          "tr",
          { "data-transfer": String(t.transferId) },
          h("td", { "data-label": "When" }, t.createTime ? new Date(Number(t.createTime.seconds) * 1000).toLocaleString() : ""),
          h("td", { "data-label": "Why" }, reasonText(p.reason)),
          h("td", { "data-label": "With" }, incoming ? `from ${other}` : `to ${other}`),
          h("td", { "data-label": "Tokens", class: incoming ? "plus" : "minus" }, `${incoming ? "+" : "−"}${p.amount}`),
          h("td", { "data-label": "Table" }, p.tableId ? tableLabel(p.tableId, p.round) : ""),
        ),
      );
    }
    token = answer.nextPageToken;
    more.hidden = !token; // only when there is a next page
  };
  more.addEventListener("click", () => void page().catch((err) => (status.textContent = errorText(err))));
  screen(
    header(),
    h(
      "main",
      { "data-testid": "wallet" },
      h(
        "section",
        { class: "card wide" },
        h("h1", {}, "Your wallet"),
        h("p", {}, "Balance: ", balance, " tokens"),
        h("table", { class: "history" }, h("caption", {}, "Your payments, newest first"), h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "When"), h("th", { scope: "col" }, "Why"), h("th", { scope: "col" }, "With"), h("th", { scope: "col" }, "Tokens"), h("th", { scope: "col" }, "Table"))), list),
        more,
        status,
      ),
    ),
  );
  try {
    const answer = await wallet.getBalance({});
    balance.textContent = String(answer.balance?.tokens ?? 0n);
    await page();
  } catch (err) {
    status.textContent = errorText(err);
  }
}

function route(): void {
  const session = loadSession();
  const hash = location.hash || "#/";
  const rules = /^#\/rules(?:\/(kishpa|hand))?$/.exec(hash);
  if (rules) {
    screen(header(), rulesScreen(rules[1] === "hand" ? "hand" : rules[1] === "kishpa" ? "kishpa" : null));
    return;
  }
  if (!session) {
    loginScreen();
    return;
  }
  const table = /^#\/table\/([\w-]+)$/.exec(hash);
  let past: RegExpExecArray | null;
  if (table) {
    const main = h("main", { class: "table-screen" });
    screen(header(), main);
    leaveScreen = openTable(main, table[1]!, session);
  } else if ((past = /^#\/history(?:\/([\w-]+)(?:\/(\d+))?)?$/.exec(hash))) {
    const me = session.playerId;
    const names = knownNames();
    const name = (player: string) => accountLabel(`player:${player}`, me, names);
    const [, tableId, round] = past;
    // History is a part of its own (HistoryService and the replay), loaded when first opened.
    void import("./history").then(
      (view) => hash === location.hash && screen(header(), round ? view.replayScreen(tableId!, Number(round), name) : tableId ? view.roundsScreen(tableId, name) : view.gamesScreen()),
      () => screen(header(), h("main", {}, h("p", { class: "status", role: "status" }, "History could not be loaded: check your connection and reload."))),
    );
  } else if (hash === "#/wallet") {
    void walletScreen();
  } else {
    void lobbyScreen();
  }
}

window.addEventListener("hashchange", route);
route();
