/**
 * Networked-actor kinds 16-20 (realtime-wire.md §7): presence, spawn,
 * spawn batch, despawn, state. Raw big-endian f32 transforms (40 bytes).
 * Short bodies are `truncated`; extra bytes are ignored.
 */
import { ByteReader, ByteWriter } from "../bytes.js";
import { WireError } from "../errors.js";

export interface ActorTransform {
  /** cm */
  position: [number, number, number];
  /** x, y, z, w */
  rotation: [number, number, number, number];
  /** cm/s */
  velocity: [number, number, number];
}

export interface ActorPresence {
  archetypeId: number;
  transform: ActorTransform;
}

export interface ActorSpawn {
  objectId: number;
  archetypeId: number;
  /** Participant id of the owner; 0n = server-owned. */
  owner: bigint;
  transform: ActorTransform;
}

export interface ActorState {
  objectId: number;
  transform: ActorTransform;
}

export const TRANSFORM_BYTES = 40;
export const SPAWN_BYTES = 54;

function writeTransform(w: ByteWriter, t: ActorTransform): void {
  w.f32s(t.position).f32s(t.rotation).f32s(t.velocity);
}

function readTransform(r: ByteReader): ActorTransform {
  return {
    position: r.f32s(3) as [number, number, number],
    rotation: r.f32s(4) as [number, number, number, number],
    velocity: r.f32s(3) as [number, number, number],
  };
}

function needAtLeast(body: Uint8Array, n: number, what: string): void {
  if (body.length < n) throw new WireError("truncated", `${what} needs ${n} bytes, got ${body.length}`);
}

/** Kind 16. */
export function encodeActorPresence(p: ActorPresence): Uint8Array {
  const w = new ByteWriter().u16(p.archetypeId);
  writeTransform(w, p.transform);
  return w.finish();
}

export function decodeActorPresence(body: Uint8Array): ActorPresence {
  needAtLeast(body, 42, "NA_PRESENCE");
  const r = new ByteReader(body);
  return { archetypeId: r.u16(), transform: readTransform(r) };
}

function writeSpawn(w: ByteWriter, s: ActorSpawn): void {
  w.u32(s.objectId).u16(s.archetypeId).u64(s.owner);
  writeTransform(w, s.transform);
}

function readSpawn(r: ByteReader): ActorSpawn {
  return { objectId: r.u32(), archetypeId: r.u16(), owner: r.u64(), transform: readTransform(r) };
}

/** Kind 17. */
export function encodeActorSpawn(s: ActorSpawn): Uint8Array {
  const w = new ByteWriter();
  writeSpawn(w, s);
  return w.finish();
}

export function decodeActorSpawn(body: Uint8Array): ActorSpawn {
  needAtLeast(body, SPAWN_BYTES, "NA_SPAWN");
  return readSpawn(new ByteReader(body));
}

/** Kind 18. */
export function encodeActorSpawnBatch(spawns: readonly ActorSpawn[]): Uint8Array {
  if (spawns.length > 0xffff) throw new RangeError("more than 65535 spawns in one batch");
  const w = new ByteWriter().u16(spawns.length);
  for (const s of spawns) writeSpawn(w, s);
  return w.finish();
}

export function decodeActorSpawnBatch(body: Uint8Array): ActorSpawn[] {
  const r = new ByteReader(body);
  const count = r.u16("count");
  if (r.remaining < SPAWN_BYTES * count) throw new WireError("truncated", `${count} spawns overrun the body`);
  const out: ActorSpawn[] = [];
  for (let i = 0; i < count; i++) out.push(readSpawn(r));
  return out;
}

/** Kind 19. */
export function encodeActorDespawn(objectId: number): Uint8Array {
  return new ByteWriter().u32(objectId).finish();
}

export function decodeActorDespawn(body: Uint8Array): number {
  return new ByteReader(body).u32("object id");
}

/** Kind 20. */
export function encodeActorState(s: ActorState): Uint8Array {
  const w = new ByteWriter().u32(s.objectId);
  writeTransform(w, s.transform);
  return w.finish();
}

export function decodeActorState(body: Uint8Array): ActorState {
  needAtLeast(body, 44, "NA_STATE");
  const r = new ByteReader(body);
  return { objectId: r.u32(), transform: readTransform(r) };
}
