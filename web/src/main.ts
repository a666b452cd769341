// The Kishpa web client: guest login, lobby, table, wallet. Screens are plain DOM built on
// each change; the table screen lives in table.ts.
import { ConnectError, Code } from "@connectrpc/connect";
import { Game } from "./gen/kishpa/common/v1/common_pb";
import { TicketState } from "./gen/kishpa/matchmaking/v1/matchmaking_pb";
import { auth, clientSeed, loadSession, matchmaking, rememberSeed, requestId, saveSession, tables, wallet } from "./api";
import { reasonText, settingsOf } from "./events";
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
    session
      ? h(
          "nav",
          {},
          h("a", { href: "#/" }, "Lobby"),
          h("a", { href: "#/wallet", "data-testid": "wallet-link" }, "Wallet"),
          h("span", { class: "who", "data-testid": "player-name" }, session.name),
          h("button", { class: "link", onclick: () => { saveSession(null); location.hash = "#/"; route(); } }, "Sign out"),
        )
      : null,
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
          const answer = await auth.login({ displayName: input.value.trim() });
          saveSession({ token: answer.token, playerId: answer.playerId, name: answer.displayName });
          location.hash = "#/";
          route();
        } catch (err) {
          status.textContent = errorText(err);
        }
      },
    },
    h("h1", {}, "Play Kishpa"),
    h("p", {}, "A Rummikub-style tile game: win two rounds in a row to take the bowl."),
    h("label", { for: "name" }, "Name"),
    input,
    h("button", { type: "submit", class: "primary", "data-testid": "login" }, "Play as guest"),
    status,
  );
  screen(header(), h("main", {}, form));
  input.focus();
}

function seatsSelect(id: string, value = 4): HTMLSelectElement {
  return h("select", { id, "data-testid": id }, ...[2, 3, 4].map((n) => h("option", { value: n, selected: n === value }, `${n} seats`)));
}

async function lobbyScreen(): Promise<void> {
  const status = h("p", { class: "status", role: "status", "data-testid": "lobby-status" });
  const fail = (err: unknown) => (status.textContent = errorText(err));
  const resume = h("div", {});
  const botsCount = h("select", { id: "bots", "data-testid": "bots" }, ...[1, 2, 3].map((n) => h("option", { value: n, selected: n === 3 }, `${n} bot${n > 1 ? "s" : ""}`)));
  const quickSeats = seatsSelect("quick-seats");
  const privateSeats = seatsSelect("private-seats");
  const privateBots = h("select", { id: "private-bots", "data-testid": "private-bots" }, ...[0, 1, 2].map((n) => h("option", { value: n }, `${n} bots`)));
  const code = h("input", { id: "code", placeholder: "Invite code", maxlength: 12, autocapitalize: "characters", "data-testid": "code" });

  const playWithBots = async () => {
    status.textContent = "Dealing…";
    try {
      const bots = Number(botsCount.value);
      const seed = clientSeed(`new-${Date.now()}`);
      const created = await tables.createTable({
        settings: settingsOf({ seats: bots + 1, bots, turnSeconds: 60, revealSeconds: 15, pauseMs: 5000 }),
        requestId: requestId(),
        clientSeed: seed,
      });
      const tableId = created.table!.tableId;
      rememberSeed(tableId, seed);
      await tables.startGame({ tableId, requestId: requestId() });
      location.hash = `#/table/${tableId}`;
    } catch (err) {
      fail(err);
    }
  };
  const quickMatch = async () => {
    status.textContent = "Looking for players…";
    try {
      const joined = await matchmaking.joinQueue({ game: Game.KISHPA, seats: Number(quickSeats.value), stake: 1n, requestId: requestId() });
      let ticket = joined.ticket!;
      const cancel = h("button", { onclick: async () => { await matchmaking.cancelQueue({ ticketId: ticket.ticketId, requestId: requestId() }).catch(fail); } }, "Cancel");
      replace(resume, h("p", { "data-testid": "queue" }, "Waiting for players… "), cancel);
      if (ticket.state !== TicketState.MATCHED) {
        for await (const update of matchmaking.watchQueue({ ticketId: ticket.ticketId })) {
          ticket = update.ticket!;
          status.textContent = `${ticket.playersWaiting} waiting`;
          if (ticket.state !== TicketState.WAITING) break;
        }
      }
      if (ticket.state === TicketState.MATCHED) location.hash = `#/table/${ticket.tableId}`;
      else status.textContent = "Left the queue";
    } catch (err) {
      fail(err);
    }
  };
  const createPrivate = async () => {
    try {
      const created = await matchmaking.createPrivateTable({
        settings: settingsOf({ seats: Number(privateSeats.value), bots: Number(privateBots.value), turnSeconds: 60, revealSeconds: 15, pauseMs: 5000 }),
        requestId: requestId(),
      });
      sessionStorage.setItem(`kishpa.invite.${created.tableId}`, created.inviteCode);
      location.hash = `#/table/${created.tableId}`;
    } catch (err) {
      fail(err);
    }
  };
  const joinByCode = async (e: Event) => {
    e.preventDefault();
    try {
      const joined = await matchmaking.joinByCode({ inviteCode: code.value.trim(), requestId: requestId() });
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
      resume,
      h(
        "div",
        { class: "lobby" },
      h("section", { class: "card" }, h("h2", {}, "Play with bots"), h("p", {}, "A table of your own with bots played by the server."), h("div", { class: "row" }, botsCount, h("button", { class: "primary", onclick: playWithBots, "data-testid": "play-bots" }, "Play"))),
      h("section", { class: "card" }, h("h2", {}, "Quick match"), h("div", { class: "row" }, quickSeats, h("button", { onclick: quickMatch, "data-testid": "quick-match" }, "Find a table"))),
      h("section", { class: "card" }, h("h2", {}, "Private table"), h("p", {}, "Get an invite code for friends."), h("div", { class: "row" }, privateSeats, privateBots, h("button", { onclick: createPrivate, "data-testid": "create-private" }, "Create"))),
      h("section", { class: "card" }, h("h2", {}, "Join a friend"), h("form", { class: "row", onsubmit: joinByCode }, code, h("button", { type: "submit", "data-testid": "join-code" }, "Join"))),
      ),
      status,
    ),
  );
  try {
    const mine = await matchmaking.getMyTable({});
    replace(resume, h("section", { class: "card highlight" }, h("p", {}, "You are seated at a table."), h("a", { class: "button primary", href: `#/table/${mine.tableId}`, "data-testid": "resume" }, "Back to the table")));
  } catch (err) {
    if (!(err instanceof ConnectError && err.code === Code.NotFound)) fail(err);
  }
}

async function walletScreen(): Promise<void> {
  const list = h("tbody", {});
  const balance = h("strong", { "data-testid": "wallet-balance" }, "…");
  const more = h("button", { class: "link" }, "More");
  let token = "";
  const page = async () => {
    const answer = await wallet.listTransfers({ pageSize: 50, pageToken: token });
    const me = `player:${loadSession()?.playerId}`;
    for (const t of answer.transfers) {
      const p = t.posting!;
      const incoming = p.toAccount === me;
      list.append(
        h(
          "tr",
          {},
          h("td", {}, t.createTime ? new Date(Number(t.createTime.seconds) * 1000).toLocaleString() : ""),
          h("td", {}, reasonText(p.reason)),
          h("td", {}, incoming ? `from ${p.fromAccount}` : `to ${p.toAccount}`),
          h("td", { class: incoming ? "plus" : "minus" }, `${incoming ? "+" : "−"}${p.amount}`),
          h("td", {}, p.tableId ? `${p.tableId.slice(0, 8)} r${p.round}` : ""),
        ),
      );
    }
    token = answer.nextPageToken;
    more.hidden = !token;
  };
  more.addEventListener("click", () => void page());
  screen(
    header(),
    h(
      "main",
      { class: "card wide", "data-testid": "wallet" },
      h("h2", {}, "Your wallet"),
      h("p", {}, "Balance: ", balance, " tokens"),
      h("table", { class: "history" }, h("thead", {}, h("tr", {}, h("th", {}, "When"), h("th", {}, "Why"), h("th", {}, "With"), h("th", {}, "Tokens"), h("th", {}, "Table"))), list),
      more,
    ),
  );
  try {
    const answer = await wallet.getBalance({});
    balance.textContent = String(answer.balance?.tokens ?? 0n);
    await page();
  } catch (err) {
    balance.textContent = errorText(err);
  }
}

function route(): void {
  const session = loadSession();
  const hash = location.hash || "#/";
  if (!session) {
    loginScreen();
    return;
  }
  const table = /^#\/table\/([\w-]+)$/.exec(hash);
  if (table) {
    const main = h("main", { class: "table-screen" });
    screen(header(), main);
    leaveScreen = openTable(main, table[1]!, session);
  } else if (hash === "#/wallet") {
    void walletScreen();
  } else {
    void lobbyScreen();
  }
}

window.addEventListener("hashchange", route);
route();
