// The services through the edge: one gRPC-Web transport (binary) to the page's own origin,
// the player's token added to every call, the session kept in localStorage, and the one
// retry rule of the page (a call that meets an outage is sent again, same request id).
import { Code, ConnectError, createClient, type Client, type Interceptor } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { AuthService } from "./gen/kishpa/auth/v1/auth_pb";
import { MatchmakingService } from "./gen/kishpa/matchmaking/v1/matchmaking_pb";
import { TableService } from "./gen/kishpa/table/v1/table_pb";
import { WalletService } from "./gen/kishpa/wallet/v1/wallet_pb";

export interface Session {
  token: string;
  playerId: string;
  name: string;
}

const SESSION_KEY = "kishpa.session";

export function loadSession(): Session | null {
  try {
    const raw = localStorage.getItem(SESSION_KEY);
    return raw ? (JSON.parse(raw) as Session) : null;
  } catch {
    return null;
  }
}

export function saveSession(session: Session | null): void {
  if (session) localStorage.setItem(SESSION_KEY, JSON.stringify(session));
  else localStorage.removeItem(SESSION_KEY);
}

const withToken: Interceptor = (next) => async (req) => {
  const session = loadSession();
  if (session) req.header.set("authorization", `Bearer ${session.token}`);
  return next(req);
};

export const transport = createGrpcWebTransport({
  baseUrl: location.origin,
  useBinaryFormat: true,
  interceptors: [withToken],
});

export const auth: Client<typeof AuthService> = createClient(AuthService, transport);
export const matchmaking: Client<typeof MatchmakingService> = createClient(MatchmakingService, transport);
export const tables: Client<typeof TableService> = createClient(TableService, transport);
export const wallet: Client<typeof WalletService> = createClient(WalletService, transport);

export function requestId(): string {
  return crypto.randomUUID();
}

// ---- riding out outages ------------------------------------------------------------------

/** How long the page keeps retrying a call through an outage, and its backoff steps. */
export const RETRY = { budgetMs: 45_000, firstMs: 250, capMs: 4_000 };

/** Codes that mean "not now" (the edge, a service or its store is away), never "no". */
const TRANSIENT = new Set([Code.Unavailable, Code.DeadlineExceeded, Code.Aborted, Code.ResourceExhausted]);

export function isTransient(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return err instanceof TypeError; // fetch failed: offline
  if (TRANSIENT.has(err.code)) return true;
  // A fetch that failed before any answer (the edge is down) reaches us as Unknown.
  return err.code === Code.Unknown && /fetch|network|load failed/i.test(err.rawMessage);
}

/** The next wait: doubling from firstMs, capped, with full jitter (no thundering herd). */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RETRY.capMs, RETRY.firstMs * 2 ** attempt);
  return Math.max(50, Math.floor(random() * ceiling));
}

type Listener = (reconnecting: boolean) => void;
const listeners = new Set<Listener>();
let retrying = 0;

/** Tells `fn` whenever the page starts or stops retrying calls (to show "reconnecting…"). */
export function onReconnecting(fn: Listener): () => void {
  listeners.add(fn);
  return () => listeners.delete(fn);
}

function setRetrying(delta: number): void {
  const before = retrying > 0;
  retrying += delta;
  if (before !== retrying > 0) listeners.forEach((fn) => fn(retrying > 0));
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => (clearTimeout(timer), resolve()), { once: true });
  });
}

/**
 * Runs `call` with one request id, again with the same id after a transient failure (the
 * server answers a repeat with what the first call did), for up to RETRY.budgetMs. A refusal
 * (a rule, a bad argument) is thrown at once.
 */
export async function withRetry<T>(call: (requestId: string) => Promise<T>, signal?: AbortSignal): Promise<T> {
  const id = requestId();
  const start = Date.now();
  let counted = false;
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        return await call(id);
      } catch (err) {
        if (!isTransient(err) || Date.now() - start > RETRY.budgetMs || signal?.aborted) throw err;
        if (!counted) setRetrying(+1);
        counted = true;
        await sleep(backoffMs(attempt), signal);
      }
    }
  } finally {
    if (counted) setRetrying(-1);
  }
}

// ---- names of other players --------------------------------------------------------------

const NAMES_KEY = "kishpa.names";

/** Remembers the names seen at tables, so the wallet can name who paid whom. */
export function rememberNames(pairs: [string, string][]): void {
  const names = knownNames();
  let changed = false;
  for (const [id, name] of pairs) {
    if (id && name && names[id] !== name) {
      names[id] = name;
      changed = true;
    }
  }
  if (changed) localStorage.setItem(NAMES_KEY, JSON.stringify(names));
}

export function knownNames(): Record<string, string> {
  try {
    return JSON.parse(localStorage.getItem(NAMES_KEY) ?? "{}") as Record<string, string>;
  } catch {
    return {};
  }
}

/** A client seed for the fair shuffle: 16 random bytes in hex, kept per table. */
export function clientSeed(tableKey: string): string {
  const key = `kishpa.seed.${tableKey}`;
  let seed = localStorage.getItem(key);
  if (!seed) {
    seed = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
    localStorage.setItem(key, seed);
  }
  return seed;
}

export function rememberSeed(tableId: string, seed: string): void {
  localStorage.setItem(`kishpa.seed.${tableId}`, seed);
}

export function knownSeed(tableId: string): string | null {
  return localStorage.getItem(`kishpa.seed.${tableId}`);
}
