// The contract test of another language: protobuf-es code generated from protos/ (web's
// buf.gen.yaml) decodes every table event the server sends, with its own types.
//
// Input (argv[2], written by tests/integration/test_ts_contract.py): JSON
//   {"events": [base64 WatchTableResponse, ...], "status": base64 google.rpc.Status}
// Output (stdout): JSON {"events": [{"kind", "json", "faces"}], "missing": [...], "error"}.
import { readFileSync } from "node:fs";
import { fromBinary, toJson } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { StatusSchema } from "../src/gen/google/rpc/status_pb";
import { ErrorInfoSchema } from "../src/gen/google/rpc/error_details_pb";
import type { Tile } from "../src/gen/kishpa/common/v1/common_pb";
import {
  TableEventSchema,
  WatchTableResponseSchema,
  type TableEvent,
} from "../src/gen/kishpa/table/v1/table_pb";

/** Every tile an event names, read through each event's own typed fields. */
function tiles(event: TableEvent): Tile[] {
  const e = event.event;
  switch (e.case) {
    case "dealt":
      return e.value.tiles;
    case "drew":
      return e.value.tile ? [e.value.tile] : [];
    case "cardDrawn":
      return e.value.tile ? [e.value.tile] : [];
    case "discarded":
      return e.value.tile ? [e.value.tile] : [];
    case "roundStarted":
      return [...(e.value.kishpa ? [e.value.kishpa] : []), ...e.value.dollsReturned];
    case "kishpaReplaced":
      return [...(e.value.kishpa ? [e.value.kishpa] : []), ...e.value.dollsReturned];
    case "won":
      return [
        ...(e.value.finalDiscard ? [e.value.finalDiscard] : []),
        ...e.value.groups.flatMap((g) => g.tiles),
      ];
    case "roundEnded":
      return e.value.finalDiscard ? [e.value.finalDiscard] : [];
    case "dealStarted":
      return e.value.topDiscard ? [e.value.topDiscard] : [];
    case "meldsLaid":
      return e.value.melds.flatMap((m) => m.cards);
    case "laidOff":
      return [...(e.value.card ? [e.value.card] : []), ...(e.value.meld?.cards ?? [])];
    case "jokerReleased":
      return [...e.value.cards, ...e.value.jokers, ...(e.value.meld?.cards ?? [])];
    case "turnUndone":
      return [...e.value.discardPile, ...e.value.melds.flatMap((m) => m.cards)];
    case "dealEnded":
      return e.value.hands.flatMap((h) => h.tiles);
    case "tableCreated":
    case "playerJoined":
    case "playerLeft":
    case "autoplayOn":
    case "deadline":
    case "lastRoundPressed":
    case "phaseRecorded":
    case "settled":
    case "tableClosed":
    case "turnStarted":
    case "turnTimedOut":
    case "revealWindowOpened":
    case "mayReveal":
    case "kishpaRevealed":
    case "revealDeclined":
    case "revealWindowClosed":
    case "pileExhausted":
    case "bowl":
    case "gameStarted":
    case "wentOut":
    case "seedRevealed":
    case "dealScored":
    case "gameEnded":
    case "seedCommitted":
    case "contributionAccepted":
    case "playerReady":
    case undefined:
      return [];
    default: {
      // A new case of the oneof fails the type check here until this test reads it.
      const unknown: never = e;
      throw new Error(`unhandled event ${JSON.stringify(unknown)}`);
    }
  }
}

function bytes(b64: string): Uint8Array {
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

const input = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as {
  events: string[];
  status: string;
};
const seen = new Set<string>();
const events = input.events.map((b64) => {
  const message = fromBinary(WatchTableResponseSchema, bytes(b64));
  const event = message.event;
  if (event === undefined) throw new Error("a WatchTableResponse without its event");
  const kind = event.event.case ?? "";
  seen.add(kind);
  return {
    kind,
    json: toJson(WatchTableResponseSchema, message),
    faces: tiles(event).map((t) => [t.id, t.face]),
  };
});
const oneof = TableEventSchema.oneofs.find((o) => o.name === "event");
if (oneof === undefined) throw new Error("TableEvent has no oneof named event");
const missing = oneof.fields.map((f) => f.localName).filter((name) => !seen.has(name));
const status = fromBinary(StatusSchema, bytes(input.status));
const infos = status.details.map((d) => anyUnpack(d, ErrorInfoSchema)).filter((i) => i);
const info = infos[0];
console.log(
  JSON.stringify({
    events,
    missing,
    error: { code: status.code, reason: info?.reason ?? "", domain: info?.domain ?? "" },
  }),
);
