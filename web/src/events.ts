// The one adapter between the wire contract and the UI: the only module that reads event
// messages (the typed TableEvent oneof), optional seats and setting shapes. When the
// contract changes, this file changes and the screens do not.
import type { MessageInitShape } from "@bufbuild/protobuf";
import {
  type BotLevel,
  DrawSource,
  RevealMoment,
  type Round,
  type RoundResult,
  type TableEvent,
  type TableSettingsSchema,
  type TableView,
} from "./gen/kishpa/table/v1/table_pb";
import { Game } from "./gen/kishpa/common/v1/common_pb";
import { TransferReason } from "./gen/kishpa/wallet/v1/wallet_pb";

export interface UiPayment {
  from: string;
  to: string;
  amount: string;
  reason: string;
}

export interface UiEvent {
  id: string;
  round: number;
  seat: number | null;
  /** The stream's event type (``round_started``, ``discarded`` ...). */
  kind: string;
  /** A tile's face the event shows (discarded, taken, revealed, the kishpa). */
  face?: string;
  /** The tile drawn from the pile: private, only in the drawer's own stream. */
  drawnFace?: string;
  fromDiscards?: boolean;
  name?: string;
  bot?: boolean;
  moment?: string;
  joker?: string;
  nextRound?: number;
  /** Private: the watcher's own dealt tile ids. */
  dealt?: number[];
  /** A settlement: every payment it applied. */
  payments?: UiPayment[];
  /** Hand: the faces of melds laid, a card laid off, jokers released. */
  faces?: string[];
  opening?: boolean;
  value?: number;
  handWin?: boolean;
  winnerSeat?: number | null;
  stockOut?: boolean;
}

const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export function reasonText(reason: TransferReason): string {
  return (TransferReason[reason] ?? "unknown").toLowerCase().replace(/_/g, " ");
}

export function fromWire(e: TableEvent): UiEvent {
  const ev: UiEvent = { id: e.eventId, round: e.round, seat: e.seat ?? null, kind: snake(e.event.case ?? "unknown") };
  const { case: kind, value } = e.event;
  switch (kind) {
    case "playerJoined":
      ev.name = value.displayName;
      ev.bot = value.bot;
      break;
    case "dealt":
      if (value.tiles.length) ev.dealt = value.tiles.map((t) => t.id);
      break;
    case "drew":
      ev.fromDiscards = value.source === DrawSource.DISCARD;
      if (value.tile) {
        if (ev.fromDiscards) ev.face = value.tile.face;
        else ev.drawnFace = value.tile.face;
      }
      break;
    case "discarded":
      ev.face = value.tile?.face;
      break;
    case "roundStarted":
      ev.face = value.kishpa?.face;
      ev.joker = value.jokerFace;
      break;
    case "kishpaReplaced":
      ev.face = value.kishpa?.face;
      ev.joker = value.jokerFace;
      break;
    case "kishpaRevealed":
      ev.face = value.kishpaFace;
      break;
    case "revealWindowOpened":
    case "revealWindowClosed":
      ev.moment = value.moment === RevealMoment.START ? "start" : "end";
      break;
    case "lastRoundPressed":
      ev.nextRound = value.nextRound;
      break;
    case "cardDrawn":
      ev.drawnFace = value.tile?.face;
      break;
    case "dealStarted":
      ev.face = value.topDiscard?.face;
      break;
    case "meldsLaid":
      ev.opening = value.opening;
      ev.value = value.value;
      ev.faces = value.melds.map((m) => m.cards.map((c) => c.face).join(" "));
      break;
    case "laidOff":
      ev.face = value.card?.face;
      break;
    case "jokerReleased":
      ev.faces = value.cards.map((c) => c.face);
      break;
    case "wentOut":
      ev.handWin = value.handWin;
      break;
    case "dealEnded":
      ev.winnerSeat = value.winnerSeat ?? null;
      ev.handWin = value.handWin;
      ev.stockOut = value.winnerSeat === undefined;
      break;
    case "settled":
      ev.payments = value.payments.map((p) => ({
        from: p.fromAccount,
        to: p.toAccount,
        amount: String(p.amount),
        reason: reasonText(p.reason),
      }));
      break;
    default:
      break;
  }
  return ev;
}

export function mySeatOf(view: TableView): number | null {
  return view.mySeat ?? null;
}

export function turnSeatOf(round: Round | undefined): number | null {
  return round?.turnSeat ?? null;
}

export function winnerSeatOf(result: RoundResult | undefined): number | null {
  return result?.winnerSeat ?? null;
}

export function deadlineMsOf(round: Round | undefined): number | null {
  const d = round?.deadline;
  if (!d || (d.seconds === 0n && d.nanos === 0)) return null;
  return Number(d.seconds) * 1000 + Math.floor(d.nanos / 1e6);
}

export interface NewTable {
  game: Game;
  stake: bigint;
  seats: number;
  bots: number;
  /** Unset (0): the server's own default (KISHPA_TABLE_*), the value the rules pages state. */
  turnSeconds?: number;
  revealSeconds?: number;
  pauseMs?: number;
  /** How the house bots play (unset: the server's default, normal). */
  botLevel?: BotLevel;
  /** How long each house bot takes over its turn, in ms (unset: the server's 1 s). */
  botPauseMs?: number;
}

/** The settings message of a new table. */
export function settingsOf(t: NewTable): MessageInitShape<typeof TableSettingsSchema> {
  return {
    game: t.game,
    seats: t.seats,
    bots: t.bots,
    turnTime: t.turnSeconds ? { seconds: BigInt(t.turnSeconds) } : undefined,
    revealWindow: t.revealSeconds ? { seconds: BigInt(t.revealSeconds) } : undefined,
    nextRoundPause: t.pauseMs ? { seconds: BigInt(Math.floor(t.pauseMs / 1000)), nanos: (t.pauseMs % 1000) * 1e6 } : undefined,
    stake: t.stake,
    botLevel: t.botLevel,
    botPause: t.botPauseMs === undefined ? undefined : { seconds: BigInt(Math.floor(t.botPauseMs / 1000)), nanos: (t.botPauseMs % 1000) * 1e6 },
  };
}

export function dealtTiles(ev: UiEvent): number[] | null {
  return ev.dealt ?? null;
}

export function isSettled(ev: UiEvent): boolean {
  return ev.kind === "settled";
}

export function endsRound(ev: UiEvent): boolean {
  return ev.kind === "round_ended" || ev.kind === "deal_scored";
}

/**
 * One line of the event log; null for events not worth a line. In the game's own words
 * (docs/glossary.md): Kishpa's tiles and pile, Hand's cards and stock.
 */
export function describe(ev: UiEvent, name: (seat: number | null) => string, mySeat: number | null, tile: (face: string) => string = (f) => f, hand = false): string | null {
  const who = name(ev.seat);
  const pile = hand ? "stock" : "pile";
  const t = (face: string | undefined) => (face ? tile(face) : "");
  const you = ev.seat !== null && ev.seat === mySeat;
  switch (ev.kind) {
    case "table_created":
      return "Table created";
    case "player_joined":
      return `${ev.name || "A player"} sat down${ev.bot ? " (bot)" : ""}`;
    case "player_left":
      return `${who} left`;
    case "round_started":
      return `Round ${ev.round} started — kishpa ${t(ev.face)}, joker ${t(ev.joker)}`;
    case "dealt":
      return you ? `You were dealt ${ev.dealt?.length ?? ""} ${hand ? "cards" : "tiles"}` : null;
    case "turn_started":
      return you ? "Your turn" : `${who}'s turn`;
    case "drew": {
      const source = ev.fromDiscards ? `took ${t(ev.face)} from the discards` : `drew from the ${pile}`;
      return `${you ? "You" : who} ${source}${ev.drawnFace ? ` (${t(ev.drawnFace)})` : ""}`;
    }
    case "discarded":
      return `${you ? "You" : who} discarded ${t(ev.face)}`;
    case "won":
      return `${you ? "You" : who} won the round!`;
    case "pile_exhausted":
      return `The ${pile} ran out`;
    case "reveal_window_opened":
      return `Reveal window open (${ev.moment})`;
    case "kishpa_revealed":
      return `${who} revealed the kishpa ${t(ev.face)}`;
    case "reveal_window_closed":
      return "Reveal window closed";
    case "kishpa_replaced":
      return `Nobody held a joker: new kishpa ${t(ev.face)}, joker ${t(ev.joker)}`;
    case "turn_timed_out":
      return `${you ? "Your" : `${who}'s`} turn timed out`;
    case "autoplay_on":
      return `${who} is played by the server`;
    case "round_ended":
      return `Round ${ev.round} ended`;
    case "bowl":
      return "The bowl was settled";
    case "settled":
      return `Payments settled (${ev.payments?.length ?? 0})`;
    case "last_round_pressed":
      return `Round ${ev.nextRound ?? ""} will be the last`;
    case "table_closed":
      return "The table closed";
    case "game_started":
      return "The game started: everyone bought into the pot";
    case "deal_started":
      return `Deal ${ev.round} started${ev.face ? ` — first discard ${t(ev.face)}` : ""}`;
    case "card_drawn":
      return ev.drawnFace ? `You drew ${t(ev.drawnFace)}` : null;
    case "melds_laid":
      return `${you ? "You" : who} ${ev.opening ? "opened with" : "laid"} ${ev.faces?.map((m) => m.split(" ").map(t).join(", ")).join(" · ") ?? ""}${ev.value ? ` (${ev.value} points)` : ""}`;
    case "laid_off":
      return `${you ? "You" : who} laid off ${t(ev.face)}`;
    case "joker_released":
      return `${you ? "You" : who} released a joker with ${ev.faces?.map(t).join(", ") ?? ""}`;
    case "turn_undone":
      return `${you ? "You" : who} took the turn back`;
    case "went_out":
      return `${you ? "You" : who} went out${ev.handWin ? " with a hand!" : "!"}`;
    case "deal_ended":
      return ev.stockOut ? `Deal ${ev.round} ended: the stock ran out` : `Deal ${ev.round} ended`;
    case "deal_scored":
      return `Deal ${ev.round} scored`;
    case "game_ended":
      return "The game ended: the pot was split";
    default:
      return null;
  }
}
