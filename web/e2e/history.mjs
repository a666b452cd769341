// History and replay (issue 31): a guest opens a Kishpa table and a Hand table with three
// quick bots each from the lobby and leaves both once dealt (his seats play on auto-play, and
// with only bots left each table ends with that round or deal, which the worker archives).
// Then, by keyboard, he opens History, each game's rounds, and the replay of each round, and
// steps it from the deal to its last move with →, reading at every step what the page shows
// (every seat's hand, the discards, what was laid), which the test checks against the
// archived record; then back with ← and Home. axe on each screen, desktop and a 360 px phone.
// Usage: node e2e/history.mjs <base url> <output dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { axeViolations, launch, login, settle, sideScroll, smallTargets, tabTo } from "./browser.mjs";

const [base, out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const result = { tables: {}, games: [], replays: {}, axe: {}, sideScroll: {}, smallTargets: {} };
const browser = await launch();

/** Opens a table of `game` at stake 10 with 3 quick bots, waits for the deal, and leaves. */
async function playAndLeave(page, game) {
  await page.goto(`${base}/#/`);
  await page.waitForFunction(() => document.querySelectorAll("#stake option").length > 1, null, { timeout: 20000 });
  await page.selectOption("#game", { label: game });
  await page.selectOption("#stake", "10");
  await page.selectOption("#bots", "3");
  await page.selectOption("#bot-pace", { index: 1 }); // quick
  await page.getByTestId("play-bots").click();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  result.tables[game] = await page.evaluate(() => location.hash.split("/").pop());
  await page.getByTestId("leave").click();
  await page.getByTestId("leave-confirm").click();
  await page.getByTestId("lobby").waitFor({ timeout: 15000 });
}

/** What the replay shows now: its step, the move line, every hand, the discards, the laid cards. */
const shown = (page) =>
  page.evaluate(() => {
    const ids = (el) => [...(el?.querySelectorAll("[data-id]") ?? [])].map((t) => Number(t.getAttribute("data-id")));
    return {
      step: Number(document.querySelector(".replay")?.getAttribute("data-step")),
      move: document.querySelector('[data-testid="replay-move"]')?.textContent ?? "",
      hands: [...document.querySelectorAll('[data-testid="replay-hand"]')].map(ids),
      discards: ids(document.querySelector('[data-testid="replay-discards"]')),
      laid: [...document.querySelectorAll('[data-testid="replay-laid"] .group')].map(ids),
    };
  });

try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  const started = Date.now();
  result.startedAt = new Date(started).toISOString();
  await login(page, base, "Rina");
  await playAndLeave(page, "Kishpa");
  await playAndLeave(page, "Hand");
  result.leftAfterMs = Date.now() - started;
  result.playerId = await page.evaluate(() => JSON.parse(localStorage.getItem("kishpa.session")).playerId);

  // History by keyboard: the header's link, then wait (reloading the screen) for both games.
  await tabTo(page, '[data-testid="history-link"]');
  await page.keyboard.press("Enter");
  await page.getByTestId("history").waitFor();
  const deadline = Date.now() + 150_000;
  for (;;) {
    const tablesListed = await page.getByTestId("history-game").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-table")));
    for (const [game, table] of Object.entries(result.tables)) if (tablesListed.includes(table)) result.listedAfterMs = { [game]: Date.now() - started, ...result.listedAfterMs };
    if (Object.values(result.tables).every((t) => tablesListed.includes(t))) break;
    if (Date.now() > deadline) throw new Error(`the games never showed in History: ${tablesListed}`);
    await settle(1000);
    await page.evaluate(() => dispatchEvent(new HashChangeEvent("hashchange")));
    await page.getByTestId("history").waitFor();
  }
  result.archivedAfterMs = Date.now() - started;
  result.games = await page.getByTestId("history-game").evaluateAll((rows) =>
    rows.map((r) => ({ table: r.getAttribute("data-table"), round: Number(r.getAttribute("data-round")), cells: Object.fromEntries([...r.cells].map((c) => [c.getAttribute("data-label"), c.textContent])) })),
  );
  result.axe["history desktop"] = await axeViolations(page);
  await page.screenshot({ path: `${out}/history.png` });

  for (const [game, tableId] of Object.entries(result.tables)) {
    await page.goto(`${base}/#/history`);
    await page.getByTestId("history-game").first().waitFor();
    await tabTo(page, `[data-table="${tableId}"] [data-testid="history-open"]`);
    await page.keyboard.press("Enter");
    await page.getByTestId("history-round").first().waitFor({ timeout: 15000 });
    const rounds = await page.getByTestId("history-round").evaluateAll((rows) => rows.map((r) => Number(r.getAttribute("data-round"))));
    result.axe[`${game} rounds desktop`] = await axeViolations(page);
    result.replays[game] = [];
    for (const round of rounds) {
      await page.goto(`${base}/#/history/${tableId}`);
      await page.getByTestId("history-round").first().waitFor({ timeout: 15000 });
      await tabTo(page, `[data-testid="history-round"][data-round="${round}"] [data-testid="history-replay"]`);
      await page.keyboard.press("Enter");
      await page.locator(".replay").waitFor({ timeout: 15000 });
      await page.waitForFunction(() => !/Checking/.test(document.querySelector('[data-testid="replay-verdict"]')?.textContent ?? "Checking"), null, { timeout: 20000 });
      const moves = Number(await page.locator(".replay").getAttribute("data-moves"));
      const replay = { round, moves, verdict: await page.getByTestId("replay-verdict").textContent(), steps: [await shown(page)] };
      // Step forward with the keyboard, every move, to the end; and once past it (nothing more).
      await tabTo(page, '[data-testid="replay-next"]');
      for (let i = 1; i <= moves + 1; i++) {
        await page.keyboard.press("ArrowRight");
        const now = await shown(page);
        if (i <= moves) replay.steps.push(now);
        else replay.pastEnd = now.step;
      }
      replay.focusAfter = await page.evaluate(() => document.activeElement?.getAttribute("data-testid"));
      await page.keyboard.press("ArrowLeft");
      replay.back = await shown(page);
      await page.keyboard.press("Home");
      replay.home = (await shown(page)).step;
      if (round === rounds[0]) {
        result.axe[`${game} replay desktop`] = await axeViolations(page);
        await page.keyboard.press("End");
        await page.screenshot({ path: `${out}/replay-${game.toLowerCase()}.png`, fullPage: true });
      }
      result.replays[game].push(replay);
    }
  }

  // The same screens on a 360 px touch phone.
  const phone = await browser.newContext({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.goto(base);
  await small.evaluate((session) => localStorage.setItem("kishpa.session", session), await page.evaluate(() => localStorage.getItem("kishpa.session")));
  const tableId = result.tables.Hand;
  for (const [name, hash, ready] of [["history", "#/history", "history-game"], ["rounds", `#/history/${tableId}`, "history-round"], ["replay", `#/history/${tableId}/1`, "replay-hand"]]) {
    await small.goto(`${base}/${hash}`);
    await small.getByTestId(ready).first().waitFor({ timeout: 15000 });
    result.axe[`${name} phone`] = await axeViolations(small);
    result.sideScroll[name] = await sideScroll(small);
    result.smallTargets[name] = await smallTargets(small);
    await small.screenshot({ path: `${out}/phone-${name}.png`, fullPage: true });
  }
  result.totalMs = Date.now() - started;
} finally {
  writeFileSync(`${out}/history.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
