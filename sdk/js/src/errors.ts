/**
 * Error types of the SDK. What it is: one class per failure a caller must be
 * able to tell apart (wire decode, closed connection, rejected handshake,
 * timeout, RPC error, HTTP error). What it is not: logging or retry policy.
 * Every error carries a stable `code` string documented in README.md.
 */

/** Why a body failed to decode (the shared vectors' error codes). */
export type WireErrorCode =
  | "truncated"
  | "trailing"
  | "padding"
  | "utf8"
  | "count"
  | "value"
  | "varint"
  | "schema"
  | "json";

/** Base class: every SDK error has a stable `code`. */
export class CitadelError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "CitadelError";
    this.code = code;
  }
}

/** A body that does not follow the wire layout. */
export class WireError extends CitadelError {
  override readonly code: WireErrorCode;
  constructor(code: WireErrorCode, message: string) {
    super(code, `${code}: ${message}`);
    this.name = "WireError";
    this.code = code;
  }
}

/** The server sent a frame that cannot be decoded; the connection is closed. */
export class MalformedEnvelopeError extends CitadelError {
  constructor(message: string) {
    super("malformed_envelope", message);
    this.name = "MalformedEnvelopeError";
  }
}

/** The connection closed (or never opened); pending calls reject with this. */
export class ConnectionClosedError extends CitadelError {
  readonly closeCode: number | undefined;
  readonly reason: string;
  constructor(message: string, closeCode?: number, reason = "") {
    super("connection_closed", message);
    this.name = "ConnectionClosedError";
    this.closeCode = closeCode;
    this.reason = reason;
  }
}

/** The server answered KIND_AUTH with status Rejected. */
export class HandshakeRejectedError extends CitadelError {
  readonly reasonClass: number;
  constructor(reasonClass: number) {
    const what = ["auth failed", "auth required", "protocol"][reasonClass] ?? "unknown reason";
    super("handshake_rejected", `handshake rejected: ${what} (reason ${reasonClass})`);
    this.name = "HandshakeRejectedError";
    this.reasonClass = reasonClass;
  }
}

/** Nothing arrived in time (connect, handshake, waitForKind, RPC). */
export class TimeoutError extends CitadelError {
  readonly timeoutMs: number;
  constructor(what: string, timeoutMs: number) {
    super("timeout", `${what} timed out after ${timeoutMs} ms`);
    this.name = "TimeoutError";
    this.timeoutMs = timeoutMs;
  }
}

/** An RPC that got no response in time (a TimeoutError with the request id). */
export class RpcTimeoutError extends TimeoutError {
  readonly requestId: bigint;
  readonly method: string;
  constructor(method: string, requestId: bigint, timeoutMs: number) {
    super(`rpc ${method}`, timeoutMs);
    this.name = "RpcTimeoutError";
    (this as { code: string }).code = "rpc_timeout";
    this.requestId = requestId;
    this.method = method;
  }
}

/** The server answered an RPC with status ERROR. */
export class RpcError extends CitadelError {
  readonly requestId: bigint;
  readonly serverMessage: string;
  constructor(requestId: bigint, serverMessage: string) {
    super("rpc_error", `rpc ${requestId} failed: ${serverMessage}`);
    this.name = "RpcError";
    this.requestId = requestId;
    this.serverMessage = serverMessage;
  }
}

/** An HTTP route answered with an error status; `code` is the server's code. */
export class HttpApiError extends CitadelError {
  readonly status: number;
  readonly retryAfterSeconds: number | undefined;
  constructor(status: number, code: string, message: string, retryAfterSeconds?: number) {
    super(code, message);
    this.name = "HttpApiError";
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}
