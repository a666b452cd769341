// Bundles the web client into dist/ (what the edge serves at "/"), and the fairness module
// for its Node test. esbuild only strips the types: `npm run typecheck` checks them.
//
// Delivery (docs/web.md, "How it is delivered"): the script and the style sheet get
// content-hashed names (app-<hash>.js), so the edge can let browsers keep them for a year;
// index.html names them and is never cached. Every text file also gets a .gz and a .br
// beside it (Node's own zlib, at the highest levels), which the edge picks by the browser's
// Accept-Encoding. The source map is written to maps/, outside dist/: never served.
import { build } from "esbuild";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { basename } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist", { recursive: true });
rmSync("maps", { recursive: true, force: true });
mkdirSync("maps", { recursive: true });
const bundle = await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  // Parts loaded on first use (History) are chunks of their own; the code they share with
  // the app is a chunk the app imports at once (index.html preloads it).
  splitting: true,
  minify: process.env.KISHPA_WEB_DEBUG !== "1",
  sourcemap: "external",
  format: "esm",
  target: ["es2022"],
  outdir: "maps",
  entryNames: "app",
  chunkNames: "[name]-[hash]",
  write: false,
  logLevel: "warning",
});

const hashed = (name, content) => {
  const digest = createHash("sha256").update(content).digest("hex").slice(0, 12);
  const dot = name.lastIndexOf(".");
  return `${name.slice(0, dot)}-${digest}${name.slice(dot)}`;
};

const scripts = new Map(); // esbuild's name -> the script without its map comment
for (const file of bundle.outputFiles) {
  const name = basename(file.path);
  if (name.endsWith(".map")) writeFileSync(`maps/${name}`, file.contents);
  else scripts.set(name, file.text.replace(/\n\/\/# sourceMappingURL=.*\n?$/, "\n"));
}
// Every script gets the hash of its content, the names of the chunks it imports included:
// so each is named after the chunks it imports are (esbuild's own [hash] is not the edge's
// 12 hex digits).
const names = new Map();
while (names.size < scripts.size) {
  for (const [name, text] of scripts) {
    if (names.has(name) || [...scripts.keys()].some((other) => other !== name && !names.has(other) && text.includes(`./${other}`))) continue;
    let content = text;
    for (const [old, fresh] of names) content = content.replaceAll(`./${old}"`, `./${fresh}"`);
    const fresh = hashed(name.replace(/-[A-Z0-9]{8}\.js$/, ".js"), Buffer.from(content));
    names.set(name, fresh);
    writeFileSync(`dist/${fresh}`, content);
  }
}
const jsName = names.get("app.js");
// What the app imports at once (statically): preloaded by the page, and in the size budget.
const preload = [...scripts.get("app.js").matchAll(/(?:import|from)\s*"\.\/([\w-]+\.js)"/g)].map((m) => names.get(m[1]));
const css = readFileSync("static/app.css");
const cssName = hashed("app.css", css);
writeFileSync(`dist/${cssName}`, css);
cpSync("static/favicon.svg", "dist/favicon.svg");
writeFileSync("dist/favicon.ico", icoOf(readFileSync("static/favicon-32.png")));
writeFileSync(
  "dist/index.html",
  readFileSync("static/index.html", "utf8")
    .replace("app.css", cssName)
    .replace(/( *)(<script [^>]*)app\.js(.*)/, (_, indent, start, end) => [...preload.map((p) => `${indent}<link rel="modulepreload" href="${p}" />\n`), `${indent}${start}${jsName}${end}`].join("")),
);
writeFileSync("dist/assets.json", JSON.stringify({ js: jsName, css: cssName, preload, lazy: [...names.values()].filter((n) => n !== jsName && !preload.includes(n)) }, null, 1) + "\n");

for (const name of readdirSync("dist")) {
  if (!/\.(js|css|html|svg)$/.test(name)) continue;
  const content = readFileSync(`dist/${name}`);
  writeFileSync(`dist/${name}.gz`, gzipSync(content, { level: 9 }));
  writeFileSync(
    `dist/${name}.br`,
    brotliCompressSync(content, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: content.length } }),
  );
}

/** An .ico holding one PNG image (allowed since Windows Vista; every browser reads it). */
function icoOf(png) {
  const header = Buffer.alloc(22);
  header.writeUInt16LE(0, 0); // reserved
  header.writeUInt16LE(1, 2); // type: icon
  header.writeUInt16LE(1, 4); // one image
  header.writeUInt8(32, 6); // width
  header.writeUInt8(32, 7); // height
  header.writeUInt8(0, 8); // no palette
  header.writeUInt8(0, 9);
  header.writeUInt16LE(1, 10); // planes
  header.writeUInt16LE(32, 12); // bits per pixel
  header.writeUInt32LE(png.length, 14);
  header.writeUInt32LE(22, 18); // where the image starts
  return Buffer.concat([header, png]);
}

await build({
  entryPoints: ["src/hand.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile: "test/dist/hand.mjs",
  logLevel: "warning",
});
await build({
  entryPoints: ["src/replay.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile: "test/dist/replay.mjs",
  logLevel: "warning",
});
await build({
  entryPoints: ["src/trimmed.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile: "test/dist/trimmed.mjs",
  // The test makes its errors with the same ConnectError class the module checks.
  external: ["@connectrpc/connect"],
  logLevel: "warning",
});
await build({
  entryPoints: ["src/fair.ts"],
  bundle: true,
  format: "esm",
  platform: "neutral",
  outfile: "test/dist/fair.mjs",
  logLevel: "warning",
});
