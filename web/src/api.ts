// The services through the edge: one gRPC-Web transport (binary) to the page's own origin,
// the player's token added to every call, and the session kept in localStorage.
import { createClient, type Client, type Interceptor } from "@connectrpc/connect";
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

const transport = createGrpcWebTransport({
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
