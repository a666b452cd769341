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
