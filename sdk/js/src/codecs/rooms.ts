/**
 * Room kinds 21-25, 32 and 33 (realtime-wire.md §8), all big-endian,
 * strings as `u16` length + UTF-8. Extra trailing bytes are ignored.
 */
import { ByteReader, ByteWriter, decodeUtf8, encodeUtf8 } from "../bytes.js";

/** Kind 21: `params_len u16` ‖ params (the SDK sends the UTF-8 room name). */
export function encodeRoomCreate(params: string | Uint8Array): Uint8Array {
  const p = typeof params === "string" ? encodeUtf8(params) : params;
  if (p.length > 0xffff) throw new RangeError("room create params exceed 65535 bytes");
  return new ByteWriter().u16(p.length).bytes(p).finish();
}

export function decodeRoomCreate(body: Uint8Array): { params: Uint8Array } {
  const r = new ByteReader(body);
  return { params: r.take(r.u16("params length"), "params") };
}

/** Kinds 22, 24, 25: `room_id u64`. */
export function encodeRoomId(roomId: bigint | number): Uint8Array {
  return new ByteWriter().u64(roomId).finish();
}

export function decodeRoomId(body: Uint8Array): bigint {
  return new ByteReader(body).u64("room id");
}

export interface RoomInfo {
  roomId: bigint;
  map: string;
  mode: string;
}

function writeString(w: ByteWriter, s: string): void {
  const b = encodeUtf8(s);
  if (b.length > 0xffff) throw new RangeError("string exceeds 65535 bytes");
  w.u16(b.length).bytes(b);
}

function readString(r: ByteReader, what: string): string {
  return decodeUtf8(r.take(r.u16(`${what} length`), what));
}

/** Kind 23. */
export function encodeRoomJoined(info: RoomInfo): Uint8Array {
  const w = new ByteWriter().u64(info.roomId);
  writeString(w, info.map);
  writeString(w, info.mode);
  return w.finish();
}

export function decodeRoomJoined(body: Uint8Array): RoomInfo {
  const r = new ByteReader(body);
  const roomId = r.u64("room id");
  const map = readString(r, "map");
  const mode = readString(r, "mode");
  return { roomId, map, mode };
}

export interface MatchClosed {
  roomId: bigint;
  reason: number;
  requeueHint: boolean;
}

/** Kind 32. */
export function decodeMatchClosed(body: Uint8Array): MatchClosed {
  const r = new ByteReader(body);
  return { roomId: r.u64("room id"), reason: r.u8("reason"), requeueHint: r.u8("requeue hint") !== 0 };
}

export interface RoomReject {
  requestKind: number;
  reason: string;
}

/** Kind 33. */
export function decodeRoomReject(body: Uint8Array): RoomReject {
  const r = new ByteReader(body);
  return { requestKind: r.u16("request kind"), reason: readString(r, "reason") };
}
