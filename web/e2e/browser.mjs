// Shared helpers of the browser tests: Debian's Chromium driven by playwright-core (which
// never downloads a browser), and a recorder of every gRPC-Web response body a page receives.
import { chromium } from "playwright-core";

export const CHROMIUM = process.env.KISHPA_CHROMIUM ?? "/usr/bin/chromium";

// playwright's launch() starts Chromium with a fresh temporary --user-data-dir of its own
// (and --headless); these are the rest of the flags we want in CI.
export const FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export async function launch() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
}

/** Record every response body of a gRPC-Web call as base64 chunks, before the app reads it. */
export function recordResponses() {
  const record = [];
  window.__kishpaReceived = record;
  const original = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const response = await original(input, init);
    const url = typeof input === "string" ? input : input.url;
    const path = new URL(url, location.href).pathname;
    if (!path.startsWith("/kishpa.") || !response.body) return response;
    const [forApp, forRecord] = response.body.tee();
    const entry = { path, chunks: [] };
    record.push(entry);
    (async () => {
      const reader = forRecord.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        let text = "";
        for (const byte of value) text += String.fromCharCode(byte);
        entry.chunks.push(btoa(text));
      }
    })();
    return new Response(forApp, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}

export async function login(page, base, name) {
  await page.goto(base);
  await page.getByTestId("name").fill(name);
  await page.getByTestId("login").click();
  await page.getByTestId("lobby").waitFor();
}

const visible = async (page, id) => page.getByTestId(id).isVisible().catch(() => false);

/**
 * One move of the player on this page, if the page offers one: reveal or pass in a window,
 * win when the hint says so, draw, discard the suggested tile. Returns what it did.
 */
export async function playOneMove(page) {
  if (await visible(page, "summary")) return "summary";
  for (const [id, what] of [["reveal", "reveal"], ["pass", "pass"], ["win", "win"], ["draw", "draw"], ["discard", "discard"]]) {
    if (await visible(page, id)) {
      const before = await page.getByTestId("table").getAttribute("data-my-turn");
      await page.getByTestId(id).click({ timeout: 5000 }).catch(() => {});
      // Wait for the page to take the move in (the button goes or the turn passes).
      await page.waitForFunction((button) => !document.querySelector(`[data-testid="${button}"]`) || document.querySelector('[data-testid="status"]'), id, { timeout: 10000 }).catch(() => {});
      return before === "true" || id === "pass" || id === "reveal" ? what : what;
    }
  }
  return null;
}

export async function settle(ms) {
  await new Promise((r) => setTimeout(r, ms));
}

// ---- accessibility, phone layout, keyboard ------------------------------------------------

const AXE = new URL("../node_modules/axe-core/axe.min.js", import.meta.url).pathname;

/** axe-core's critical and serious violations on the page as it is now (WCAG 2.x A/AA and best practice). */
export async function axeViolations(page) {
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const result = await window.axe.run(document, { resultTypes: ["violations"] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
  });
  return found.filter((v) => v.impact === "critical" || v.impact === "serious");
}

/** How far the page scrolls sideways (0 when it fits the viewport). */
export async function sideScroll(page) {
  return page.evaluate(() => Math.max(document.documentElement.scrollWidth, document.body.scrollWidth) - window.innerWidth);
}

/** Controls smaller than 44x44 CSS px (buttons, selects, inputs, header links; text links in a sentence are exempt). */
export async function smallTargets(page) {
  return page.evaluate(() =>
    [...document.querySelectorAll("button, select, input, header a, .button, summary")]
      .filter((el) => el.getClientRects().length && getComputedStyle(el).visibility !== "hidden")
      .map((el) => ({ el, box: el.getBoundingClientRect() }))
      .filter(({ box }) => box.width < 43.5 || box.height < 43.5)
      .map(({ el, box }) => `${el.tagName.toLowerCase()}[${el.getAttribute("data-testid") ?? el.textContent?.trim().slice(0, 20)}] ${Math.round(box.width)}x${Math.round(box.height)}`),
  );
}

/** Presses Tab (at most 60 times) until the focused element matches the selector. */
export async function tabTo(page, selector) {
  for (let i = 0; i < 60; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    await page.keyboard.press("Tab");
  }
  throw new Error(`Tab never reached ${selector}`);
}

/** Signs in by keyboard alone. */
export async function loginByKeyboard(page, base, name) {
  await page.goto(base);
  await page.getByTestId("name").waitFor();
  await tabTo(page, '[data-testid="name"]');
  await page.keyboard.type(name);
  await page.keyboard.press("Enter");
  await page.getByTestId("lobby").waitFor();
}

/** Picks an option of a select by keyboard: Tab to it, type the start of the option's text. */
export async function chooseByKeyboard(page, id, text) {
  await tabTo(page, `#${id}`);
  await page.keyboard.type(text, { delay: 20 });
  await page.waitForFunction(([i, t]) => document.getElementById(i)?.selectedOptions[0]?.textContent?.startsWith(t), [id, text], { timeout: 3000 });
  await settle(1100); // the select's type-ahead forgets after a second
}

const shown = async (page, id) => page.getByTestId(id).isVisible().catch(() => false);

/**
 * One move by keyboard, if the page offers one: Enter on the summary's focused Continue,
 * r/p in a reveal window, w to win, d to draw, m to lay the suggested melds (Hand), x to
 * discard the suggested tile. Returns what it did.
 */
export async function keyboardMove(page, skip = new Set()) {
  if (await shown(page, "summary")) return "summary";
  for (const [id, key] of [["reveal", "r"], ["pass", "p"], ["win", "w"], ["draw", "d"], ["lay-suggested", "m"], ["discard", "x"]]) {
    if (!skip.has(id) && (await shown(page, id))) {
      await page.keyboard.press(key);
      await page.waitForFunction((button) => !document.querySelector(`[data-testid="${button}"]`) || document.querySelector('[data-testid="status"]') || document.querySelector('[data-testid="summary"]'), id, { timeout: 10000 }).catch(() => {});
      return id;
    }
  }
  return null;
}
