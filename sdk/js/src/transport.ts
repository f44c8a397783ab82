/**
 * Transports under CitadelClient: WebSocket (framed envelopes in binary
 * messages; browsers and Node with an injectable implementation) and
 * WebTransport (browsers: reliable frames on one client-opened bidirectional
 * stream, server batches on server-opened unidirectional streams read in
 * arrival order, unreliable envelopes as datagrams). What it is not:
 * protocol logic — a transport only moves envelopes and reports closure.
 * Call order: open*() → set handlers → send*() … → close().
 */
import { Envelope, FrameDecoder, decodeDatagram } from "./envelope.js";
import { ConnectionClosedError, MalformedEnvelopeError, TimeoutError } from "./errors.js";

export type TransportKind = "websocket" | "webtransport";

export interface TransportHandlers {
  envelope(env: Envelope, path: "reliable" | "datagram"): void;
  /** Called once. `error` is set for a malformed frame or a transport failure. */
  closed(info: { code?: number; reason: string; error?: Error }): void;
}

export interface Transport {
  readonly kind: TransportKind;
  /** Whether unreliable sends become datagrams. */
  readonly hasDatagrams: boolean;
  setHandlers(h: TransportHandlers): void;
  sendReliable(env: Envelope): void;
  sendUnreliable(env: Envelope): void;
  close(code?: number, reason?: string): void;
  /** Bytes sent and received so far (payload bytes, framing included). */
  readonly bytesSent: number;
  readonly bytesReceived: number;
}

/** The WebSocket surface the SDK uses (browser WebSocket, Node 22, `ws`). */
export interface WebSocketLike {
  binaryType: string;
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number, reason?: string): void;
}

export type WebSocketConstructor = new (url: string) => WebSocketLike;

class BaseTransport {
  protected handlers: TransportHandlers | null = null;
  private pending: Array<() => void> = [];
  private done = false;
  bytesSent = 0;
  bytesReceived = 0;
  setHandlers(h: TransportHandlers): void {
    this.handlers = h;
    for (const p of this.pending.splice(0)) p();
  }
  protected emit(env: Envelope, path: "reliable" | "datagram"): void {
    if (this.done) return;
    if (this.handlers) this.handlers.envelope(env, path);
    else this.pending.push(() => this.handlers!.envelope(env, path));
  }
  protected finish(info: { code?: number; reason: string; error?: Error }): void {
    if (this.done) return;
    this.done = true;
    if (this.handlers) this.handlers.closed(info);
    else this.pending.push(() => this.handlers!.closed(info));
  }
  protected get finished(): boolean {
    return this.done;
  }
}

function toBytes(data: unknown): Uint8Array | null {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}

export class WebSocketTransport extends BaseTransport implements Transport {
  readonly kind = "websocket" as const;
  readonly hasDatagrams = false;
  private readonly decoder = new FrameDecoder();
  private constructor(private readonly ws: WebSocketLike) {
    super();
  }

  /** Opens `url`; rejects with ConnectionClosedError or TimeoutError. */
  static open(url: string, impl: WebSocketConstructor, timeoutMs: number): Promise<WebSocketTransport> {
    return new Promise((resolve, reject) => {
      let ws: WebSocketLike;
      try {
        ws = new impl(url);
      } catch (e) {
        reject(new ConnectionClosedError(`cannot open ${url}: ${(e as Error).message}`));
        return;
      }
      ws.binaryType = "arraybuffer";
      const timer = setTimeout(() => {
        ws.onopen = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
          /* already closing */
        }
        reject(new TimeoutError(`connect to ${url}`, timeoutMs));
      }, timeoutMs);
      ws.onerror = () => {};
      ws.onclose = (ev) => {
        clearTimeout(timer);
        reject(new ConnectionClosedError(`connection to ${url} failed`, ev.code, ev.reason ?? ""));
      };
      ws.onopen = () => {
        clearTimeout(timer);
        const t = new WebSocketTransport(ws);
        ws.onmessage = (ev) => t.onMessage(ev.data);
        ws.onclose = (ev) => t.finish({ code: ev.code, reason: ev.reason ?? "" });
        ws.onerror = () => {};
        resolve(t);
      };
    });
  }

  private onMessage(data: unknown): void {
    const bytes = toBytes(data);
    if (!bytes) {
      this.fail(new MalformedEnvelopeError("text message on the realtime socket"));
      return;
    }
    this.bytesReceived += bytes.length;
    let envs: Envelope[];
    try {
      envs = this.decoder.push(bytes);
    } catch (e) {
      this.fail(e as Error);
      return;
    }
    for (const env of envs) this.emit(env, "reliable");
  }

  private fail(error: Error): void {
    this.finish({ code: 1002, reason: error.message, error });
    try {
      this.ws.close(1002, "malformed frame");
    } catch {
      /* closing anyway */
    }
  }

  sendReliable(env: Envelope): void {
    if (this.finished || this.ws.readyState !== 1) throw new ConnectionClosedError("send on a closed connection");
    const frame = env.encodeFrame();
    this.bytesSent += frame.length;
    this.ws.send(frame);
  }

  sendUnreliable(env: Envelope): void {
    this.sendReliable(env);
  }

  close(code = 1000, reason = ""): void {
    try {
      this.ws.close(code, reason);
    } catch {
      /* already closed */
    }
    this.finish({ code, reason: reason || "closed by the client" });
  }
}

/** Minimal typing of the browser WebTransport API the SDK uses. */
interface WebTransportLike {
  ready: Promise<void>;
  closed: Promise<{ closeCode?: number; reason?: string }>;
  datagrams: { readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> };
  incomingUnidirectionalStreams: ReadableStream<ReadableStream<Uint8Array>>;
  createBidirectionalStream(): Promise<{ readable: ReadableStream<Uint8Array>; writable: WritableStream<Uint8Array> }>;
  close(info?: { closeCode?: number; reason?: string }): void;
}

export type WebTransportConstructor = new (url: string, options?: unknown) => WebTransportLike;

export interface CertificateHash {
  algorithm: "sha-256";
  value: Uint8Array;
}

export class WebTransportTransport extends BaseTransport implements Transport {
  readonly kind = "webtransport" as const;
  readonly hasDatagrams = true;
  private constructor(
    private readonly wt: WebTransportLike,
    private readonly reliable: WritableStreamDefaultWriter<Uint8Array>,
    private readonly datagrams: WritableStreamDefaultWriter<Uint8Array>,
  ) {
    super();
  }

  static async open(
    url: string,
    impl: WebTransportConstructor,
    hashes: CertificateHash[] | undefined,
    timeoutMs: number,
  ): Promise<WebTransportTransport> {
    let wt: WebTransportLike;
    try {
      wt = new impl(url, hashes && hashes.length ? { serverCertificateHashes: hashes } : undefined);
    } catch (e) {
      throw new ConnectionClosedError(`cannot open ${url}: ${(e as Error).message}`);
    }
    wt.closed.catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`connect to ${url}`, timeoutMs)), timeoutMs);
    });
    try {
      await Promise.race([wt.ready, timeout]);
      const bidi = await Promise.race([wt.createBidirectionalStream(), timeout]);
      const t = new WebTransportTransport(wt, bidi.writable.getWriter(), wt.datagrams.writable.getWriter());
      t.pump();
      return t;
    } catch (e) {
      try {
        wt.close();
      } catch {
        /* not open */
      }
      if (e instanceof TimeoutError) throw e;
      throw new ConnectionClosedError(`WebTransport session to ${url} failed: ${(e as Error)?.message ?? e}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private pump(): void {
    void this.readStreams();
    void this.readDatagrams();
    this.wt.closed.then(
      (info) => this.finish({ code: info?.closeCode, reason: info?.reason ?? "session closed" }),
      (e) => this.finish({ reason: `session failed: ${(e as Error)?.message ?? e}` }),
    );
  }

  private async readStreams(): Promise<void> {
    const streams = this.wt.incomingUnidirectionalStreams.getReader();
    try {
      for (;;) {
        const { value: stream, done } = await streams.read();
        if (done || !stream) return;
        const reader = stream.getReader();
        const decoder = new FrameDecoder();
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) break;
          this.bytesReceived += value.length;
          for (const env of decoder.push(value)) this.emit(env, "reliable");
        }
        if (decoder.buffered) throw new MalformedEnvelopeError("stream ended inside a frame");
      }
    } catch (e) {
      if (e instanceof MalformedEnvelopeError) {
        this.finish({ reason: e.message, error: e });
        this.close(1002, "malformed frame");
      }
    }
  }

  private async readDatagrams(): Promise<void> {
    const reader = this.wt.datagrams.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        this.bytesReceived += value.length;
        let env: Envelope;
        try {
          env = decodeDatagram(value);
        } catch {
          continue; // a short datagram is dropped, never fatal
        }
        this.emit(env, "datagram");
      }
    } catch {
      /* session closed */
    }
  }

  sendReliable(env: Envelope): void {
    if (this.finished) throw new ConnectionClosedError("send on a closed connection");
    const frame = env.encodeFrame();
    this.bytesSent += frame.length;
    // The writer queues chunks in order; awaiting each write would add the
    // peer's acknowledgement delay to every frame.
    this.reliable.write(frame).catch(() => {});
  }

  sendUnreliable(env: Envelope): void {
    if (this.finished) throw new ConnectionClosedError("send on a closed connection");
    const dg = env.encodeDatagram();
    this.bytesSent += dg.length;
    this.datagrams.write(dg).catch(() => {});
  }

  close(code = 0, reason = ""): void {
    try {
      this.wt.close({ closeCode: code, reason });
    } catch {
      /* already closed */
    }
    this.finish({ code, reason: reason || "closed by the client" });
  }
}

/** Decodes a base64 SHA-256 certificate hash for `serverCertificateHashes`. */
export function webTransportCertificateHash(base64: string): CertificateHash {
  const bin = atob(base64);
  const value = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) value[i] = bin.charCodeAt(i);
  if (value.length !== 32) throw new RangeError("a SHA-256 certificate hash is 32 bytes");
  return { algorithm: "sha-256", value };
}
