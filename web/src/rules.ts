// "How to play", inside the app: one page per game, with pictures drawn here (SVG, no files).
// The full written rules are docs/rules/ in the repository; this is the short version a
// player needs at the table, and it must agree with them.
import { h, svg, tileTitle } from "./ui";

export type GameKey = "kishpa" | "hand";

const INK: Record<string, string> = { R: "#c62828", B: "#1565c0", Y: "#8a5a00", K: "#212121" };
const SUIT_SYMBOL: Record<string, string> = { S: "♠", H: "♥", D: "♦", C: "♣" };

/** A picture of one tile or card, named for screen readers ("red 7", "joker"). */
export function tilePicture(face: string, note = "", jokerFace = ""): SVGElement {
  const joker = /^J\d$/.test(face);
  const card = joker || /^(10|[2-9AJQK])[SHDC]$/.test(face);
  const doll = face === "DR" || face === "DK";
  const colour = joker ? "#6a1b9a" : card ? (/[HD]$/.test(face) ? INK.R! : INK.K!) : doll ? INK[face[1]!]! : INK[face[0]!]!;
  const label = joker ? "★" : card ? `${face.slice(0, -1)}${SUIT_SYMBOL[face.at(-1)!]}` : doll ? "♦" : face.slice(1);
  const name = `${tileTitle(face, jokerFace)}${note ? ` (${note})` : ""}`;
  return svg(
    "svg",
    { viewBox: "0 0 40 54", width: 40, height: 54, role: "img", "aria-label": name, class: "pic" },
    svg("title", {}, name),
    svg("rect", { x: 1, y: 1, width: 38, height: 52, rx: 6, fill: "#fffdf6", stroke: "#b8ae95" }),
    svg("text", { x: 20, y: card ? 33 : 35, "text-anchor": "middle", "font-size": card && label.length > 2 ? 15 : 20, "font-weight": 800, fill: colour, "font-family": "system-ui, sans-serif" }, label),
    ...(face === jokerFace ? [svg("circle", { cx: 33, cy: 8, r: 4, fill: "#0f6e5a" })] : []),
  );
}

/** The bowl with tokens in it. */
export function bowlPicture(tokens = 6): SVGElement {
  const coins = Array.from({ length: tokens }, (_, i) => svg("circle", { cx: 26 + (i % 4) * 12, cy: 28 - Math.floor(i / 4) * 7, r: 6, fill: "#d4a017", stroke: "#8a5a00" }));
  return svg(
    "svg",
    { viewBox: "0 0 100 60", width: 120, height: 72, role: "img", "aria-label": `the bowl with ${tokens} tokens`, class: "pic" },
    svg("title", {}, `the bowl with ${tokens} tokens`),
    ...coins,
    svg("path", { d: "M8 30 Q50 70 92 30 Z", fill: "#0f6e5a", stroke: "#0b4f41", "stroke-width": 2 }),
  );
}

const group = (...faces: string[]) => h("span", { class: "pics" }, ...faces.map((f) => tilePicture(f)));

function kishpaRules(): HTMLElement[] {
  return [
    h("h2", { id: "rules-kishpa" }, "Kishpa"),
    h("p", {}, "106 tiles: four colours (red, blue, yellow, black) numbered 1 to 13, two of each, and two dolls. Each player gets 14 tiles; the starter gets 15 and begins by discarding one."),
    h("figure", {}, h("span", { class: "pics" }, tilePicture("R7"), tilePicture("B12"), tilePicture("Y3"), tilePicture("K1"), tilePicture("DR"), tilePicture("DK")), h("figcaption", {}, "Tiles: red 7, blue 12, yellow 3, black 1, and the two dolls.")),
    h("h3", {}, "The kishpa and the joker"),
    h("p", {}, "At the start of each round one tile is turned face up: the kishpa. The next number in its colour is the round's joker (13 wraps to 1), and both copies of that tile are wild. A doll is not wild: it plays only as the joker's own face."),
    h("figure", {}, h("span", { class: "pics" }, tilePicture("R5", "the kishpa"), " → ", tilePicture("R6", "", "R6")), h("figcaption", {}, "Kishpa red 5: every red 6 is a joker (marked with a dot at the table).")),
    h("h3", {}, "A turn"),
    h("ol", {}, h("li", {}, "Draw a tile: from the pile, or the top discard."), h("li", {}, "Discard one tile — or win.")),
    h("h3", {}, "Winning"),
    h("p", {}, "You win when, after your last discard, your 14 tiles all fit in groups and at least one group is a run of four or more. A run is 3 or more numbers in a row in one colour (1 is low only); a set is 3 or 4 of one number in different colours."),
    h("figure", {}, h("span", { class: "pics-row" }, group("B3", "B4", "B5", "B6"), group("R9", "Y9", "K9")), h("figcaption", {}, "A run of four (blue 3 to 6) and a set (three 9s).")),
    h("h3", {}, "The bowl"),
    h("figure", { class: "inline" }, bowlPicture(), h("figcaption", {}, "Every round each player pays 1 token into the bowl (2 when the kishpa is a 1). Win two rounds in a row and the bowl is yours.")),
    h("p", {}, "When the table's creator presses Last round, the next round is the last: its winner takes the bowl if it is his second win in a row; otherwise the bowl is split among everyone."),
    h("h3", {}, "Payments"),
    h("ul", {}, h("li", {}, "The winner gets 2 tokens from each other player, +1 per joker in his hand, +1 if he holds the kishpa, +2 if his last discard was a joker."), h("li", {}, "Bonuses from every other player: 1 for each doll and each joker you hold at the start, 1 for each 1 of the kishpa's colour, and 1 for revealing the kishpa."), h("li", {}, "Every payment is multiplied by the table's stake.")),
    h("h3", {}, "Reveal windows"),
    h("p", {}, "If you hold the other copy of the kishpa you may reveal it for a bonus, but only in a reveal window: at the start of a round when nobody holds a joker, and when the round ends. The table shows a countdown; press Reveal, or Pass (or let it run out)."),
  ];
}

function handRules(): HTMLElement[] {
  return [
    h("h2", { id: "rules-hand" }, "Hand (Rummy 51)"),
    h("p", {}, "Two packs of cards and two jokers. Each player gets 14 cards; the starter gets 15 and does not draw on his first turn. A game is 7 deals."),
    h("figure", {}, h("span", { class: "pics" }, tilePicture("AS"), tilePicture("10H"), tilePicture("QD"), tilePicture("7C"), tilePicture("J1")), h("figcaption", {}, "Cards: ace of spades, 10 of hearts, queen of diamonds, 7 of clubs, and a joker.")),
    h("h3", {}, "Melds"),
    h("p", {}, "A set is 3 or 4 cards of one rank in different suits. A run is 3 or more cards of one suit in sequence; the ace is low (A 2 3) or high (Q K A), never in the middle. A joker may stand for any card."),
    h("figure", {}, h("span", { class: "pics-row" }, group("9S", "10S", "JS"), group("KH", "KD", "J1")), h("figcaption", {}, "A run of spades and a set of kings with a joker.")),
    h("h3", {}, "A turn"),
    h("ol", {}, h("li", {}, "Draw from the stock, or take the top discard (you must use that card this turn)."), h("li", {}, "Lay melds, lay off cards on melds already on the table, release jokers."), h("li", {}, "Discard one card. You may take a turn back (Undo) before you discard.")),
    h("h3", {}, "Opening with 51"),
    h("p", {}, "Your first melds must be worth 51 points or more together, laid in one turn. Ace counts 11 (1 at the low end of a run), J Q K 10, others their number; a joker counts as the card it stands for. After opening you may lay off on any meld and release jokers: put the real card in the joker's place and take the joker."),
    h("h3", {}, "Going out and scoring"),
    h("p", {}, "Empty your hand with a final discard to win the deal: +50 (+100 for a \"hand\": everything at once without having opened before). Everyone else scores minus the cards left in his hand (a joker 25), doubled after a hand. If the stock runs out, nobody wins the deal."),
    h("h3", {}, "The pot"),
    h("figure", { class: "inline" }, bowlPicture(8), h("figcaption", {}, "Everyone pays the buy-in into the pot. After 7 deals the best total takes at least 75%; the rest goes to players within 50 points of him.")),
  ];
}

/** The rules screen (both games, or one). */
export function rulesScreen(game: GameKey | null): HTMLElement {
  return h(
    "main",
    { "data-testid": "rules" },
    h("h1", {}, "How to play"),
    h("nav", { class: "row tabs", "aria-label": "Games" }, h("a", { class: "button", href: "#/rules/kishpa", "aria-current": game === "kishpa" ? "page" : undefined }, "Kishpa"), h("a", { class: "button", href: "#/rules/hand", "aria-current": game === "hand" ? "page" : undefined }, "Hand")),
    h("article", { class: "card rules" }, ...(game === "hand" ? handRules() : game === "kishpa" ? kishpaRules() : [...kishpaRules(), ...handRules()])),
    h("p", {}, h("a", { href: "#/" }, "Back to the lobby")),
  );
}

/** The rules of one game as a dialog over the table (one tap from it). */
export function rulesDialog(game: GameKey, close: () => void): HTMLElement {
  return h(
    "div",
    { class: "overlay", onclick: (e: Event) => e.target === e.currentTarget && close() },
    h(
      "section",
      { class: "card summary rules", role: "dialog", "aria-modal": "true", "aria-labelledby": `rules-${game}`, "data-testid": "rules-dialog", tabindex: -1 },
      ...(game === "hand" ? handRules() : kishpaRules()),
      h("button", { class: "primary", onclick: close, "data-testid": "close-rules" }, "Back to the table"),
    ),
  );
}
