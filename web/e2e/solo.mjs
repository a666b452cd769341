// A guest plays a whole round against 3 server bots through the page: draw, discard, win when
// the hint says so, reload in the middle, the round-end summary with balances equal to the
// wallet's, the fairness check. Usage: node e2e/solo.mjs <base url> <output dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { launch, login, playOneMove, settle } from "./browser.mjs";

const [base, out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const result = { moves: {}, reloaded: false };
const savedLog = (page) =>
  page.evaluate(() => {
    const tableId = location.hash.split("/").pop();
    const saved = JSON.parse(sessionStorage.getItem(`kishpa.table.${tableId}`) ?? "{}");
    return { tableId, log: saved.log ?? [] };
  });
const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 } });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await login(page, base, "Ada");
  await page.screenshot({ path: `${out}/lobby.png` });
  await page.getByTestId("bots").selectOption("3");
  await page.getByTestId("play-bots").click();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  const seats = await page.locator('[data-testid^="seat-"]').evaluateAll((els) => els.map((e) => e.getAttribute("data-bot")));
  result.botSeats = seats;
  const deadline = Date.now() + 240_000;
  let discards = 0;
  while (Date.now() < deadline) {
    const did = await playOneMove(page);
    if (did === "summary") break;
    if (did) result.moves[did] = (result.moves[did] ?? 0) + 1;
    if (did === "discard") discards += 1;
    if (did === "discard" && discards === 2 && !result.tableShot) {
      await settle(300);
      await page.screenshot({ path: `${out}/table.png` });
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
  await page.screenshot({ path: `${out}/round-end.png` });
  await page.getByTestId("close-summary").click();
  await page.getByTestId("wallet-link").click();
  await page.getByTestId("wallet").waitFor();
  await page.waitForFunction(() => /^\d+$/.test(document.querySelector('[data-testid="wallet-balance"]')?.textContent ?? ""), null, { timeout: 20000 });
  result.walletPage = await page.getByTestId("wallet-balance").textContent();
  // The history arrives after the balance (a second call): wait for its rows before counting.
  await page
    .waitForFunction(() => document.querySelectorAll(".history tbody tr").length > 0, null, { timeout: 20000 })
    .catch(() => {});
  result.walletRows = await page.locator(".history tbody tr").count();
  // A phone-sized screen shows the same table.
  const phone = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.goto(base);
  result.phoneLoginShown = await small.getByTestId("login").isVisible();
} finally {
  writeFileSync(`${out}/solo.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
console.log(JSON.stringify(result));
