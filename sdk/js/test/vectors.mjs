// Loads crates/citadel-wire/tests/vectors/kinds.json (integers beyond 2^53
// stay exact) and maps between its snake_case fields and the SDK's codecs.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import * as sdk from "../dist/index.js";

const path = fileURLToPath(new URL("../../../crates/citadel-wire/tests/vectors/kinds.json", import.meta.url));
export const vectors = sdk.parseJson(readFileSync(path, "utf8"));
export const codec = new sdk.TransformCodec({
  posMin: vectors.codec.pos_min, posMax: vectors.codec.pos_max, posVpu: vectors.codec.pos_vpu,
  velMin: vectors.codec.vel_min, velMax: vectors.codec.vel_max, velVpu: vectors.codec.vel_vpu,
  quatMode: vectors.codec.quat_mode, sendRateHz: 20, simRateHz: 60,
});
export const schema = new sdk.RepSchema(vectors.schemas.example);

const snake = (k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const camel = (k) => k.replace(/_([a-z])/g, (_m, c) => c.toUpperCase());

/** SDK value -> vector form: snake_case keys, bytes as `<key>_hex`, safe bigint as number. */
export function toVector(v) {
  if (typeof v === "bigint") return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= 0n ? Number(v) : v;
  if (v instanceof Uint8Array) return sdk.toHex(v);
  if (Array.isArray(v)) return v.map(toVector);
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [String(k), toVector(x)]));
  if (v && typeof v === "object") {
    const out = {};
    for (const [k, x] of Object.entries(v)) out[x instanceof Uint8Array ? `${snake(k)}_hex` : snake(k)] = toVector(x);
    return out;
  }
  return v;
}

/** Vector form -> SDK value (inverse of toVector; `_hex` keys become bytes). */
export function fromVector(v) {
  if (Array.isArray(v)) return v.map(fromVector);
  if (v && typeof v === "object" && !(typeof v === "bigint")) {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      if (k.endsWith("_hex") && typeof x === "string" && k !== "schema_hash_hex") out[camel(k.slice(0, -4))] = sdk.fromHex(x);
      else out[camel(k)] = fromVector(x);
    }
    return out;
  }
  return v;
}

/** Per kind: decode(body) -> vector fields, encode(vector fields) -> body. */
export const adapters = {
  1: { dec: (b) => toVector(sdk.decodePosition(b)), enc: (f) => sdk.encodePosition(f.x, f.y) },
  2: { dec: (b) => toVector(sdk.splitSender(b)), enc: (f) => sdk.tagWithSender(BigInt(f.sender_id), sdk.fromHex(f.payload_hex)) },
  3: { dec: (b) => toVector(sdk.decodeRpcRequest(b)), enc: (f) => sdk.encodeRpcRequest(BigInt(f.request_id), f.method, sdk.fromHex(f.payload_hex)) },
  4: { dec: (b) => toVector(sdk.decodeRpcResponse(b)), enc: (f) => sdk.encodeRpcResponse(BigInt(f.request_id), f.status, sdk.fromHex(f.payload_hex)) },
  5: { dec: (b) => toVector(sdk.decodeAuth(b)), enc: (f) => sdk.encodeAuth(f.token) },
  6: {
    dec: (b) => {
      const r = sdk.decodeAuthResult(b);
      return { status: r.status, user_id: r.userId, reason: r.reasonClass };
    },
    enc: (f) => sdk.encodeAuthResult({ status: f.status, userId: f.user_id, reasonClass: f.reason }),
  },
  7: { dec: (b) => toVector(sdk.decodeTsyncHello(b)), enc: (f) => sdk.encodeTsyncHello(fromVector(f)) },
  8: { dec: (b) => toVector(sdk.decodeSnapshot(b, codec)), enc: (f) => sdk.encodeSnapshot(fromVector(f), codec) },
  9: { dec: (b) => toVector(sdk.decodeTsyncInput(b)), enc: (f) => sdk.encodeTsyncInput(fromVector(f)) },
  10: { dec: (b) => toVector(sdk.decodeTsyncAck(b)), enc: (f) => sdk.encodeTsyncAck(fromVector(f)) },
  11: { dec: (b) => toVector(sdk.decodeTsyncRole(b)), enc: (f) => sdk.encodeTsyncRole({ ...fromVector(f), owner: BigInt(f.owner) }) },
  12: { dec: (b) => toVector(sdk.decodeTsyncRewind(b)), enc: (f) => sdk.encodeTsyncRewind(fromVector(f)) },
  13: {
    dec: (b) => toVector(sdk.decodeDeltaBunch(b, schema)),
    enc: (f) => {
      const values = new Map();
      for (const [k, x] of Object.entries(f.values)) {
        const id = Number(k);
        values.set(id, vectors.schemas.example.fields[id].codec === "bytes" ? sdk.fromHex(x) : x);
      }
      return sdk.encodeDeltaBunch(
        { objectId: f.object_id, isFull: f.is_full, resultId: BigInt(f.result_id), baseId: f.base_id === null ? null : BigInt(f.base_id), values },
        schema,
      );
    },
  },
  14: { dec: (b) => ({ entries: toVector(sdk.decodeRepAck(b)) }), enc: (f) => sdk.encodeRepAck(fromVector(f.entries)) },
  15: { dec: (b) => ({ entries: toVector(sdk.decodeRepSchema(b)) }), enc: (f) => sdk.encodeRepSchema(fromVector(f.entries)) },
  16: { dec: (b) => toVector(sdk.decodeActorPresence(b)), enc: (f) => sdk.encodeActorPresence(fromVector(f)) },
  17: { dec: (b) => toVector(sdk.decodeActorSpawn(b)), enc: (f) => sdk.encodeActorSpawn(fromVector(f)) },
  18: { dec: (b) => ({ spawns: toVector(sdk.decodeActorSpawnBatch(b)) }), enc: (f) => sdk.encodeActorSpawnBatch(fromVector(f.spawns)) },
  19: { dec: (b) => ({ object_id: sdk.decodeActorDespawn(b) }), enc: (f) => sdk.encodeActorDespawn(f.object_id) },
  20: { dec: (b) => toVector(sdk.decodeActorState(b)), enc: (f) => sdk.encodeActorState(fromVector(f)) },
  21: { dec: (b) => toVector(sdk.decodeRoomCreate(b)), enc: (f) => sdk.encodeRoomCreate(sdk.fromHex(f.params_hex)) },
  22: { dec: (b) => ({ room_id: toVector(sdk.decodeRoomId(b)) }), enc: (f) => sdk.encodeRoomId(BigInt(f.room_id)) },
  23: { dec: (b) => toVector(sdk.decodeRoomJoined(b)), enc: (f) => sdk.encodeRoomJoined({ roomId: BigInt(f.room_id), map: f.map, mode: f.mode }) },
  24: { dec: (b) => ({ room_id: toVector(sdk.decodeRoomId(b)) }), enc: (f) => sdk.encodeRoomId(BigInt(f.room_id)) },
  25: { dec: (b) => ({ room_id: toVector(sdk.decodeRoomId(b)) }), enc: (f) => sdk.encodeRoomId(BigInt(f.room_id)) },
  26: { dec: (b) => sdk.decodeMatchmakerMatched(b), enc: (f) => sdk.encodeMatchmakerMatched(f) },
  27: { dec: (b) => sdk.decodeNotification(b), enc: (f) => sdk.encodeNotification(f) },
  28: { dec: (b) => sdk.decodeChatEventStrict(b), enc: (f) => sdk.encodeChatEvent(f) },
};
