/**
 * Session kinds 1-6 (realtime-wire.md §4): position relay, RPC request and
 * response, handshake. Decoders throw WireError; encoders never produce a
 * body their decoder rejects.
 */
import { ByteReader, ByteWriter, decodeUtf8, encodeUtf8 } from "../bytes.js";
import { WireError } from "../errors.js";

export interface Position {
  x: number;
  y: number;
}

/** Kind 1: `x f32 LE` ‖ `y f32 LE`, exactly 8 bytes. */
export function encodePosition(x: number, y: number): Uint8Array {
  const out = new Uint8Array(8);
  const v = new DataView(out.buffer);
  v.setFloat32(0, x, true);
  v.setFloat32(4, y, true);
  return out;
}

export function decodePosition(body: Uint8Array): Position {
  if (body.length < 8) throw new WireError("truncated", "POSITION needs 8 bytes");
  if (body.length > 8) throw new WireError("trailing", "POSITION needs exactly 8 bytes");
  const v = new DataView(body.buffer, body.byteOffset, 8);
  return { x: v.getFloat32(0, true), y: v.getFloat32(4, true) };
}

export interface SenderTagged {
  senderId: bigint;
  payload: Uint8Array;
}

/** Kind 2 body: `sender u64 BE` ‖ the original body. */
export function tagWithSender(senderId: bigint, payload: Uint8Array): Uint8Array {
  return new ByteWriter().u64(senderId).bytes(payload).finish();
}

/** Splits a kind-2 (or any sender-tagged) body. */
export function splitSender(body: Uint8Array): SenderTagged {
  const r = new ByteReader(body);
  const senderId = r.u64("sender id");
  return { senderId, payload: r.rest() };
}

export interface RpcRequest {
  requestId: bigint;
  method: string;
  payload: Uint8Array;
}

/** Kind 3; a method longer than 65 535 bytes is clamped at a UTF-8 boundary. */
export function encodeRpcRequest(requestId: bigint, method: string, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  let m = encodeUtf8(method);
  if (m.length > 0xffff) {
    let end = 0xffff;
    while (end > 0 && (m[end] & 0xc0) === 0x80) end--;
    m = m.subarray(0, end);
  }
  return new ByteWriter().u64(requestId).u16(m.length).bytes(m).bytes(payload).finish();
}

export function decodeRpcRequest(body: Uint8Array): RpcRequest {
  const r = new ByteReader(body);
  const requestId = r.u64("request id");
  const method = decodeUtf8(r.take(r.u16("method length"), "method"));
  return { requestId, method, payload: r.rest() };
}

export interface RpcResponse {
  requestId: bigint;
  status: number;
  payload: Uint8Array;
}

export function encodeRpcResponse(requestId: bigint, status: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  return new ByteWriter().u64(requestId).u8(status).bytes(payload).finish();
}

export function decodeRpcResponse(body: Uint8Array): RpcResponse {
  const r = new ByteReader(body);
  const requestId = r.u64("request id");
  const status = r.u8("status");
  return { requestId, status, payload: r.rest() };
}

/** Kind 5: UTF-8 token; empty = guest. */
export function encodeAuth(token = ""): Uint8Array {
  return encodeUtf8(token);
}

export function decodeAuth(body: Uint8Array): { token: string } {
  return { token: decodeUtf8(body) };
}

export interface AuthResult {
  /** 0 authenticated, 1 guest, 2 rejected. */
  status: number;
  userId: string | null;
  reasonClass: number | null;
}

export function encodeAuthResult(result: AuthResult): Uint8Array {
  const w = new ByteWriter().u8(result.status);
  if (result.status === 0) w.bytes(encodeUtf8(result.userId ?? ""));
  if (result.status === 2) w.u8(result.reasonClass ?? 0);
  return w.finish();
}

/** Kind 6. A Rejected body without a reason byte reads as reason 0. */
export function decodeAuthResult(body: Uint8Array): AuthResult {
  const r = new ByteReader(body);
  const status = r.u8("status");
  if (status === 0) return { status, userId: decodeUtf8(r.rest()), reasonClass: null };
  if (status === 1) return { status, userId: null, reasonClass: null };
  if (status === 2) return { status, userId: null, reasonClass: r.remaining ? r.u8() : 0 };
  throw new WireError("value", `AUTH_RESULT status ${status}`);
}
