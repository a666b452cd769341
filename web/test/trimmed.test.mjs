// The page's answer to a watch refused EVENTS_TRIMMED (src/trimmed.ts, bundled by build.mjs
// into test/dist): it reloads the table and watches from the new view; any other failure is
// left to the retry loop. The errors are built as the server sends them: a google.rpc.ErrorInfo
// detail (reason, field 1; domain, field 2) on a FAILED_PRECONDITION.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError } from "@connectrpc/connect";
import { resumeAfter, EVENTS_TRIMMED } from "./dist/trimmed.mjs";

function errorInfo(reason, domain = "kishpa.dev") {
  const field = (tag, text) => {
    const bytes = new TextEncoder().encode(text);
    return [tag, bytes.length, ...bytes];
  };
  return new Uint8Array([...field(0x0a, reason), ...field(0x12, domain)]);
}

function refusal(code, reason) {
  const details = reason ? [{ type: "google.rpc.ErrorInfo", value: errorInfo(reason) }] : [];
  return new ConnectError("refused", code, undefined, details);
}

test("EVENTS_TRIMMED reloads the view and goes on from its last event id", async () => {
  let reloads = 0;
  const from = await resumeAfter(refusal(Code.FailedPrecondition, EVENTS_TRIMMED), async () => {
    reloads += 1;
    return "1700000000000-4";
  });
  assert.equal(from, "1700000000000-4");
  assert.equal(reloads, 1);
});

test("an outage or another refusal is not a reload", async () => {
  const never = async () => assert.fail("reloaded");
  assert.equal(await resumeAfter(refusal(Code.Unavailable, "DEPENDENCY_UNAVAILABLE"), never), null);
  assert.equal(await resumeAfter(refusal(Code.ResourceExhausted, "WATCH_TOO_SLOW"), never), null);
  assert.equal(await resumeAfter(refusal(Code.Unavailable), never), null);
  assert.equal(await resumeAfter(new TypeError("fetch failed"), never), null);
});
