/**
 * CitadelHttpClient: the auth, session and profile routes (services.md §2).
 * Holds no credentials: every call takes the token it needs. Non-2xx
 * answers become HttpApiError with the server's `code` (or a client-side
 * code: `network_error`, `invalid_response`). What it is not: a token store
 * or a retry loop.
 */
import { HttpApiError } from "./errors.js";
import { parseJson, stringifyJson, type JsonValue } from "./json.js";

export interface SessionTokenPair {
  token: string;
  refresh_token?: string;
  user_id: string;
  username: string;
  created: boolean;
}

export interface PublicProfile {
  user_id: string;
  username: string;
  display_name?: string | null;
}

export interface EmailAuthenticationRequest {
  email: string;
  password: string;
  create?: boolean;
  username?: string;
  display_name?: string;
  metadata?: Record<string, unknown>;
}

export interface IdAuthenticationRequest {
  id: string;
  create?: boolean;
  username?: string;
  display_name?: string;
  metadata?: Record<string, unknown>;
}

export interface UpdateAccountRequest {
  username?: string;
  /** null clears the display name. */
  display_name?: string | null;
}

export interface LookupUsersRequest {
  user_ids?: string[];
  usernames?: string[];
}

export interface HttpClientOptions {
  fetch?: typeof fetch;
}

/** Maps a response to its JSON body or an HttpApiError (exported for tests). */
export async function mapHttpResponse(res: Response): Promise<JsonValue | null> {
  const text = await res.text().catch(() => "");
  if (res.ok) {
    if (res.status === 204 || text === "") return null;
    try {
      return parseJson(text);
    } catch {
      throw new HttpApiError(res.status, "invalid_response", "the server answered with a body that is not JSON");
    }
  }
  let code = "http_error";
  let message = `HTTP ${res.status}`;
  try {
    const body = parseJson(text) as { code?: unknown; message?: unknown };
    if (body && typeof body === "object" && typeof body.code === "string") {
      code = body.code;
      if (typeof body.message === "string") message = body.message;
    }
  } catch {
    /* a non-JSON error body keeps the generic code */
  }
  const retry = res.headers.get("retry-after");
  const retryAfter = retry !== null && /^[0-9]+$/.test(retry) ? Number(retry) : undefined;
  throw new HttpApiError(res.status, code, message, retryAfter);
}

export class CitadelHttpClient {
  private readonly fetchImpl: typeof fetch;
  constructor(
    readonly baseUrl: string,
    opts: HttpClientOptions = {},
  ) {
    const f = opts.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (!f) throw new TypeError("no fetch implementation: pass opts.fetch");
    this.fetchImpl = f.bind(globalThis);
  }

  private async request(method: string, path: string, opts: { token?: string; body?: unknown } = {}): Promise<JsonValue | null> {
    const headers: Record<string, string> = {};
    if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    try {
      res = await this.fetchImpl(new URL(path, this.baseUrl).toString(), {
        method,
        headers,
        body: opts.body === undefined ? undefined : stringifyJson(opts.body),
      });
    } catch (e) {
      throw new HttpApiError(0, "network_error", `request failed: ${(e as Error).message}`);
    }
    return mapHttpResponse(res);
  }

  authenticateEmail(req: EmailAuthenticationRequest): Promise<SessionTokenPair> {
    return this.request("POST", "/v1/auth/email", { body: req }) as Promise<unknown> as Promise<SessionTokenPair>;
  }
  authenticateDevice(req: IdAuthenticationRequest): Promise<SessionTokenPair> {
    return this.request("POST", "/v1/auth/device", { body: req }) as Promise<unknown> as Promise<SessionTokenPair>;
  }
  authenticateCustom(req: IdAuthenticationRequest): Promise<SessionTokenPair> {
    return this.request("POST", "/v1/auth/custom", { body: req }) as Promise<unknown> as Promise<SessionTokenPair>;
  }
  getAccount(token: string): Promise<PublicProfile> {
    return this.request("GET", "/v1/account", { token }) as Promise<unknown> as Promise<PublicProfile>;
  }
  updateAccount(token: string, patch: UpdateAccountRequest): Promise<PublicProfile> {
    return this.request("PATCH", "/v1/account", { token, body: patch }) as Promise<unknown> as Promise<PublicProfile>;
  }
  lookupUsers(token: string, query: LookupUsersRequest): Promise<{ users: PublicProfile[] }> {
    return this.request("POST", "/v1/users/lookup", { token, body: query }) as Promise<unknown> as Promise<{ users: PublicProfile[] }>;
  }
  refreshSession(refreshToken: string): Promise<SessionTokenPair> {
    return this.request("POST", "/v1/session/refresh", { body: { refresh_token: refreshToken } }) as Promise<unknown> as Promise<SessionTokenPair>;
  }
  /** Idempotent: resolves for every 204. */
  async logoutSession(tokens: { accessToken?: string; refreshToken?: string }): Promise<void> {
    const body = tokens.refreshToken !== undefined ? { refresh_token: tokens.refreshToken } : {};
    await this.request("POST", "/v1/session/logout", { token: tokens.accessToken, body });
  }
}
