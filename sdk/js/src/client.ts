/**
 * CitadelClient: one realtime connection (sdk-surface.md §2). It owns a
 * transport, correlates RPCs (bigint ids from 1, timeout per call), routes
 * every other envelope to per-kind handlers, tracks the current room, and
 * offers the room, relay, chat and transform-sync helpers.
 *
 * What it is not: a reconnect loop or token storage (tokens stay with the
 * caller). Call order: connect*() → handshakeGuest()/handshakeToken() →
 * joinOrCreateRoom()/send()/callRpc() … → close(). Every wait has a
 * timeout; closing rejects everything pending with ConnectionClosedError.
 */
import {
  AUTH_STATUS_REJECTED,
  DEFAULT_TIMEOUT_MS,
  KIND_AUTH,
  KIND_AUTH_RESULT,
  KIND_CHAT_EVENT,
  KIND_MATCHMAKER_MATCHED,
  KIND_NOTIFICATION,
  KIND_POSITION,
  KIND_ROOM_CREATE,
  KIND_ROOM_JOIN,
  KIND_ROOM_JOINED,
  KIND_ROOM_LEAVE,
  KIND_ROOM_MAP_READY,
  KIND_ROOM_REJECT,
  KIND_RPC_REQUEST,
  KIND_RPC_RESPONSE,
  RPC_STATUS_OK,
} from "./constants.js";
import { decodeUtf8, encodeUtf8, EMPTY } from "./bytes.js";
import { Envelope } from "./envelope.js";
import {
  CitadelError,
  ConnectionClosedError,
  HandshakeRejectedError,
  MalformedEnvelopeError,
  RpcError,
  RpcTimeoutError,
  TimeoutError,
} from "./errors.js";
import { decodeAuthResult, decodeRpcResponse, encodePosition, encodeRpcRequest } from "./codecs/session.js";
import { decodeRoomId, decodeRoomJoined, decodeRoomReject, encodeRoomCreate, encodeRoomId, type RoomInfo } from "./codecs/rooms.js";
import {
  decodeChatEvent,
  decodeMatchmakerMatched,
  decodeNotification,
  type ChatEvent,
  type MatchmakerMatched,
  type Notification,
} from "./codecs/services.js";
import { parseJson, stringifyJson, type JsonValue } from "./json.js";
import { ChatEventCursor, ChatEventError } from "./chat.js";
import { ActorView, IDENTITY_TRANSFORM, type ActorEvent } from "./actors.js";
import type { ActorTransform } from "./codecs/actors.js";
import type { TsyncHello } from "./codecs/tsync.js";
import {
  WebSocketTransport,
  WebTransportTransport,
  webTransportCertificateHash,
  type CertificateHash,
  type Transport,
  type TransportKind,
  type WebSocketConstructor,
  type WebTransportConstructor,
} from "./transport.js";

export interface ConnectOptions {
  /** WebSocket implementation (Node 20: the `ws` package). Default: globalThis.WebSocket. */
  WebSocket?: WebSocketConstructor;
  /** WebTransport implementation. Default: globalThis.WebTransport. */
  WebTransport?: WebTransportConstructor;
  /** Default wait for connect, handshake, waitForKind and RPC (10 s). */
  timeoutMs?: number;
  /** Called with diagnostic lines (connection events, dropped envelopes). */
  diagnostics?: (line: string) => void;
}

export interface WebTransportOptions extends ConnectOptions {
  serverCertificateHashes?: CertificateHash[];
  serverCertificateHashBase64?: string;
}

export interface AutoEndpoints {
  webTransportUrl?: string;
  webSocketUrl?: string;
  /** HTTP base URL of the node; `GET /v1/webtransport` fills in the URL and hash. */
  httpBaseUrl?: string;
  serverCertificateHashBase64?: string;
}

export interface HandshakeResult {
  /** 0 authenticated, 1 guest, 2 rejected. */
  status: number;
  userId: string | null;
  reasonClass: number | null;
}

export interface HandshakeOptions {
  timeoutMs?: number;
  /** Reject with HandshakeRejectedError instead of resolving status 2. */
  throwOnReject?: boolean;
}

export interface SendOptions {
  /** false: datagram on WebTransport (reliable on WebSocket). Default true. */
  reliable?: boolean;
}

export interface CloseInfo {
  code?: number;
  reason: string;
  error?: Error;
}

export type EnvelopeHandler = (payload: Uint8Array, env: Envelope) => void;

interface PendingRpc {
  method: string;
  resolve(v: Uint8Array): void;
  reject(e: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

/** A room join or create refused by a policy gate (kind 33). */
export class RoomRejectedError extends CitadelError {
  constructor(
    readonly requestKind: number,
    readonly serverReason: string,
  ) {
    super("room_rejected", `room request refused: ${serverReason}`);
    this.name = "RoomRejectedError";
  }
}

function payloadBytes(payload: string | Uint8Array | undefined): Uint8Array {
  if (payload === undefined) return EMPTY;
  return typeof payload === "string" ? encodeUtf8(payload) : payload;
}

function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => {});
  return p;
}

export class CitadelClient {
  /** Resolves once, when the connection closes (never rejects). */
  readonly whenClosed: Promise<CloseInfo>;
  currentRoom: RoomInfo | null = null;
  /** Participant-visible user id after an authenticated handshake. */
  userId: string | null = null;
  private resolveClosed!: (i: CloseInfo) => void;
  private closeInfo: CloseInfo | null = null;
  private readonly handlers = new Map<number, Set<EnvelopeHandler>>();
  private readonly anyHandlers = new Set<(env: Envelope) => void>();
  private readonly waiters = new Set<{ reject(e: Error): void }>();
  private readonly rpcs = new Map<bigint, PendingRpc>();
  private nextRequestId = 1n;
  readonly timeoutMs: number;
  private readonly diag: (line: string) => void;

  private constructor(
    private readonly transport: Transport,
    opts: ConnectOptions,
  ) {
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.diag = opts.diagnostics ?? (() => {});
    this.whenClosed = new Promise((r) => (this.resolveClosed = r));
    transport.setHandlers({
      envelope: (env) => this.dispatch(env),
      closed: (info) => this.onClosed(info),
    });
    this.on(KIND_ROOM_JOINED, (body) => {
      try {
        this.currentRoom = decodeRoomJoined(body);
      } catch {
        this.diag("malformed ROOM_JOINED ignored");
      }
    });
    this.on(KIND_ROOM_LEAVE, (body) => {
      try {
        if (this.currentRoom && decodeRoomId(body) === this.currentRoom.roomId) this.currentRoom = null;
      } catch {
        this.diag("malformed ROOM_LEAVE ignored");
      }
    });
  }

  /** Opens a WebSocket, e.g. `ws://127.0.0.1:7352/`. */
  static async connect(url: string, opts: ConnectOptions = {}): Promise<CitadelClient> {
    const impl = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!impl) throw new CitadelError("no_websocket", "no WebSocket implementation: pass opts.WebSocket (e.g. the ws package)");
    const t = await WebSocketTransport.open(url, impl, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new CitadelClient(t, opts);
  }

  /** Opens WebTransport, e.g. `https://127.0.0.1:7353/citadel`. */
  static async connectWebTransport(url: string, opts: WebTransportOptions = {}): Promise<CitadelClient> {
    const impl = opts.WebTransport ?? (globalThis as { WebTransport?: WebTransportConstructor }).WebTransport;
    if (!impl) throw new CitadelError("no_webtransport", "this runtime has no WebTransport");
    let hashes = opts.serverCertificateHashes;
    if (!hashes && opts.serverCertificateHashBase64) hashes = [webTransportCertificateHash(opts.serverCertificateHashBase64)];
    const t = await WebTransportTransport.open(url, impl, hashes, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new CitadelClient(t, opts);
  }

  /**
   * WebTransport first (URL and hash from `GET /v1/webtransport` when
   * `httpBaseUrl` is given), WebSocket if that fails before the session is
   * ready.
   */
  static async connectAuto(endpoints: AutoEndpoints, opts: WebTransportOptions = {}): Promise<CitadelClient> {
    const diag = opts.diagnostics ?? (() => {});
    let wtUrl = endpoints.webTransportUrl;
    let hashB64 = endpoints.serverCertificateHashBase64 ?? opts.serverCertificateHashBase64;
    const hasWt = !!(opts.WebTransport ?? (globalThis as { WebTransport?: unknown }).WebTransport);
    if (hasWt && !wtUrl && endpoints.httpBaseUrl) {
      try {
        const info = await fetchWebTransportInfo(endpoints.httpBaseUrl);
        wtUrl = info.url;
        hashB64 = hashB64 ?? info.certificateHashBase64 ?? undefined;
      } catch (e) {
        diag(`webtransport info unavailable: ${(e as Error).message}`);
      }
    }
    if (hasWt && wtUrl) {
      try {
        return await CitadelClient.connectWebTransport(wtUrl, { ...opts, serverCertificateHashBase64: hashB64 });
      } catch (e) {
        diag(`webtransport failed, falling back to websocket: ${(e as Error).message}`);
      }
    }
    if (!endpoints.webSocketUrl) throw new ConnectionClosedError("no transport available: WebTransport failed and no webSocketUrl was given");
    return CitadelClient.connect(endpoints.webSocketUrl, opts);
  }

  get transportKind(): TransportKind {
    return this.transport.kind;
  }

  get isOpen(): boolean {
    return this.closeInfo === null;
  }

  /** True once the connection closed (see `whenClosed` and `closeInfo`). */
  get closed(): boolean {
    return this.closeInfo !== null;
  }

  /** Why the connection closed (null while open). */
  get closedInfo(): CloseInfo | null {
    return this.closeInfo;
  }

  /** Bytes sent and received on this connection. */
  get bytesSent(): number {
    return this.transport.bytesSent;
  }
  get bytesReceived(): number {
    return this.transport.bytesReceived;
  }

  // ---- handshake -------------------------------------------------------

  handshakeGuest(opts: HandshakeOptions = {}): Promise<HandshakeResult> {
    return this.handshake("", opts);
  }

  handshakeToken(token: string, opts: HandshakeOptions = {}): Promise<HandshakeResult> {
    if (typeof token !== "string" || token.length === 0) {
      return Promise.reject(new TypeError("handshakeToken needs a non-empty token (use handshakeGuest for a guest)"));
    }
    return this.handshake(token, opts);
  }

  private async handshake(token: string, opts: HandshakeOptions): Promise<HandshakeResult> {
    const wait = this.waitForKind(KIND_AUTH_RESULT, opts.timeoutMs);
    this.send(KIND_AUTH, encodeUtf8(token));
    const body = await wait;
    let r: HandshakeResult;
    try {
      r = decodeAuthResult(body);
    } catch (e) {
      const err = new MalformedEnvelopeError(`AUTH_RESULT: ${(e as Error).message}`);
      this.fail(err);
      throw err;
    }
    if (r.status === AUTH_STATUS_REJECTED && opts.throwOnReject) throw new HandshakeRejectedError(r.reasonClass ?? 0);
    this.userId = r.userId;
    return r;
  }

  // ---- sending and handlers -------------------------------------------

  /** Sends one envelope; `reliable:false` is a datagram on WebTransport. */
  send(kind: number, body: Uint8Array | string = EMPTY, opts: SendOptions = {}): void {
    this.sendEnvelope(new Envelope(kind, payloadBytes(body)), opts);
  }

  sendEnvelope(env: Envelope, opts: SendOptions = {}): void {
    if (this.closeInfo) throw new ConnectionClosedError(`send on a closed connection: ${this.closeInfo.reason}`, this.closeInfo.code, this.closeInfo.reason);
    if (opts.reliable === false && this.transport.hasDatagrams) this.transport.sendUnreliable(env);
    else this.transport.sendReliable(env);
  }

  /** Kind 1 relay of (x, y); unreliable by default. */
  sendPosition(x: number, y: number, opts: SendOptions = { reliable: false }): void {
    this.send(KIND_POSITION, encodePosition(x, y), opts);
  }

  /** Per-kind handler `(payload, env)`; returns an unsubscribe function. */
  on(kind: number, handler: EnvelopeHandler): () => void {
    let set = this.handlers.get(kind);
    if (!set) this.handlers.set(kind, (set = new Set()));
    set.add(handler);
    return () => this.off(kind, handler);
  }

  off(kind: number, handler: EnvelopeHandler): void {
    this.handlers.get(kind)?.delete(handler);
  }

  /** Every inbound envelope except correlated RPC responses. */
  onAny(handler: (env: Envelope) => void): () => void {
    this.anyHandlers.add(handler);
    return () => this.anyHandlers.delete(handler);
  }

  /** Resolves with the body of the next envelope of `kind`. */
  waitForKind(kind: number, timeoutMs = this.timeoutMs): Promise<Uint8Array> {
    return quiet(
      new Promise<Uint8Array>((resolve, reject) => {
        if (this.closeInfo) {
          reject(this.closedError());
          return;
        }
        const waiter = { reject: (e: Error) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError(`wait for kind ${kind}`, timeoutMs)), timeoutMs);
        const off = this.on(kind, (body) => done(null, body));
        const done = (e: Error | null, body?: Uint8Array): void => {
          clearTimeout(timer);
          off();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(body!);
        };
        this.waiters.add(waiter);
      }),
    );
  }

  private dispatch(env: Envelope): void {
    if (env.kind === KIND_RPC_RESPONSE) {
      let res;
      try {
        res = decodeRpcResponse(env.body);
      } catch {
        this.fail(new MalformedEnvelopeError("RPC_RESPONSE shorter than 9 bytes"));
        return;
      }
      const pending = this.rpcs.get(res.requestId);
      if (pending) {
        this.rpcs.delete(res.requestId);
        clearTimeout(pending.timer);
        if (res.status === RPC_STATUS_OK) pending.resolve(res.payload);
        else pending.reject(new RpcError(res.requestId, decodeUtf8Lossy(res.payload)));
        return;
      }
    }
    for (const h of [...(this.handlers.get(env.kind) ?? [])]) {
      try {
        h(env.body, env);
      } catch (e) {
        this.diag(`handler for kind ${env.kind} threw: ${(e as Error).message}`);
      }
    }
    for (const h of [...this.anyHandlers]) {
      try {
        h(env);
      } catch (e) {
        this.diag(`onAny handler threw: ${(e as Error).message}`);
      }
    }
  }

  // ---- RPC -------------------------------------------------------------

  /** Correlated RPC; rejects with RpcError, RpcTimeoutError or ConnectionClosedError. */
  callRpc(method: string, payload?: string | Uint8Array, opts: { timeoutMs?: number } = {}): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      if (this.closeInfo) {
        reject(this.closedError());
        return;
      }
      const id = this.nextRequestId++;
      const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
      const timer = setTimeout(() => {
        this.rpcs.delete(id);
        reject(new RpcTimeoutError(method, id, timeoutMs));
      }, timeoutMs);
      this.rpcs.set(id, { method, resolve, reject, timer });
      try {
        this.send(KIND_RPC_REQUEST, encodeRpcRequest(id, method, payloadBytes(payload)));
      } catch (e) {
        clearTimeout(timer);
        this.rpcs.delete(id);
        reject(e);
      }
    });
  }

  /** callRpc with a JSON request and a strictly parsed JSON reply (built-in services). */
  async callRpcJson<T = JsonValue>(method: string, request: unknown, opts: { timeoutMs?: number } = {}): Promise<T> {
    const reply = await this.callRpc(method, stringifyJson(request ?? {}), opts);
    try {
      return parseJson(decodeUtf8(reply)) as T;
    } catch (e) {
      throw new MalformedEnvelopeError(`${method} reply is not JSON: ${(e as Error).message}`);
    }
  }

  // ---- rooms -------------------------------------------------------------

  /** Kind 21 with the room name; resolves on ROOM_JOINED, rejects on ROOM_REJECT or timeout. */
  joinOrCreateRoom(name: string, opts: { timeoutMs?: number } = {}): Promise<RoomInfo> {
    return this.roomRequest(KIND_ROOM_CREATE, encodeRoomCreate(name), opts.timeoutMs);
  }

  /** Kind 22. */
  joinRoom(roomId: bigint | number, opts: { timeoutMs?: number } = {}): Promise<RoomInfo> {
    return this.roomRequest(KIND_ROOM_JOIN, encodeRoomId(roomId), opts.timeoutMs);
  }

  /** Kind 24. */
  leaveRoom(roomId: bigint | number): void {
    this.send(KIND_ROOM_LEAVE, encodeRoomId(roomId));
    if (this.currentRoom && this.currentRoom.roomId === BigInt(roomId)) this.currentRoom = null;
  }

  /** Kind 25. */
  sendMapReady(roomId: bigint | number): void {
    this.send(KIND_ROOM_MAP_READY, encodeRoomId(roomId));
  }

  onRoomJoined(handler: (room: RoomInfo) => void): () => void {
    return this.on(KIND_ROOM_JOINED, (body) => {
      let room: RoomInfo;
      try {
        room = decodeRoomJoined(body);
      } catch {
        return;
      }
      handler(room);
    });
  }

  onRoomLeft(handler: (roomId: bigint) => void): () => void {
    return this.on(KIND_ROOM_LEAVE, (body) => {
      let id: bigint;
      try {
        id = decodeRoomId(body);
      } catch {
        return;
      }
      handler(id);
    });
  }

  private roomRequest(kind: number, body: Uint8Array, timeoutMs = this.timeoutMs): Promise<RoomInfo> {
    return quiet(
      new Promise<RoomInfo>((resolve, reject) => {
        if (this.closeInfo) {
          reject(this.closedError());
          return;
        }
        const waiter = { reject: (e: Error) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError("room request", timeoutMs)), timeoutMs);
        const offJoined = this.onRoomJoined((room) => done(null, room));
        const offReject = this.on(KIND_ROOM_REJECT, (b) => {
          try {
            const r = decodeRoomReject(b);
            done(new RoomRejectedError(r.requestKind, r.reason));
          } catch {
            /* malformed reject: keep waiting */
          }
        });
        const done = (e: Error | null, room?: RoomInfo): void => {
          clearTimeout(timer);
          offJoined();
          offReject();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(room!);
        };
        this.waiters.add(waiter);
        try {
          this.send(kind, body);
        } catch (e) {
          done(e as Error);
        }
      }),
    );
  }

  // ---- transform sync and actors (docs/actors-and-sync.md) -------------

  /** The actor view once transform sync is enabled. */
  actorView: ActorView | null = null;
  private readonly actorListeners = new Set<(e: ActorEvent) => void>();

  /**
   * Opts in (kind 7) and resolves with the negotiated codec. From then on
   * spawns, despawns, roles and snapshots feed `actorView`, and each applied
   * snapshot is acknowledged (kind 10, unreliable where possible).
   */
  async enableTransformSync(opts: { timeoutMs?: number } = {}): Promise<TsyncHello> {
    if (!this.actorView) {
      const view = new ActorView();
      this.actorView = view;
      this.onAny((env) => {
        const events = view.handleEnvelope(env);
        const ack = view.pollAck();
        if (ack && this.isOpen) {
          try {
            this.sendEnvelope(ack, { reliable: false });
          } catch {
            /* closing */
          }
        }
        for (const e of events) for (const l of [...this.actorListeners]) l(e);
      });
    }
    const wait = this.waitForKind(7, opts.timeoutMs);
    this.sendEnvelope(ActorView.helloEnvelope());
    await wait;
    return this.actorView.hello!;
  }

  /** Actor events (negotiated, spawned, despawned, role, snapshot). */
  onActorEvent(handler: (e: ActorEvent) => void): () => void {
    this.actorListeners.add(handler);
    return () => this.actorListeners.delete(handler);
  }

  /** Announces this client's avatar (kind 16); resolves with its object id. */
  announceActor(archetypeId: number, transform: ActorTransform = IDENTITY_TRANSFORM, opts: { timeoutMs?: number } = {}): Promise<number> {
    const view = this.actorView;
    if (!view) return Promise.reject(new CitadelError("transform_sync_off", "call enableTransformSync() first"));
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    return quiet(
      new Promise<number>((resolve, reject) => {
        const waiter = { reject: (e: Error) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError("actor announcement", timeoutMs)), timeoutMs);
        const off = this.onActorEvent((e) => {
          if (e.type === "spawned" && e.actor.isLocal) done(null, e.actor.objectId);
        });
        const done = (e: Error | null, id?: number): void => {
          clearTimeout(timer);
          off();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(id!);
        };
        this.waiters.add(waiter);
        try {
          this.sendEnvelope(view.announce(archetypeId, transform));
        } catch (e) {
          done(e as Error);
        }
      }),
    );
  }

  /** Reports the local actor's transform (kind 20, unreliable where possible). */
  sendActorState(transform: ActorTransform): void {
    const id = this.actorView?.localObject;
    if (id === null || id === undefined) throw new CitadelError("no_local_actor", "announceActor() has not completed");
    this.sendEnvelope(ActorView.stateEnvelope(id, transform), { reliable: false });
  }

  // ---- notifications and matchmaker (services.md §3, §4) ------------------

  /** Live kind-27 notifications (deduplicate by `id`: delivery is at least once). */
  onNotification(handler: (n: Notification) => void): () => void {
    return this.on(KIND_NOTIFICATION, (body) => {
      try {
        handler(decodeNotification(body));
      } catch {
        this.diag("malformed NOTIFICATION ignored");
      }
    });
  }
  /** `notifications.list`: newest first; `limit` 1-100 (server default 50). */
  listNotifications(opts: { limit?: number; cursor?: string } = {}): Promise<JsonValue> {
    return this.callRpcJson("notifications.list", opts);
  }
  /** `notifications.mark_read`: returns `{read_ids}` (only ids that changed). */
  markNotificationsRead(ids: string[]): Promise<JsonValue> {
    return this.callRpcJson("notifications.mark_read", { ids });
  }
  /** Kind-26 match handoffs. */
  onMatchmakerMatched(handler: (m: MatchmakerMatched) => void): () => void {
    return this.on(KIND_MATCHMAKER_MATCHED, (body) => {
      try {
        handler(decodeMatchmakerMatched(body));
      } catch {
        this.diag("malformed MATCHMAKER_MATCHED ignored");
      }
    });
  }
  addMatchmakerTicket(request: Record<string, unknown>): Promise<JsonValue> {
    return this.callRpcJson("matchmaker.add", request);
  }
  cancelMatchmakerTicket(ticketId: string): Promise<JsonValue> {
    return this.callRpcJson("matchmaker.cancel", { ticket_id: ticketId });
  }
  getMatchmakerStatus(ticketId: string): Promise<JsonValue> {
    return this.callRpcJson("matchmaker.status", { ticket_id: ticketId });
  }
  acceptMatch(ticketId: string, joinToken: string): Promise<JsonValue> {
    return this.callRpcJson("matchmaker.accept", { ticket_id: ticketId, join_token: joinToken });
  }

  // ---- chat (services.md §5) --------------------------------------------

  /** Decoded kind-28 events; malformed ones are ignored. */
  onChatEvent(handler: (event: ChatEvent) => void): () => void {
    return this.on(KIND_CHAT_EVENT, (body) => {
      const ev = decodeChatEvent(body);
      if (ev) handler(ev);
      else this.diag("malformed CHAT_EVENT ignored");
    });
  }

  joinChat(target: { kind: "direct"; other_user_id: string } | { kind: "group"; group_id: number | bigint } | { kind: "room" }): Promise<JsonValue> {
    return this.callRpcJson("chat.join", { target });
  }
  leaveChat(channelId: string): Promise<JsonValue> {
    return this.callRpcJson("chat.leave", { channel_id: channelId });
  }
  sendChatMessage(channelId: string, content: string): Promise<JsonValue> {
    return this.callRpcJson("chat.send", { channel_id: channelId, content });
  }
  getChatHistory(channelId: string, opts: { limit?: number; beforeMessageId?: number | bigint } = {}): Promise<JsonValue> {
    if (opts.limit !== undefined && (opts.limit < 1 || opts.limit > 200)) return Promise.reject(new RangeError("limit must be 1..200"));
    const req: Record<string, unknown> = { channel_id: channelId };
    if (opts.limit !== undefined) req.limit = opts.limit;
    if (opts.beforeMessageId !== undefined) req.before_message_id = opts.beforeMessageId;
    return this.callRpcJson("chat.history", req);
  }
  editChatMessage(channelId: string, messageId: number | bigint, content: string): Promise<JsonValue> {
    return this.callRpcJson("chat.edit", { channel_id: channelId, message_id: messageId, content });
  }
  deleteChatMessage(channelId: string, messageId: number | bigint): Promise<JsonValue> {
    return this.callRpcJson("chat.delete", { channel_id: channelId, message_id: messageId });
  }
  moderateChatMessage(channelId: string, messageId: number | bigint): Promise<JsonValue> {
    return this.callRpcJson("chat.moderate", { channel_id: channelId, message_id: messageId });
  }
  setChatTyping(channelId: string, typing: boolean): Promise<JsonValue> {
    return this.callRpcJson("chat.typing", { channel_id: channelId, typing });
  }

  /** chat.join after a reconnect; the cursor decides whether a reconcile is needed. */
  async rejoinChat(target: Parameters<CitadelClient["joinChat"]>[0], cursor: ChatEventCursor): Promise<JsonValue> {
    const join = (await this.joinChat(target)) as { channel_id: string; watermark_event_id: number | bigint };
    cursor.rejoined(join);
    return join as unknown as JsonValue;
  }

  /**
   * Pages history newest first, hands one atomic snapshot to `applyHistory`,
   * then sends the private watermark acknowledgement. A malformed
   * continuation restarts from the newest page; at most `maxAttempts` (10).
   */
  async reconcileChat(
    cursor: ChatEventCursor,
    applyHistory: (items: JsonValue[], watermarkEventId: number | bigint) => void | Promise<void>,
    opts: { pageLimit?: number; maxPages?: number; maxAttempts?: number } = {},
  ): Promise<void> {
    const limit = opts.pageLimit ?? 200;
    const maxPages = opts.maxPages ?? 10;
    const attempts = Math.min(opts.maxAttempts ?? 10, 10);
    for (let attempt = 0; attempt < attempts; attempt++) {
      const items: JsonValue[] = [];
      let watermark: number | bigint | null = null;
      let before: bigint | undefined;
      let ok = true;
      for (let page = 0; page < maxPages; page++) {
        const res = (await this.getChatHistory(cursor.channelId, { limit, beforeMessageId: before })) as {
          items?: { id?: number | bigint }[];
          watermark_event_id?: number | bigint;
        };
        if (!Array.isArray(res?.items) || (typeof res.watermark_event_id !== "number" && typeof res.watermark_event_id !== "bigint")) {
          ok = false;
          break;
        }
        if (watermark === null) watermark = res.watermark_event_id;
        for (const it of res.items) {
          const id = it?.id;
          if ((typeof id !== "number" && typeof id !== "bigint") || (before !== undefined && BigInt(id) >= before)) {
            ok = false;
            break;
          }
          before = BigInt(id);
          items.push(it as JsonValue);
        }
        if (!ok || res.items.length < limit) break;
      }
      if (!ok || watermark === null) continue;
      await applyHistory(items, watermark);
      cursor.historyApplied(watermark);
      if (cursor.state !== "ack_required") continue;
      await this.callRpcJson("chat.history", { channel_id: cursor.channelId, limit: 1, acknowledge_watermark: watermark });
      cursor.acknowledged(watermark);
      return;
    }
    throw new ChatEventError(`chat reconcile of ${cursor.channelId} did not converge`);
  }

  // ---- closing -------------------------------------------------------------

  close(code?: number, reason?: string): void {
    this.transport.close(code, reason);
  }

  private fail(error: Error): void {
    this.diag(`closing: ${error.message}`);
    this.onClosed({ code: 1002, reason: error.message, error });
    this.transport.close(1002, "malformed envelope");
  }

  private closedError(): Error {
    const info = this.closeInfo!;
    if (info.error instanceof MalformedEnvelopeError) return info.error;
    return new ConnectionClosedError(`connection closed: ${info.reason}`, info.code, info.reason);
  }

  private onClosed(info: CloseInfo): void {
    if (this.closeInfo) return;
    this.closeInfo = info;
    this.diag(`closed (${info.code ?? "-"}): ${info.reason}`);
    const err = this.closedError();
    for (const [, p] of this.rpcs) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.rpcs.clear();
    for (const w of [...this.waiters]) w.reject(err);
    this.resolveClosed(info);
  }
}

function decodeUtf8Lossy(b: Uint8Array): string {
  return new TextDecoder().decode(b);
}

export interface WebTransportInfo {
  url: string;
  certificateHashHex: string | null;
  certificateHashBase64: string | null;
  developmentCertificate: boolean;
}

/** `GET /v1/webtransport` of a node. */
export async function fetchWebTransportInfo(httpBaseUrl: string, fetchImpl: typeof fetch = fetch): Promise<WebTransportInfo> {
  const res = await fetchImpl(new URL("/v1/webtransport", httpBaseUrl).toString());
  if (!res.ok) throw new CitadelError("webtransport_unavailable", `GET /v1/webtransport answered ${res.status}`);
  const body = (await res.json()) as {
    url: string;
    certificate_hash?: { value?: string; base64?: string };
    development_certificate?: boolean;
  };
  const hex = body.certificate_hash?.value ?? null;
  let b64 = body.certificate_hash?.base64 ?? null;
  if (!b64 && hex) {
    let bin = "";
    for (let i = 0; i < hex.length; i += 2) bin += String.fromCharCode(parseInt(hex.slice(i, i + 2), 16));
    b64 = btoa(bin);
  }
  return { url: body.url, certificateHashHex: hex, certificateHashBase64: b64, developmentCertificate: !!body.development_certificate };
}
