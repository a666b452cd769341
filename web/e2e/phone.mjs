// The phone table (issue 33): a guest plays Hand at buy-in 10 with a bot on a touch phone of
// the given size. During his turns the page never scrolls (window.scrollY is measured before
// and after each tap) and the rack, the actions and the turn timer are on screen; the table
// opens with the focus on the rack; the drawn card is marked and the discard button names
// its card. At the deal's end the summary stays unchanged while it is open (no clock runs
// behind it); "Ready" deals the next deal at once; "Leave" first says what it costs.
// Usage: node e2e/phone.mjs <base url> <output dir> <width> <height>
import { mkdirSync, writeFileSync } from "node:fs";
import { axeViolations, keyboardMove, launch, login, settle, sideScroll } from "./browser.mjs";

const [base, out, width = "390", height = "844"] = process.argv.slice(2);
const size = `${width}x${height}`;
mkdirSync(out, { recursive: true });
const result = { size, scrollY: [], offScreen: [], turns: 0, axe: {} };

/** Where the controls of a turn are: each must be inside the viewport, nothing scrolled. */
const measure = (page, when) =>
  page.evaluate((label) => {
    const inView = (el) => {
      if (!el) return true;
      const r = el.getBoundingClientRect();
      return r.top >= 0 && r.bottom <= window.innerHeight + 0.5 && r.height > 0;
    };
    const missing = [];
    for (const id of ["rack", "timer", "draw", "discard"]) {
      const el = document.querySelector(`[data-testid="${id}"]`);
      if (el && !inView(el)) missing.push(`${label}: ${id}`);
    }
    return { scrollY: window.scrollY, missing };
  }, when);

const browser = await launch();
try {
  const context = await browser.newContext({ viewport: { width: Number(width), height: Number(height) }, isMobile: true, hasTouch: true });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error("page error:", err.message));
  await login(page, base, "Pia");
  await page.waitForFunction(() => document.querySelectorAll("#stake option").length > 1, null, { timeout: 20000 });
  await page.selectOption("#game", { label: "Hand" });
  await page.selectOption("#stake", "10");
  await page.selectOption("#bots", "1");
  await page.selectOption("#bot-pace", { index: 1 }); // quick: 0.2 s a bot turn
  result.timersHelp = await page.locator("#stake-help").textContent();
  await page.getByTestId("play-bots").tap();
  await page.getByTestId("rack").waitFor({ timeout: 30000 });
  await settle(500);
  result.focusOnOpen = await page.evaluate(() => document.activeElement?.getAttribute("data-testid"));
  result.pot = await page.getByTestId("pot").textContent();

  // Three of his turns by touch, measured before and after every tap.
  const deadline = Date.now() + 180_000;
  while (result.turns < 3 && Date.now() < deadline) {
    if (await page.getByTestId("summary").isVisible().catch(() => false)) break;
    if (!(await page.getByTestId("draw").isVisible().catch(() => false))) {
      await settle(150);
      continue;
    }
    for (const step of ["draw", "discard"]) {
      const before = await measure(page, `before ${step}`);
      result.scrollY.push(before.scrollY);
      result.offScreen.push(...before.missing);
      if (step === "discard") {
        result.drawnMarked ??= await page.locator('[data-testid="rack-tile"][data-drawn="true"]').count();
        result.discardLabel ??= await page.getByTestId("discard").textContent();
      }
      if (!(await page.getByTestId(step).isVisible().catch(() => false))) break;
      await page.getByTestId(step).tap({ timeout: 5000 });
      // Taken in: the button is gone (after a draw, Discard is there instead).
      const done = (s) => !document.querySelector(`[data-testid="${s}"]`) && (s !== "draw" || !!document.querySelector('[data-testid="discard"]') || !!document.querySelector('[data-testid="summary"]'));
      await page.waitForFunction(done, step, { timeout: 10000 }).catch(() => {});
      result.scrollY.push((await measure(page, `after ${step}`)).scrollY);
    }
    result.turns += 1;
    if (result.turns === 1) {
      result.axe["phone table"] = await axeViolations(page);
      result.sideScroll = await sideScroll(page);
      await page.screenshot({ path: `${out}/phone-${size}-table.png` });
    }
  }

  // The rest of the deal, by keys (quicker), to its summary.
  const end = Date.now() + 240_000;
  while (Date.now() < end && (await keyboardMove(page)) !== "summary") await settle(100);
  await page.getByTestId("summary").waitFor({ timeout: 60000 });
  result.pause = await page.getByTestId("pause").textContent();
  // The record part: the title and the scores (the wallet line and the pause are live).
  const recordOf = () => page.evaluate(() => `${document.querySelector("#summary-title")?.textContent}|${document.querySelector('[data-testid="deal-scores"]')?.outerHTML}`);
  const first = await recordOf();
  const firstRound = await page.getByTestId("table").getAttribute("data-round");
  await settle(8000); // the summary left open: nothing in it changes, nothing is dealt
  result.summaryUnchanged = first === (await recordOf());
  result.summaryTitle = await page.locator("#summary-title").textContent();
  result.roundWhileOpen = await page.getByTestId("table").getAttribute("data-round");
  result.firstRound = firstRound;
  result.pauseLater = await page.getByTestId("pause").textContent();
  result.axe["phone summary"] = await axeViolations(page);
  await page.screenshot({ path: `${out}/phone-${size}-summary.png` });
  result.continueLabel = await page.getByTestId("close-summary").textContent();
  await page.getByTestId("close-summary").tap();
  await page.waitForFunction((r) => document.querySelector('[data-testid="table"]')?.getAttribute("data-round") !== r, firstRound, { timeout: 10000 });
  result.nextRound = await page.getByTestId("table").getAttribute("data-round");
  result.record = await page.getByTestId("last-summary").textContent().catch(() => "");

  // Leaving: the cost first, then Stay.
  await page.getByTestId("leave").tap();
  await page.getByTestId("leave-dialog").waitFor({ timeout: 5000 });
  result.leaveCost = await page.getByTestId("leave-cost").textContent();
  await page.screenshot({ path: `${out}/phone-${size}-leave.png` });
  result.axe["phone leave"] = await axeViolations(page);
  await page.getByTestId("stay").tap();
  await page.getByTestId("leave-dialog").waitFor({ state: "detached", timeout: 5000 });
  result.stayed = (await page.getByTestId("table").count()) === 1;

  // The sound toggle is remembered across a reload; reduced motion turns the card moves off.
  await page.getByTestId("mute").tap();
  result.muteAfterTap = await page.getByTestId("mute").textContent();
  await page.reload();
  await page.getByTestId("mute").waitFor({ timeout: 20000 });
  result.muteAfterReload = await page.getByTestId("mute").textContent();
  const animation = () => page.evaluate(() => {
    const top = document.querySelector('[data-testid="top-discard"]');
    return top ? getComputedStyle(top).animationName : "no discard";
  });
  result.animation = await animation();
  await page.emulateMedia({ reducedMotion: "reduce" });
  result.animationReduced = await animation();
} finally {
  writeFileSync(`${out}/phone.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
console.log(JSON.stringify(result));
