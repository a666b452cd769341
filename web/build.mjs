// Bundles the web client into dist/ (what the edge serves at "/"), and the fairness module
// for its Node test. esbuild only strips the types: `npm run typecheck` checks them.
import { build } from "esbuild";
import { cpSync, mkdirSync } from "node:fs";

mkdirSync("dist", { recursive: true });
await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  minify: true,
  sourcemap: true,
  format: "esm",
  target: ["es2022"],
  outfile: "dist/app.js",
  logLevel: "warning",
});
cpSync("static", "dist", { recursive: true });
await build({
  entryPoints: ["src/fair.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile: "test/dist/fair.mjs",
  logLevel: "warning",
});
