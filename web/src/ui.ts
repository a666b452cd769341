// Tiny DOM helpers (no framework), the names and looks of tiles and cards, and server
// errors as sentences a player understands.
import { Code, ConnectError } from "@connectrpc/connect";

type Child = Node | string | null | undefined | false;
export type Attrs = Record<string, string | number | boolean | ((e: Event) => void) | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Child | Child[])[]): HTMLElementTagNameMap[K] {
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

/** An SVG element (pictures of tiles and the bowl; no external files). */
export function svg(tag: string, attrs: Record<string, string | number> = {}, ...children: (SVGElement | string)[]): SVGElement {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const child of children) el.append(child);
  return el;
}

export function replace(target: Element, ...children: (Child | Child[])[]): void {
  target.replaceChildren(...children.flat().filter((c): c is Node | string => !!c));
}

/** Whether the device is used by touch (keyboard hints are then left out). */
export const touchOnly = (): boolean => matchMedia("(hover: none) and (pointer: coarse)").matches;

// ---- errors ------------------------------------------------------------------------------

/** The machine-readable reason a Kishpa service attached (google.rpc.ErrorInfo.reason). */
export function reasonOf(err: unknown): string {
  if (!(err instanceof ConnectError)) return "";
  for (const detail of err.details) {
    if ("type" in detail && detail.type === "google.rpc.ErrorInfo" && "value" in detail) {
      return firstString(detail.value as Uint8Array);
    }
  }
  return "";
}

/** Field 1 (a string) of an encoded message: ErrorInfo's reason, without its schema. */
function firstString(bytes: Uint8Array): string {
  let i = 0;
  const varint = () => {
    let value = 0;
    for (let shift = 0; i < bytes.length; shift += 7) {
      const b = bytes[i++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) break;
    }
    return value;
  };
  while (i < bytes.length) {
    const key = varint();
    const wire = key & 7;
    if (wire === 2) {
      const length = varint();
      if (key >>> 3 === 1) return new TextDecoder().decode(bytes.subarray(i, i + length));
      i += length;
    } else if (wire === 0) varint();
    else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else break;
  }
  return "";
}

const SENTENCES: Record<string, string> = {
  NOT_YOUR_TURN: "It is not your turn yet.",
  MUST_DRAW_FIRST: "Draw first: from the pile (at Hand, the stock), or take the top discard.",
  ALREADY_DREW: "You already drew this turn: now discard (or lay your melds).",
  NO_DRAW: "You cannot draw now.",
  NO_DISCARD: "You cannot discard now.",
  PILE_EMPTY: "Nothing is left to draw (the pile, or at Hand the stock, is empty).",
  EMPTY_DISCARD_PILE: "There is no discard to take.",
  TILE_NOT_IN_HAND: "That tile is no longer in your rack.",
  CARD_NOT_IN_HAND: "That card is no longer in your hand.",
  NOT_A_WINNING_HAND: "Your tiles do not make a winning hand yet.",
  WINDOW_CLOSED: "The reveal window has closed.",
  WINDOW_OPEN: "Wait: a reveal window is open.",
  ALREADY_ACTED: "You already answered this window.",
  ALREADY_REVEALED: "The kishpa was already revealed.",
  NOT_HOLDING_KISHPA: "You do not hold the kishpa tile, so there is nothing to reveal.",
  WINNER_CANNOT_REVEAL: "The round's winner does not reveal.",
  ALREADY_PRESSED: "Last round is already pressed.",
  NO_ROUND: "No round is being played.",
  ROUND_ENDED: "This round is over.",
  ROUND_IN_PROGRESS: "Wait for the round to end.",
  NOT_PLAYING: "The game has not started.",
  GAME_STARTED: "The game has already started.",
  TABLE_CLOSED: "This table has closed.",
  NOT_ENOUGH_PLAYERS: "Not enough players to start yet.",
  CREATOR: "As the table's creator you cannot leave before the game starts.",
  DEAL_OVER: "This deal is over.",
  GAME_OVER: "This game is over.",
  INVALID_MELD: "Those cards do not form a meld (a set of one rank, or a run of one suit).",
  OPENING_BELOW_51: "Your first melds must be worth 51 points or more together.",
  NOT_OPENED: "Open first: lay melds worth 51 points or more.",
  DISCARD_NOT_USED: "Use the card you took from the discards in a meld first (or undo).",
  MUST_KEEP_DISCARD: "Keep one card to discard at the end of your turn.",
  UNKNOWN_MELD: "That meld is no longer on the table.",
  INVALID_LAYOFF: "That card does not fit that meld.",
  INVALID_RELEASE: "Those cards do not release that joker.",
  CLOSED_FOUR: "A set of four takes no more cards.",
  NOTHING_TO_UNDO: "There is nothing to undo this turn.",
  BAD_STAKE: "That stake is not offered.",
  TICKET_MATCHED: "You were already matched to a table.",
  TICKET_EXPIRED: "Nobody else came in time; try again.",
  INSUFFICIENT_FUNDS: "There are not enough tokens for that.",
  TABLE_NOT_FOUND: "That table no longer exists.",
  INVITE_NOT_FOUND: "No table has that invite code (check it, or it may have started).",
  NO_TABLE: "You are not seated at a table.",
  ALREADY_SEATED: "You already sit at this table.",
  NOT_CREATOR: "Only the table's creator can do that.",
  NOT_SEATED: "You do not sit at this table.",
  NOT_ALLOWED_TO_WATCH: "This table does not let you watch.",
  TABLE_FULL: "Every seat is taken.",
  RATE_LIMITED: "Too many requests: wait a moment.",
  TOKEN_EXPIRED: "Your sign-in has expired: sign in again.",
  TOKEN_INVALID: "Your sign-in is not valid any more: sign in again.",
  GUEST_LOGIN_DISABLED: "Guest sign-in is turned off here.",
  INVALID_DISPLAY_NAME: "Choose a name of 1 to 32 letters, digits or spaces.",
  SETTLEMENT_PENDING: "The table is still settling its payments; try again in a moment.",
  TABLE_BUSY: "The table is busy; try again.",
  DEPENDENCY_UNAVAILABLE: "The server is catching its breath; trying again…",
  NOT_DURABLE: "The server could not confirm that yet; trying again…",
};

/** What to tell the player about a failed call: a sentence, never a raw id or a trace. */
export function errorText(err: unknown): string {
  const reason = reasonOf(err);
  if (reason && SENTENCES[reason]) return SENTENCES[reason]!;
  if (err instanceof ConnectError) {
    switch (err.code) {
      case Code.Unavailable:
      case Code.DeadlineExceeded:
        return "The server cannot be reached right now. Check your connection and try again.";
      case Code.Unauthenticated:
        return "Please sign in again.";
      case Code.PermissionDenied:
        return "You are not allowed to do that here.";
      case Code.NotFound:
        return "That was not found (it may have ended).";
      case Code.InvalidArgument:
        return `The server did not accept that: ${withoutIds(err.rawMessage)}.`;
      case Code.FailedPrecondition:
        return "That is not possible right now.";
      default:
        return "Something went wrong. Please try again.";
    }
  }
  if (err instanceof TypeError) return "The server cannot be reached right now. Check your connection.";
  return "Something went wrong. Please try again.";
}

/** Long technical ids (players, tables, bots) out of a message. */
function withoutIds(text: string): string {
  return text.replace(/\b[\w-]*[0-9a-f]{8,}[\w-]*\b/gi, "…").replace(/[.\s]+$/, "");
}

/** Refusals that mean "you already did that": a double press the server already answered. */
export function isRepeat(err: unknown): boolean {
  return ["NOT_YOUR_TURN", "ALREADY_DREW", "ALREADY_ACTED", "NO_DRAW", "NO_DISCARD", "TILE_NOT_IN_HAND", "CARD_NOT_IN_HAND", "WINDOW_CLOSED", "ALREADY_PRESSED"].includes(reasonOf(err));
}

// ---- tiles (Kishpa) and cards (Hand) ---------------------------------------------------

const COLOURS: Record<string, string> = { R: "red", B: "blue", Y: "yellow", K: "black" };
const SUITS: Record<string, { symbol: string; name: string; red: boolean }> = {
  S: { symbol: "♠", name: "spades", red: false },
  H: { symbol: "♥", name: "hearts", red: true },
  D: { symbol: "♦", name: "diamonds", red: true },
  C: { symbol: "♣", name: "clubs", red: false },
};
const RANKS: Record<string, string> = { A: "ace", J: "jack", Q: "queen", K: "king" };

const isCardJoker = (face: string) => /^J\d$/.test(face);
/** A Hand card's face ("10H", "QS", "J1"): Kishpa's faces end with a digit or are dolls. */
export const isCard = (face: string): boolean => isCardJoker(face) || /^(10|[2-9AJQK])[SHDC]$/.test(face);

export function tileClass(face: string): string {
  if (isCardJoker(face)) return "tile card c-J";
  if (isCard(face)) return `tile card ${SUITS[face.at(-1)!]!.red ? "c-R" : "c-K"}`;
  if (face === "DR" || face === "DK") return `tile doll ${face === "DR" ? "c-R" : "c-K"}`;
  return `tile c-${face[0]}`;
}

export function tileLabel(face: string): string {
  if (isCardJoker(face)) return "★";
  if (isCard(face)) return `${face.slice(0, -1)}${SUITS[face.at(-1)!]!.symbol}`;
  if (face === "DR" || face === "DK") return "♦";
  return face.slice(1);
}

/** The tile's spoken name: "red 7", "red 6, joker", "black doll", "queen of hearts", "joker". */
export function tileTitle(face: string, jokerFace = ""): string {
  if (isCardJoker(face)) return "joker";
  if (isCard(face)) {
    const rank = face.slice(0, -1);
    return `${RANKS[rank] ?? rank} of ${SUITS[face.at(-1)!]!.name}`;
  }
  if (face === "DR") return "red doll";
  if (face === "DK") return "black doll";
  const name = `${COLOURS[face[0]!] ?? ""} ${face.slice(1)}`;
  return face === jokerFace ? `${name}, joker` : name;
}
