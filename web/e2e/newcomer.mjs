// The acceptance as a newcomer meets it, on a 390x844 touch phone: sign in, read the
// rules inside the app, choose from the lobby's own offers (Hand, buy-in 10, 3 bots, quick
// pace), play the Hand game by tapping — draw or take the top discard (and undo when it
// cannot be used), open with 51, lay off, release jokers, discard — through every deal's
// summary to the pot split; then a Kishpa round at stake 10 to its summary. axe-core runs on
// every screen; the pages' figures (scores, cards left, payouts, balances) are written out for
// the test to check against its own computation from the table's events and the ledger.
// Usage: node e2e/newcomer.mjs <base url> <output dir> [deals]  (deals: 7 = the whole game)
import { mkdirSync, writeFileSync } from "node:fs";
import { axeViolations, launch, settle, sideScroll, smallTargets } from "./browser.mjs";
import { meldValue } from "../test/dist/hand.mjs";

const [base, out, dealsArg] = process.argv.slice(2);
const deals = Number(dealsArg ?? "7");
mkdirSync(out, { recursive: true });
const started = Date.now();
const result = { axe: {}, sideScroll: {}, smallTargets: {}, moves: {}, refusals: [], deals: [], timings: {}, scroll: [] };
let game = "hand"; // which game's turns the scroll measurements belong to
const count = (what) => (result.moves[what] = (result.moves[what] ?? 0) + 1);

/** Checks a screen: axe-core, no sideways scroll, 44 px targets. */
async function check(page, name) {
  await settle(200);
  result.axe[name] = await axeViolations(page);
  result.sideScroll[name] = await sideScroll(page);
  result.smallTargets[name] = await smallTargets(page);
}

const isJoker = (face) => /^J\d$/.test(face);
const shown = (page, id) => page.getByTestId(id).first().isVisible().catch(() => false);

/** Waits until the page has taken in the last tap (no "…" status left); returns a refusal, if any. */
async function answered(page) {
  await page.waitForFunction(() => !(document.querySelector('[data-testid="status"]')?.textContent ?? "").endsWith("…"), null, { timeout: 20000, polling: 50 });
  return page.evaluate(() => document.querySelector('[data-testid="status"]')?.textContent ?? "");
}

/** The page's vertical scroll: a turn on a phone needs none (issue 33). */
const scrollY = (page) => page.evaluate(() => window.scrollY);

/** Notes the page's scroll before and after a tap of a turn (both must be 0). */
async function measured(page, what, act) {
  const before = await scrollY(page);
  const layout = () =>
    page.evaluate(() => {
      const box = (sel) => {
        const r = document.querySelector(sel)?.getBoundingClientRect();
        return r ? [Math.round(r.top), Math.round(r.bottom)] : null;
      };
      return { top: box(".table-top"), dock: box(".dock"), max: document.querySelector(".table-top")?.style.maxHeight, inner: window.innerHeight };
    });
  const was = await layout();
  const done = await act();
  const after = await scrollY(page);
  // Where the table and the dock were, when a tap scrolled the page (to tell why).
  result.scroll.push({ game, what, before, after, ...(after !== before ? { was, now: await layout() } : {}) });
  return done;
}

async function tap(page, locator, what) {
  return measured(page, what, () => tapOnce(page, locator, what));
}

/** A tap; on a page that redraws on every bot move, a press of the button as it is. */
async function pressAnyway(locator) {
  await locator.tap({ timeout: 8000 }).catch(() => locator.dispatchEvent("click", null, { timeout: 5000 }).catch(() => {}));
}

/**
 * A finger's tap: where the control is on the screen, if it shows there (brought into view
 * within its own scroll box, as a thumb would: that moves the page only if the control is
 * off the screen). Playwright's tap retries a control the page redrew meanwhile by aligning
 * it to the screen's bottom edge, which scrolls the page under the dock: no player does that.
 */
async function fingerTap(page, locator) {
  const at = await locator.first().evaluate((el) => {
    el.scrollIntoView({ block: "nearest", inline: "nearest" });
    const r = el.getBoundingClientRect();
    const x = r.left + r.width / 2;
    const y = r.top + r.height / 2;
    const hit = document.elementFromPoint(x, y);
    return { x, y, shows: !!hit && (hit === el || el.contains(hit)) };
  }, null, { timeout: 8000 });
  if (!at.shows) return locator.tap({ timeout: 8000 }); // covered: as Playwright would
  await page.touchscreen.tap(at.x, at.y);
}

async function tapOnce(page, locator, what) {
  try {
    await fingerTap(page, locator);
  } catch (err) {
    // The page redraws on every event; on a loaded machine a button can be replaced between
    // Playwright's stability checks for seconds. It is still there: press it as it is.
    if (!(await locator.count())) return false;
    result.retaps = (result.retaps ?? 0) + 1;
    await locator.dispatchEvent("click");
  }
  const refused = await answered(page);
  if (refused) result.refusals.push(`${what}: ${refused}`);
  else count(what);
  return !refused;
}

const rack = (page) => page.getByTestId("rack-tile").evaluateAll((els) => els.map((e) => ({ id: e.dataset.id, face: e.dataset.face })));
const melds = (page) =>
  page.getByTestId("meld").evaluateAll((els) =>
    els.map((e) => ({ id: e.dataset.meld, faces: [...e.querySelectorAll(".group [data-face]")].map((t) => t.dataset.face), layOff: !!e.querySelector('[data-testid="lay-off"]'), release: !!e.querySelector('[data-testid="release"]') })),
  );
const pickTile = (page, id) => measured(page, "pick", () => page.locator(`[data-testid="rack-tile"][data-id="${id}"]`).tap());
const meldButton = (page, meldId, id) => page.locator(`[data-testid="meld"][data-meld="${meldId}"] [data-testid="${id}"]`);

/** A card of the rack that fits a meld's end (or a set's missing suit), by the rules' values. */
async function findLayOff(page) {
  const cards = (await rack(page)).filter((c) => !isJoker(c.face));
  if (cards.length < 2) return null; // one card must stay for the discard
  for (const m of await melds(page)) {
    if (!m.layOff) continue;
    for (const c of cards) {
      if (meldValue([...m.faces, c.face]) > 0 || meldValue([c.face, ...m.faces]) > 0) return { meld: m.id, card: c.id };
    }
  }
  return null;
}

/** The real card(s) of the rack that take a joker's place: its card in a run, both missing suits of a set of three. */
async function findRelease(page) {
  const cards = (await rack(page)).filter((c) => !isJoker(c.face));
  for (const m of await melds(page)) {
    if (!m.release) continue;
    const at = m.faces.findIndex(isJoker);
    const real = m.faces.filter((f) => !isJoker(f));
    const set = real.every((f) => f.slice(0, -1) === real[0].slice(0, -1));
    if (!set) {
      for (const c of cards) {
        const faces = [...m.faces];
        faces[at] = c.face;
        if (meldValue(faces) > 0 && cards.length > 1) return { meld: m.id, cards: [c.id] };
      }
    } else if (m.faces.length === 3) {
      for (const a of cards)
        for (const b of cards)
          if (a.id < b.id && meldValue([...real, a.face, b.face]) > 0 && cards.length > 2) return { meld: m.id, cards: [a.id, b.id] };
    }
  }
  return null;
}

/** One whole turn of Hand by tapping, once the page offers Draw. */
async function handTurn(page, deal) {
  // Take the top discard once a deal; when the card cannot be used this turn, undo and draw.
  if (!deal.took && (await shown(page, "take"))) {
    deal.took = true;
    const before = new Set((await rack(page)).map((c) => c.id));
    if (await tap(page, page.getByTestId("take"), "take")) {
      // Lay the suggested melds only when the taken card is in one of them (the rules want
      // it used this turn); else take the turn back.
      const taken = (await rack(page)).find((c) => !before.has(c.id));
      const inMeld = !!taken && / in a (run|set)/.test((await page.locator(`[data-testid="rack-tile"][data-id="${taken.id}"]`).textContent()) ?? "");
      if (inMeld && (await shown(page, "lay-suggested"))) await tap(page, page.getByTestId("lay-suggested"), "lay-suggested");
      const mustUse = (await page.getByTestId("turn").textContent()).startsWith("Your turn: use the");
      if (!mustUse) return afterDraw(page);
      await tap(page, page.getByTestId("undo"), "undo");
    }
  }
  await tap(page, page.getByTestId("draw"), "draw");
  return afterDraw(page);
}

async function afterDraw(page) {
  if (await shown(page, "lay-suggested")) await tap(page, page.getByTestId("lay-suggested"), "lay-suggested");
  // Turns with a joker on the table the player could release, had he its card(s).
  if ((await melds(page)).some((m) => m.release)) result.jokerMeldTurns = (result.jokerMeldTurns ?? 0) + 1;
  for (let i = 0; i < 6; i++) {
    const release = await findRelease(page);
    if (!release) break;
    for (const id of release.cards) await pickTile(page, id);
    await tap(page, meldButton(page, release.meld, "release"), "release");
  }
  for (let i = 0; i < 8; i++) {
    const layOff = await findLayOff(page);
    if (!layOff) break;
    await pickTile(page, layOff.card);
    await tap(page, meldButton(page, layOff.meld, "lay-off"), "lay-off");
  }
  if (await shown(page, "discard")) await tap(page, page.getByTestId("discard"), "discard");
}

/** Waits for the player's move or a summary: "turn", "summary" or null (nothing yet). */
async function next(page) {
  const handle = await page
    .waitForFunction(
      () => {
        if (document.querySelector('[data-testid="summary"]')) return "summary";
        const busy = (document.querySelector('[data-testid="status"]')?.textContent ?? "").endsWith("…");
        const any = ["draw", "discard", "reveal", "pass", "win"].some((id) => document.querySelector(`[data-testid="${id}"]`));
        return !busy && any ? "turn" : false;
      },
      null,
      { timeout: 15000, polling: 50 },
    )
    .catch(() => null);
  return handle ? handle.jsonValue() : null;
}

/** The summary's figures, once its payments and the wallet are in (and, last, the pot split). */
async function readSummary(page, final) {
  await page.waitForFunction(
    (last) => {
      const seat = document.querySelector('[data-testid="summary-seat-balance"]')?.textContent;
      const wallet = document.querySelector('[data-testid="summary-wallet-balance"]')?.textContent;
      // After a game's last deal (or a Kishpa round) the payments are listed once settled.
      const paid = !last || document.querySelectorAll('[data-testid="payments"] li').length > 0;
      return seat && wallet && wallet !== "…" && seat === wallet && paid;
    },
    final,
    { timeout: 60000, polling: 200 },
  ).catch(() => {});
  return page.evaluate(() => ({
    title: document.querySelector("#summary-title")?.textContent ?? "",
    focused: document.activeElement?.getAttribute("data-testid") ?? "",
    rows: [...document.querySelectorAll('[data-testid="deal-scores"] tbody tr')].map((tr) => {
      const cells = [...tr.children];
      return {
        name: cells[0].textContent,
        deal: cells[1].textContent,
        total: cells[2].textContent,
        payout: tr.querySelector('[data-testid^="payout-"]')?.textContent ?? null,
        left: [...cells.at(-1).querySelectorAll("[data-face]")].map((t) => t.dataset.face),
      };
    }),
    potSplit: document.querySelector('[data-testid="pot-split"]')?.textContent ?? null,
    payments: [...document.querySelectorAll('[data-testid="payments"] li')].map((li) => li.textContent),
    seatBalance: document.querySelector('[data-testid="summary-seat-balance"]')?.textContent ?? "",
    walletBalance: document.querySelector('[data-testid="summary-wallet-balance"]')?.textContent ?? "",
    fairness: document.querySelector('[data-testid="fairness"]')?.textContent ?? "",
  }));
}

/**
 * Leaves a deal's summary open for `ms` by the page's clock, reading it every 250 ms: its
 * record (everything but the fairness line and the live footer: the pause, Ready) must not
 * change, and the next deal may come only once the pause shown at the start has passed —
 * the page then closes the summary itself, and "Deal N summary" must show the same record.
 */
async function holdSummary(page, ms) {
  // The payments line is part of the record once read (mid-game Hand: "No tokens move…").
  await page.waitForFunction(() => !!document.querySelector('[data-testid="summary"] [data-testid="payments"]'), null, { timeout: 20000 }).catch(() => {});
  const record = () =>
    page.evaluate(() => {
      const s = document.querySelector('[data-testid="summary"]');
      if (!s) return null;
      const copy = s.cloneNode(true);
      for (const live of copy.querySelectorAll('[data-testid="fairness"], .summary-actions')) live.remove();
      return copy.textContent;
    });
  const hold = await page.evaluate(async (ms) => {
    const record = () => {
      const s = document.querySelector('[data-testid="summary"]');
      if (!s) return null;
      const copy = s.cloneNode(true);
      for (const live of copy.querySelectorAll('[data-testid="fairness"], .summary-actions')) live.remove();
      return copy.textContent;
    };
    const round = () => document.querySelector('[data-testid="table"]')?.getAttribute("data-round") ?? "";
    const t0 = Date.now();
    const first = record();
    const firstRound = round();
    const pause = document.querySelector('[data-testid="pause"]')?.textContent ?? "";
    const out = { first, firstRound, pause, samples: 0, changed: 0, openWithNextDeal: 0, closedAtMs: null, dealtAtMs: null };
    // The minute, then on until the next deal comes (the pause, as long, ends about now).
    while (Date.now() - t0 < ms || (round() === firstRound && Date.now() - t0 < ms + 15000)) {
      await new Promise((r) => setTimeout(r, 250));
      const text = record();
      const at = Date.now() - t0;
      out.samples += 1;
      if (text !== null && text !== first) out.changed += 1;
      if (text !== null && round() !== firstRound) out.openWithNextDeal += 1;
      if (text === null) out.closedAtMs ??= at;
      if (round() !== firstRound) out.dealtAtMs ??= at;
    }
    out.heldMs = out.dealtAtMs ?? Date.now() - t0;
    out.pauseLeftMs = 1000 * Number(/in (\d+) s/.exec(pause)?.[1] ?? "NaN");
    out.stillOpen = record() !== null;
    return out;
  }, ms);
  if (!hold.stillOpen) {
    // The pause passed and the next deal began: the summary went to the record.
    await pressAnyway(page.getByTestId("last-summary"));
    await page.getByTestId("summary").waitFor({ timeout: 5000 });
    await settle(2000); // the reopened record stays open while the bots play the next deal
  }
  hold.after = await record();
  hold.afterRound = await page.getByTestId("table").getAttribute("data-round");
  if (await page.getByTestId("close-summary").count()) await pressAnyway(page.getByTestId("close-summary"));
  await page.getByTestId("summary").waitFor({ state: "detached", timeout: 10000 });
  return hold;
}

/** "Leave" on the player's turn: the cost in tokens first, then Stay keeps the seat. */
async function leaveAndStay(page) {
  return measured(page, "leave", async () => {
    await page.getByTestId("leave").tap();
    await page.getByTestId("leave-dialog").waitFor({ timeout: 5000 });
    const cost = await page.getByTestId("leave-cost").textContent();
    const dialogs = await page.getByTestId("leave-cost").count();
    await check(page, "hand leave");
    await page.screenshot({ path: `${out}/phone-hand-leave.png` });
    await page.getByTestId("stay").tap();
    await page.getByTestId("leave-dialog").waitFor({ state: "detached", timeout: 5000 });
    const draw = await shown(page, "draw");
    return { cost, dialogs, stayed: (await page.getByTestId("table").count()) === 1, drawAfterStay: draw };
  });
}

/** The game's end: its headline and the player's result, then "Play again" to the new table. */
async function gameEndAndPlayAgain(page) {
  const end = await page.evaluate(() => ({
    title: document.querySelector("#summary-title")?.textContent ?? "",
    myResult: document.querySelector('[data-testid="my-result"]')?.textContent ?? "",
    rule: document.querySelector('[data-testid="pot-split"]')?.textContent ?? "",
  }));
  const again = page.getByTestId("summary").getByTestId("play-again"); // (the dock has one too)
  await again.waitFor({ timeout: 30000 });
  end.buttons = await page.locator('[data-testid="summary"] .summary-actions button, [data-testid="summary"] .summary-actions a').allTextContents();
  await measured(page, "play again", () => again.tap());
  await page.waitForFunction((old) => location.hash.startsWith("#/table/") && !location.hash.endsWith(old), result.handTableId, { timeout: 30000 });
  end.newTableId = page.url().split("/").pop();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  end.newPot = await page.getByTestId("pot").textContent();
  await check(page, "hand play again");
  await page.screenshot({ path: `${out}/phone-hand-play-again.png` });
  end.token = await page.evaluate(() => JSON.parse(localStorage.getItem("kishpa.session") ?? "{}").token);
  // The new game's buy-in is paid before the Kishpa round counts its balances.
  const expected = String(Number(result.deals.at(-1).walletBalance) - 10);
  await page.evaluate(() => (location.hash = "#/"));
  await page.getByTestId("lobby").waitFor();
  end.lobbyBalance = await page
    .waitForFunction((want) => {
      const shown = document.querySelector('[data-testid="lobby-balance"]')?.textContent ?? "";
      return shown === want ? shown : false;
    }, expected, { timeout: 30000, polling: 250 })
    .then((h) => h.jsonValue())
    .catch(() => page.getByTestId("lobby-balance").textContent());
  return end;
}

async function chooseInLobby(page, game, stake) {
  await page.evaluate(() => (location.hash = "#/"));
  await page.getByTestId("lobby").waitFor();
  await page.waitForFunction(() => document.querySelectorAll("#stake option").length > 1, null, { timeout: 20000 });
  await page.getByTestId("game").selectOption({ label: game });
  const offered = await page.locator("#stake option").evaluateAll((els) => els.map((e) => e.value));
  await page.getByTestId("stake").selectOption(String(stake));
  await page.getByTestId("bots").selectOption("3");
  await page.getByTestId("bot-level").selectOption({ label: "Normal: plays to win" });
  await page.getByTestId("bot-pace").selectOption({ label: "Quick: a fifth of a second" });
  return offered;
}

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await page.goto(base);
  await page.getByTestId("name").waitFor();
  await check(page, "sign in");
  await page.getByTestId("name").fill("Noor");
  await page.getByTestId("login").tap();
  await page.getByTestId("lobby").waitFor();
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="lobby-balance"]')?.textContent ?? ""), null, { timeout: 20000 });
  result.lobbyBalance = await page.getByTestId("lobby-balance").textContent();
  result.playerId = await page.evaluate(() => JSON.parse(localStorage.getItem("kishpa.session") ?? "{}").playerId);
  // The rules, from the lobby's own link: a screen of the app, never another site.
  await page.getByTestId("lobby-rules").tap();
  await page.getByTestId("rules").waitFor();
  result.rulesUrl = page.url();
  result.rulesHeadings = await page.locator("main h2").allTextContents();
  await check(page, "rules");
  await page.screenshot({ path: `${out}/phone-rules.png` });

  // ---- Hand: the whole game (or its first deals) --------------------------------------
  result.handStakes = await chooseInLobby(page, "Hand", 10);
  result.botLevels = await page.locator("#bot-level option").allTextContents();
  await check(page, "lobby");
  await page.screenshot({ path: `${out}/phone-lobby.png` });
  await page.getByTestId("play-bots").tap();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  const handStart = Date.now();
  result.handTableId = page.url().split("/").pop();
  result.pot = await page.getByTestId("pot").textContent();
  // How to play, one tap from the table (a dialog over it).
  await page.getByTestId("rules").tap();
  await page.getByTestId("rules-dialog").waitFor();
  result.rulesDialogTitle = await page.getByTestId("rules-dialog").locator("h2").first().textContent();
  await check(page, "hand rules dialog");
  await page.keyboard.press("Escape");
  await page.getByTestId("rules-dialog").waitFor({ state: "detached" });
  let deal = { took: false };
  let checkedTable = false;
  while (Date.now() - handStart < 900_000) {
    const what = await next(page);
    if (what === "summary") {
      const n = result.deals.length + 1;
      const summary = await readSummary(page, n === 7);
      result.deals.push(summary);
      if (n === 2 && deals === 7) {
        // The summary left open a minute, untouched (the pause may pass and deal behind it).
        result.hold = await holdSummary(page, 60_000);
        deal = { took: false };
        continue;
      }
      await page.locator("#summary-title").evaluate((e) => e.scrollIntoView()); // the dialog from its title
      if (n === 1) {
        await check(page, "hand deal end");
        await page.screenshot({ path: `${out}/phone-hand-deal-end.png` });
      }
      if (n === 7) {
        await check(page, "hand game end");
        await page.screenshot({ path: `${out}/phone-hand-game-end.png` });
        result.gameEnd = await gameEndAndPlayAgain(page);
      }
      if (n >= deals) break;
      await page.evaluate(() => window.scrollTo(0, 0)); // back from the screenshot's scroll
      await page.getByTestId("close-summary").tap();
      await page.getByTestId("summary").waitFor({ state: "detached" });
      deal = { took: false };
      continue;
    }
    if (what !== "turn") continue;
    if (!checkedTable && (await shown(page, "discard"))) {
      checkedTable = true;
      await check(page, "hand table");
      result.keyHints = await page.evaluate(() => !!document.querySelector(".keys") || document.body.textContent.includes("(d)"));
      result.rack = await page.getByTestId("rack-tile").evaluateAll((els) => els.map((e) => ({ face: e.dataset.face, grouped: e.classList.contains("grouped") })));
      await page.getByTestId("seats").evaluate((e) => e.scrollIntoView()); // the table from its seats
      await page.screenshot({ path: `${out}/phone-hand.png` });
      await page.evaluate(() => window.scrollTo(0, 0)); // back from the screenshot's scroll
    }
    if (deals === 7 && result.deals.length === 1 && !result.leave && (await shown(page, "draw"))) result.leave = await leaveAndStay(page);
    if (await shown(page, "draw")) await handTurn(page, deal);
    else if (await shown(page, "discard")) await afterDraw(page);
  }
  result.timings.handSeconds = Math.round((Date.now() - handStart) / 100) / 10;
  result.handLog = await page.evaluate((id) => JSON.parse(sessionStorage.getItem(`kishpa.table.${id}`) ?? "{}").log?.map((e) => e.text) ?? [], result.handTableId);

  // ---- Kishpa: a round at stake 10 ----------------------------------------------------
  const kishpaStart = Date.now();
  game = "kishpa";
  result.kishpaStakes = await chooseInLobby(page, "Kishpa", 10);
  await page.getByTestId("play-bots").tap();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  result.kishpaTableId = page.url().split("/").pop();
  result.kishpaStake = await page.evaluate(() => [...document.querySelectorAll(".fact")].map((e) => e.textContent).find((t) => t.startsWith("stake")));
  let kishpaChecked = false;
  while (Date.now() - kishpaStart < 300_000) {
    const what = await next(page);
    if (what === "summary") break;
    if (what !== "turn") continue;
    if (!kishpaChecked && (await shown(page, "discard"))) {
      kishpaChecked = true;
      await check(page, "kishpa table");
      await page.getByTestId("seats").evaluate((e) => e.scrollIntoView());
      await page.screenshot({ path: `${out}/phone-kishpa.png` });
      await page.evaluate(() => window.scrollTo(0, 0));
    }
    for (const id of ["reveal", "pass", "win", "draw", "discard"]) {
      if (await shown(page, id)) {
        await tap(page, page.getByTestId(id), id);
        break;
      }
    }
  }
  await page.getByTestId("summary").waitFor({ timeout: 60000 });
  result.kishpa = await readSummary(page, true);
  await page.locator("#summary-title").evaluate((e) => e.scrollIntoView());
  await page.waitForFunction(() => !(document.querySelector('[data-testid="fairness"]')?.textContent ?? "").includes("checking"), null, { timeout: 60000 }).catch(() => {});
  result.kishpa.fairness = await page.getByTestId("fairness").textContent();
  await check(page, "kishpa round end");
  await page.screenshot({ path: `${out}/phone-kishpa-round-end.png` });
  result.timings.kishpaSeconds = Math.round((Date.now() - kishpaStart) / 100) / 10;
  // The wallet, from the header.
  await page.getByTestId("close-summary").tap();
  await page.getByTestId("wallet-link").tap();
  await page.getByTestId("wallet").waitFor();
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="wallet-balance"]')?.textContent ?? ""), null, { timeout: 20000 });
  result.walletPage = await page.getByTestId("wallet-balance").textContent();
  await check(page, "wallet");
} finally {
  result.timings.totalSeconds = Math.round((Date.now() - started) / 100) / 10;
  writeFileSync(`${out}/newcomer.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
console.log(JSON.stringify({ timings: result.timings, moves: result.moves, refusals: result.refusals, deals: result.deals.length }));
