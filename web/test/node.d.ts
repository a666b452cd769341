// The two Node APIs the contract test uses (no @types/node dependency for two lines).
declare module "node:fs" {
  export function readFileSync(path: string, encoding: "utf8"): string;
}
declare const process: { argv: string[] };
