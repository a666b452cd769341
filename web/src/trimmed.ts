// A table keeps only its current round (docs/api.md, "A table keeps its current round"): a
// watch resumed from an older event is refused FAILED_PRECONDITION,
// reason EVENTS_TRIMMED. The page then reloads the table and watches from the new view.
import { reasonOf } from "./ui";

export const EVENTS_TRIMMED = "EVENTS_TRIMMED";

/**
 * Where to watch from after a watch failed: when the server said EVENTS_TRIMMED, `reload`
 * reads and shows the table again and returns its view's last event id; otherwise null (an
 * outage or another refusal: the caller retries from the last event seen, or reports it).
 */
export async function resumeAfter(err: unknown, reload: () => Promise<string>): Promise<string | null> {
  return reasonOf(err) === EVENTS_TRIMMED ? reload() : null;
}
