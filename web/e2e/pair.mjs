// Two players in two browser contexts at one private table with two server bots. Every
// gRPC-Web response each page received is recorded (before the app reads it) and written
// out, so the test can check from the wire that neither page ever held the other's tiles.
// Usage: node e2e/pair.mjs <base url> <output dir>
import { mkdirSync, writeFileSync } from "node:fs";
import { launch, login, playOneMove, recordResponses, settle } from "./browser.mjs";

const [base, out] = process.argv.slice(2);
mkdirSync(out, { recursive: true });
const browser = await launch();
const result = { moves: { Ann: 0, Ben: 0 } };
try {
  const pages = {};
  for (const name of ["Ann", "Ben"]) {
    const context = await browser.newContext({ viewport: { width: 900, height: 800 } });
    await context.addInitScript(recordResponses);
    const page = await context.newPage();
    page.on("pageerror", (err) => console.error(`${name} page error:`, err.message));
    await login(page, base, name);
    pages[name] = page;
  }
  const { Ann, Ben } = pages;
  await Ann.getByTestId("private-seats").selectOption("4");
  await Ann.getByTestId("private-bots").selectOption("2");
  await Ann.getByTestId("create-private").click();
  const code = (await Ann.getByTestId("invite-code").textContent({ timeout: 30000 })).trim();
  result.code = code;
  await Ben.getByTestId("code").fill(code);
  await Ben.getByTestId("join-code").click();
  for (const page of [Ann, Ben]) await page.getByTestId("rack").waitFor({ timeout: 30000 });
  const deadline = Date.now() + 200_000;
  const done = new Set();
  while (Date.now() < deadline && done.size < 2) {
    let moved = false;
    for (const [name, page] of Object.entries(pages)) {
      if (done.has(name)) continue;
      const did = await playOneMove(page);
      if (did === "summary") done.add(name);
      else if (did) {
        result.moves[name] += 1;
        moved = true;
      }
    }
    if (!moved) await settle(150);
  }
  result.summaries = done.size;
  await settle(1000); // let the recorders drain the last chunks
  for (const [name, page] of Object.entries(pages)) {
    const seat = await page.locator('[data-testid^="seat-"]').evaluateAll((els) => els.findIndex((e) => e.classList.contains("me")));
    const received = await page.evaluate(() => window.__kishpaReceived);
    writeFileSync(`${out}/received-${name}.json`, JSON.stringify({ seat, received }));
    result[`seat${name}`] = seat;
    result[`responses${name}`] = received.length;
  }
} finally {
  writeFileSync(`${out}/pair.json`, JSON.stringify(result, null, 1));
  await browser.close();
}
console.log(JSON.stringify(result));
