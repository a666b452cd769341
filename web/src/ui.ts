// Tiny DOM helpers (no framework).
type Child = Node | string | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | ((e: Event) => void) | undefined> = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === false) continue;
    if (typeof value === "function") el.addEventListener(key.replace(/^on/, ""), value);
    else if (key === "class") el.className = String(value);
    else if (value === true) el.setAttribute(key, "");
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return el;
}

export function replace(target: Element, ...children: (Child | Child[])[]): void {
  target.replaceChildren(...children.flat().filter((c): c is Node | string => !!c));
}

export function errorText(err: unknown): string {
  if (err && typeof err === "object" && "rawMessage" in err) return String((err as { rawMessage: string }).rawMessage);
  return err instanceof Error ? err.message : String(err);
}

export function tileClass(face: string): string {
  if (face === "DR" || face === "DK") return `tile doll ${face === "DR" ? "c-R" : "c-K"}`;
  return `tile c-${face[0]}`;
}

export function tileLabel(face: string): string {
  if (face === "DR") return "♦";
  if (face === "DK") return "♦";
  return face.slice(1);
}

export function tileTitle(face: string): string {
  const colours: Record<string, string> = { R: "red", B: "blue", Y: "yellow", K: "black" };
  if (face === "DR") return "red doll";
  if (face === "DK") return "black doll";
  return `${colours[face[0]!] ?? ""} ${face.slice(1)}`;
}
