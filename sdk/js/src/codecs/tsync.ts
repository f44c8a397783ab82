/**
 * Transform-sync kinds 7-12 (realtime-wire.md §5): HELLO negotiation,
 * bit-packed SNAPSHOT (decoded with the codec HELLO negotiated), INPUT,
 * ACK, ROLE, REWIND. What it is not: reconstruction or interpolation
 * (snapshots.ts).
 */
import { BitReader, BitWriter } from "../bits.js";
import { ByteReader, ByteWriter } from "../bytes.js";
import { WireError } from "../errors.js";
import { QUAT_MODES, readQuat, Vector3Codec, writeQuat, type Quat, type Vec3 } from "../quant.js";

export interface TsyncHello {
  posMin: Vec3;
  posMax: Vec3;
  posVpu: number;
  velMin: Vec3;
  velMax: Vec3;
  velVpu: number;
  quatMode: number;
  sendRateHz: number;
  simRateHz: number;
}

export const DEFAULT_HELLO: TsyncHello = {
  posMin: [-262144, -262144, -32768],
  posMax: [262144, 262144, 32768],
  posVpu: 8,
  velMin: [-32768, -32768, -32768],
  velMax: [32768, 32768, 32768],
  velVpu: 4,
  quatMode: 10,
  sendRateHz: 20,
  simRateHz: 60,
};

/** Kind 7 (server form, 59 bytes). The client opt-in is an empty body. */
export function encodeTsyncHello(h: TsyncHello): Uint8Array {
  return new ByteWriter()
    .f32s(h.posMin).f32s(h.posMax).u32(h.posVpu)
    .f32s(h.velMin).f32s(h.velMax).u32(h.velVpu)
    .u8(h.quatMode).u8(h.sendRateHz).u8(h.simRateHz)
    .finish();
}

export function decodeTsyncHello(body: Uint8Array): TsyncHello {
  if (body.length < 59) throw new WireError("truncated", "TSYNC_HELLO needs 59 bytes");
  const r = new ByteReader(body);
  const h: TsyncHello = {
    posMin: r.f32s(3) as Vec3, posMax: r.f32s(3) as Vec3, posVpu: r.u32(),
    velMin: r.f32s(3) as Vec3, velMax: r.f32s(3) as Vec3, velVpu: r.u32(),
    quatMode: r.u8(), sendRateHz: r.u8(), simRateHz: r.u8(),
  };
  if (!(QUAT_MODES as readonly number[]).includes(h.quatMode)) throw new WireError("value", `quat_mode ${h.quatMode}`);
  return h;
}

/** The quantizers a HELLO negotiates. Throws RangeError for unusable bounds. */
export class TransformCodec {
  readonly position: Vector3Codec;
  readonly velocity: Vector3Codec;
  readonly quatMode: number;
  constructor(readonly hello: TsyncHello = DEFAULT_HELLO) {
    this.position = new Vector3Codec(hello.posMin, hello.posMax, hello.posVpu);
    this.velocity = new Vector3Codec(hello.velMin, hello.velMax, hello.velVpu);
    if (!(QUAT_MODES as readonly number[]).includes(hello.quatMode)) throw new RangeError("invalid quat mode");
    this.quatMode = hello.quatMode;
  }
}

export interface SnapshotUpdate {
  objectId: number;
  genEpoch: number;
  position: Vec3 | null;
  rotation: Quat | null;
  velocity: Vec3 | null;
  lastInputSeq: number | null;
}

export interface Snapshot {
  serverTick: number;
  snapshotId: number;
  baseSnapshotId: number;
  sendRateHz: number;
  removed: number[];
  updates: SnapshotUpdate[];
}

/** Kind 8 encoder (tests and tools; the server is the producer). */
export function encodeSnapshot(s: Snapshot, codec: TransformCodec): Uint8Array {
  if (s.removed.length > 0xffff || s.updates.length > 0xffff) throw new RangeError("more than 65535 removals or updates");
  const w = new BitWriter();
  w.write(s.serverTick, 32);
  w.write(s.snapshotId, 32);
  w.write(s.baseSnapshotId, 32);
  w.write(s.sendRateHz, 8);
  w.write(s.removed.length, 16);
  w.write(s.updates.length, 16);
  for (const id of s.removed) w.write(id, 32);
  for (const u of s.updates) {
    w.write(u.objectId, 32);
    w.write(u.genEpoch, 16);
    const mask = (u.lastInputSeq !== null ? 8 : 0) | (u.position ? 4 : 0) | (u.rotation ? 2 : 0) | (u.velocity ? 1 : 0);
    w.write(mask, 4);
    if (u.position) codec.position.write(w, u.position);
    if (u.rotation) writeQuat(w, u.rotation, codec.quatMode);
    if (u.velocity) codec.velocity.write(w, u.velocity);
    if (u.lastInputSeq !== null) w.write(u.lastInputSeq, 32);
  }
  return w.finish();
}

/** Kind 8 decoder; counts are checked against the bits present. */
export function decodeSnapshot(body: Uint8Array, codec: TransformCodec): Snapshot {
  const r = new BitReader(body);
  const serverTick = r.read(32);
  const snapshotId = r.read(32);
  const baseSnapshotId = r.read(32);
  const sendRateHz = r.read(8);
  const nRemoved = r.read(16);
  const nUpdates = r.read(16);
  if (nRemoved * 32 > r.remaining) throw new WireError("truncated", "removed ids overrun the body");
  const removed: number[] = [];
  for (let i = 0; i < nRemoved; i++) removed.push(r.read(32));
  if (nUpdates * 52 > r.remaining) throw new WireError("truncated", "updates overrun the body");
  const updates: SnapshotUpdate[] = [];
  for (let i = 0; i < nUpdates; i++) {
    const objectId = r.read(32);
    const genEpoch = r.read(16);
    const mask = r.read(4);
    const position = mask & 4 ? codec.position.read(r) : null;
    const rotation = mask & 2 ? readQuat(r, codec.quatMode) : null;
    const velocity = mask & 1 ? codec.velocity.read(r) : null;
    const lastInputSeq = mask & 8 ? r.read(32) : null;
    updates.push({ objectId, genEpoch, position, rotation, velocity, lastInputSeq });
  }
  r.finish();
  return { serverTick, snapshotId, baseSnapshotId, sendRateHz, removed, updates };
}

export interface InputFrame {
  inputSeq: number;
  simTick: number;
  dt: number;
  objectId: number;
  ownershipEpoch: number;
  moveVelocity: Vec3;
  flags: number;
  payload: Uint8Array;
  fire: { origin: Vec3; direction: Vec3 } | null;
}

export interface TsyncInput {
  ackedSnapshotId: number;
  lastSeenSnapshotId: number;
  frames: InputFrame[];
}

export const MAX_INPUT_FRAMES = 32;

/** Kind 9. Payloads longer than 65 535 bytes are clamped. */
export function encodeTsyncInput(input: TsyncInput): Uint8Array {
  if (input.frames.length > MAX_INPUT_FRAMES) throw new RangeError("more than 32 input frames");
  const w = new ByteWriter().u32(input.ackedSnapshotId).u32(input.lastSeenSnapshotId).u8(input.frames.length);
  for (const f of input.frames) {
    const payload = f.payload.subarray(0, 0xffff);
    const flags = f.fire ? f.flags | 1 : f.flags & ~1;
    w.u32(f.inputSeq).u32(f.simTick).f32(f.dt).u32(f.objectId).u32(f.ownershipEpoch).f32s(f.moveVelocity);
    w.u8(flags).u16(payload.length).bytes(payload);
    if (f.fire) w.f32s(f.fire.origin).f32s(f.fire.direction);
  }
  return w.finish();
}

export function decodeTsyncInput(body: Uint8Array): TsyncInput {
  const r = new ByteReader(body);
  const ackedSnapshotId = r.u32();
  const lastSeenSnapshotId = r.u32();
  const count = r.u8("frame count");
  if (count > MAX_INPUT_FRAMES) throw new WireError("count", `frame_count ${count} > 32`);
  const frames: InputFrame[] = [];
  for (let i = 0; i < count; i++) {
    const inputSeq = r.u32();
    const simTick = r.u32();
    const dt = r.f32();
    const objectId = r.u32();
    const ownershipEpoch = r.u32();
    const moveVelocity = r.f32s(3) as Vec3;
    const flags = r.u8();
    const payload = r.take(r.u16("payload length"), "payload");
    const fire = flags & 1 ? { origin: r.f32s(3) as Vec3, direction: r.f32s(3) as Vec3 } : null;
    frames.push({ inputSeq, simTick, dt, objectId, ownershipEpoch, moveVelocity, flags, payload, fire });
  }
  return { ackedSnapshotId, lastSeenSnapshotId, frames };
}

export interface TsyncAck {
  ackedSnapshotId: number;
  history: number;
}

/** Kind 10. */
export function encodeTsyncAck(a: TsyncAck): Uint8Array {
  return new ByteWriter().u32(a.ackedSnapshotId).u32(a.history >>> 0).finish();
}

export function decodeTsyncAck(body: Uint8Array): TsyncAck {
  const r = new ByteReader(body);
  const a = { ackedSnapshotId: r.u32(), history: r.u32() };
  if (a.ackedSnapshotId === 0 && a.history !== 0) throw new WireError("value", "acked 0 with non-zero history");
  return a;
}

export const ROLE_OWNER_PREDICTED = 0;
export const ROLE_REMOTE_INTERPOLATED = 1;
export const ROLE_SERVER_SIMULATED = 2;
export const ROLE_STATIC_REPLICATED = 3;
export const ROLE_EVENT_ASSIGN = 0;
export const ROLE_EVENT_HANDOFF = 1;
export const ROLE_EVENT_RELEVANCY_ENTER = 2;
export const ROLE_EVENT_RELEVANCY_EXIT = 3;

export interface TsyncRole {
  objectId: number;
  role: number;
  owner: bigint;
  ownershipEpoch: number;
  genEpoch: number;
  event: number;
}

/** Kind 11. */
export function encodeTsyncRole(x: TsyncRole): Uint8Array {
  return new ByteWriter().u32(x.objectId).u8(x.role).u64(x.owner).u32(x.ownershipEpoch).u16(x.genEpoch).u8(x.event).finish();
}

export function decodeTsyncRole(body: Uint8Array): TsyncRole {
  const r = new ByteReader(body);
  const x = { objectId: r.u32(), role: r.u8(), owner: r.u64(), ownershipEpoch: r.u32(), genEpoch: r.u16(), event: r.u8() };
  if (x.role > 3) throw new WireError("value", `role ${x.role}`);
  if (x.event > 3) throw new WireError("value", `event ${x.event}`);
  return x;
}

export interface TsyncRewind {
  inputSeq: number;
  flags: number;
  objectId: number;
  hitPoint: Vec3;
  rewindTick: number;
}

/** Kind 12. */
export function encodeTsyncRewind(x: TsyncRewind): Uint8Array {
  return new ByteWriter().u32(x.inputSeq).u8(x.flags).u32(x.objectId).f32s(x.hitPoint).u32(x.rewindTick).finish();
}

export function decodeTsyncRewind(body: Uint8Array): TsyncRewind {
  const r = new ByteReader(body);
  return { inputSeq: r.u32(), flags: r.u8(), objectId: r.u32(), hitPoint: r.f32s(3) as Vec3, rewindTick: r.u32() };
}
