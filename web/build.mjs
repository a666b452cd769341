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
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

rmSync("dist", { recursive: true, force: true });
mkdirSync("dist", { recursive: true });
mkdirSync("maps", { recursive: true });
const bundle = await build({
  entryPoints: ["src/main.ts"],
  bundle: true,
  minify: process.env.KISHPA_WEB_DEBUG !== "1",
  sourcemap: "external",
  format: "esm",
  target: ["es2022"],
  outdir: "maps",
  entryNames: "app",
  write: false,
  logLevel: "warning",
});

const hashed = (name, content) => {
  const digest = createHash("sha256").update(content).digest("hex").slice(0, 12);
  const dot = name.lastIndexOf(".");
  return `${name.slice(0, dot)}-${digest}${name.slice(dot)}`;
};

let js = null;
for (const file of bundle.outputFiles) {
  if (file.path.endsWith(".map")) writeFileSync("maps/app.js.map", file.contents);
  else js = Buffer.from(file.text.replace(/\n\/\/# sourceMappingURL=.*\n?$/, "\n"));
}
const css = readFileSync("static/app.css");
const jsName = hashed("app.js", js);
const cssName = hashed("app.css", css);
writeFileSync(`dist/${jsName}`, js);
writeFileSync(`dist/${cssName}`, css);
cpSync("static/favicon.svg", "dist/favicon.svg");
writeFileSync("dist/favicon.ico", icoOf(readFileSync("static/favicon-32.png")));
writeFileSync(
  "dist/index.html",
  readFileSync("static/index.html", "utf8").replace("app.css", cssName).replace("app.js", jsName),
);
writeFileSync("dist/assets.json", JSON.stringify({ js: jsName, css: cssName }, null, 1) + "\n");

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
