// A guest plays a whole Kishpa round at stake 10 against 3 server bots by keyboard alone:
// draw, discard, win when the hint says so, reveal or pass; reloads in the middle; rides out
// a network outage (the page shows "reconnecting…" and its draw goes through); the round-end
// summary takes focus, its balances equal the wallet's, the deal is verified. axe-core runs on
// every screen, on a desktop and a 360 px phone. Usage: node e2e/solo.mjs <base url> <output dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { axeViolations, chooseByKeyboard, keyboardMove, launch, loginByKeyboard, settle, sideScroll, smallTargets, tabTo } from "./browser.mjs";

const [base, out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const result = { moves: {}, reloaded: false, axe: {}, sideScroll: {}, smallTargets: {} };
const savedLog = (page) =>
  page.evaluate(() => {
    const tableId = location.hash.split("/").pop();
    const saved = JSON.parse(sessionStorage.getItem(`kishpa.table.${tableId}`) ?? "{}");
    return { tableId, log: saved.log ?? [] };
  });
const rackSize = (page) => page.evaluate(() => document.querySelectorAll('[data-testid="rack-tile"]').length);
const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await loginByKeyboard(page, base, "Ada");
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="lobby-balance"]')?.textContent ?? ""), null, { timeout: 20000 });
  await page.waitForFunction(() => document.querySelectorAll("#stake option").length > 1, null, { timeout: 20000 });
  result.lobbyBalance = await page.getByTestId("lobby-balance").textContent();
  result.stakesOffered = await page.locator("#stake option").evaluateAll((els) => els.map((e) => e.value));
  result.axe["lobby desktop"] = await axeViolations(page);
  await page.screenshot({ path: `${out}/lobby.png` });
  await chooseByKeyboard(page, "game", "Kishpa");
  await chooseByKeyboard(page, "stake", "10");
  await chooseByKeyboard(page, "bots", "3");
  await tabTo(page, '[data-testid="play-bots"]');
  await page.keyboard.press("Enter");
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  result.stake = await page.evaluate(() => [...document.querySelectorAll(".fact")].map((e) => e.textContent).find((t) => t.startsWith("stake")));
  const seats = await page.locator('[data-testid^="seat-"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-bot")));
  result.botSeats = seats;
  const deadline = Date.now() + 240_000;
  let discards = 0;
  while (Date.now() < deadline) {
    if (discards >= 1 && !result.outage && (await page.getByTestId("draw").isVisible().catch(() => false))) {
      // The network goes away just as the player draws: the page says so and keeps trying
      // (the same request id), and the draw goes through once the network is back.
      const before = await rackSize(page);
      await context.setOffline(true);
      const connection = () => page.evaluate(() => document.querySelector('[data-testid="connection"]')?.textContent ?? "");
      let shownText = "";
      for (let press = 0; press < 5 && shownText !== "reconnecting…"; press++) {
        await page.keyboard.press("d");
        const until = Date.now() + 3000;
        while (Date.now() < until && (shownText = await connection()) !== "reconnecting…") await settle(100);
      }
      await settle(3000);
      await context.setOffline(false);
      await page.waitForFunction((n) => document.querySelectorAll('[data-testid="rack-tile"]').length === n + 1, before, { timeout: 30000 });
      await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
      result.outage = { shown: shownText, before, after: await rackSize(page), status: await page.evaluate(() => document.querySelector('[data-testid="status"]')?.textContent ?? "") };
      result.moves.draw = (result.moves.draw ?? 0) + 1;
      continue;
    }
    const did = await keyboardMove(page);
    if (did === "summary") break;
    if (did) result.moves[did] = (result.moves[did] ?? 0) + 1;
    if (did === "discard") discards += 1;
    if (did === "discard" && discards === 1 && !result.tileNames) {
      result.tileNames = await page.getByTestId("rack-tile").evaluateAll((els) => els.map((e) => e.querySelector(".visually-hidden")?.textContent));
      result.kishpaName = await page.getByTestId("kishpa").getAttribute("aria-label");
    }
    if (did === "discard" && discards === 2 && !result.tableShot) {
      await settle(300);
      await page.screenshot({ path: `${out}/table.png` });
      result.axe["kishpa table desktop"] = await axeViolations(page);
      result.tableShot = true;
    }
    if (did === "discard" && discards === 3 && !result.reloaded) {
      // The discard is in once the rack is back to 14 tiles.
      await page.waitForFunction(() => document.querySelectorAll('[data-testid="rack-tile"]').length === 14, null, { timeout: 15000 });
      result.logIdsBeforeReload = (await savedLog(page)).log.map((e) => e.id);
      result.rackBeforeReload = await page.getByTestId("rack-tile").evaluateAll((els) => els.map((e) => e.getAttribute("data-id")));
      await page.reload();
      await page.getByTestId("rack").waitFor({ timeout: 30000 });
      await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 30000 });
      result.rackAfterReload = await page.getByTestId("rack-tile").evaluateAll((els) => els.map((e) => e.getAttribute("data-id")));
      result.reloaded = true;
    }
    if (!did) await settle(150);
  }
  await page.getByTestId("summary").waitFor({ timeout: 120000 });
  result.summaryFocused = await page.evaluate(() => document.activeElement?.getAttribute("data-testid"));
  result.roundAfterReload = await page.getByTestId("table").getAttribute("data-round");
  const final = await savedLog(page);
  result.tableId = final.tableId;
  result.playerId = await page.evaluate(() => JSON.parse(localStorage.getItem("kishpa.session") ?? "{}").playerId);
  result.log = final.log.map((e) => ({ id: e.id, kind: e.kind }));
  result.logIdsAfterReload = final.log.map((e) => e.id);
  // Settlement is asynchronous: wait until the table's balance is the wallet's.
  await page.waitForFunction(() => {
    const seat = document.querySelector('[data-testid="summary-seat-balance"]')?.textContent;
    const wallet = document.querySelector('[data-testid="summary-wallet-balance"]')?.textContent;
    const fair = document.querySelector('[data-testid="fairness"]')?.textContent ?? "";
    return seat && wallet && wallet !== "…" && seat === wallet && !fair.includes("checking");
  }, null, { timeout: 120000, polling: 500 }).catch(() => {});
  result.seatBalance = await page.getByTestId("summary-seat-balance").textContent();
  result.walletBalance = await page.getByTestId("summary-wallet-balance").textContent();
  result.fairness = await page.getByTestId("fairness").textContent();
  result.payments = await page.getByTestId("payments").locator("li").allTextContents().catch(() => []);
  result.summaryTitle = await page.locator("#summary-title").textContent();
  result.winningGroups = await page.getByTestId("winning-groups").locator(".tile").count().catch(() => 0);
  result.axe["round end desktop"] = await axeViolations(page);
  await page.screenshot({ path: `${out}/round-end.png` });
  await page.keyboard.press("Enter"); // Continue has the focus
  await page.getByTestId("summary").waitFor({ state: "detached", timeout: 5000 });
  // How to play, one key (or tap) from the table.
  await page.keyboard.press("?");
  await page.getByTestId("rules-dialog").waitFor();
  result.rulesPictures = await page.getByTestId("rules-dialog").locator("svg[role=img]").count();
  result.axe["rules dialog desktop"] = await axeViolations(page);
  await page.keyboard.press("Escape");
  await page.getByTestId("rules-dialog").waitFor({ state: "detached", timeout: 5000 });
  // The table on a phone, mid-round 2.
  await page.setViewportSize({ width: 390, height: 844 });
  await settle(500);
  result.axe["kishpa table phone"] = await axeViolations(page);
  result.sideScroll["kishpa table phone"] = await sideScroll(page);
  await page.screenshot({ path: `${out}/kishpa-phone.png` });
  await page.setViewportSize({ width: 1100, height: 800 });
  await tabTo(page, '[data-testid="wallet-link"]');
  await page.keyboard.press("Enter");
  await page.getByTestId("wallet").waitFor();
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="wallet-balance"]')?.textContent ?? ""), null, { timeout: 20000 });
  result.walletPage = await page.getByTestId("wallet-balance").textContent();
  // The history arrives after the balance (a second call): wait for its rows before counting.
  await page
    .waitForFunction(() => document.querySelectorAll(".history tbody tr").length > 0, null, { timeout: 20000 })
    .catch(() => {});
  result.walletRows = await page.locator(".history tbody tr").count();
  result.walletRowTexts = await page.locator(".history tbody tr").allTextContents();
  result.walletRowIds = await page.locator(".history tbody tr").evaluateAll((els) => els.map((e) => e.dataset.transfer));
  result.walletMoreShown = await page.getByTestId("wallet-more").isVisible();
  result.axe["wallet desktop"] = await axeViolations(page);
  // A 360 px phone with touch: every screen fits, 44 px targets, no keyboard hints.
  const phone = await browser.newContext({ viewport: { width: 360, height: 780 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.goto(base);
  result.phoneLoginShown = await small.getByTestId("login").isVisible();
  result.axe["login phone"] = await axeViolations(small);
  await small.getByTestId("name").fill("Bea");
  await small.getByTestId("login").tap();
  await small.getByTestId("lobby").waitFor();
  await small.waitForFunction(() => document.querySelectorAll("#stake option").length > 1, null, { timeout: 20000 });
  for (const [name, hash, ready] of [["lobby", "#/", "lobby"], ["rules", "#/rules", "rules"], ["wallet", "#/wallet", "wallet"]]) {
    await small.evaluate((h) => (location.hash = h), hash);
    await small.getByTestId(ready).waitFor();
    await settle(400);
    result.axe[`${name} phone`] = await axeViolations(small);
    result.sideScroll[`${name} phone`] = await sideScroll(small);
    result.smallTargets[`${name} phone`] = await smallTargets(small);
  }
  result.phoneKeyHints = await small.evaluate(() => document.body.textContent.includes("(d)"));
} finally {
  writeFileSync(`${out}/solo.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
console.log(JSON.stringify(result));
