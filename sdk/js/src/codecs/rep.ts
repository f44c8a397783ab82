/**
 * NetworkPeer replication kinds 13-15 (realtime-wire.md §6): one DeltaBunch
 * per kind-13 envelope, decoded against a client-held schema (field codecs
 * bool, int_range, scalar, vector3, quat, bytes, collection), REP_ACK and
 * REP_SCHEMA. Bitstreams with the canonical-end rule; every count and
 * length is checked against its cap before anything is allocated.
 */
import { BitReader, BitWriter } from "../bits.js";
import { fromHex, toHex } from "../bytes.js";
import { WireError } from "../errors.js";
import { ceilLog2, QUAT_MODES, readQuat, ScalarCodec, Vector3Codec, writeQuat } from "../quant.js";

export const BYTES_HARD_CAP = 1_048_576;
export const COLLECTION_HARD_CAP = 65_536;
export const REP_MAX_ENTRIES = 8192;
export const BUNCH_ALLOCATION_BUDGET = 4_194_304;

export type FieldSpec =
  | { codec: "bool" }
  | { codec: "int_range"; min: number | bigint; max: number | bigint }
  | { codec: "scalar"; min: number; max: number; values_per_unit: number }
  | { codec: "vector3"; min: number[]; max: number[]; values_per_unit: number }
  | { codec: "quat"; mode: number }
  | { codec: "bytes"; max_len: number }
  | { codec: "collection"; item: FieldSpec; max_items: number };

export interface SchemaSpec {
  fields: FieldSpec[];
  schema_hash_hex: string;
  layout_version: number;
}

/** One collection item id plus its replication key and value. */
export interface CollectionItem {
  index: number;
  generation: number;
  repKey: bigint;
  value: FieldValue;
}

export interface CollectionDelta {
  removed: { index: number; generation: number }[];
  added: CollectionItem[];
  changed: CollectionItem[];
}

export type FieldValue = boolean | number | bigint | number[] | Uint8Array | CollectionDelta;

interface Budget {
  left: number;
}

function spend(budget: Budget, n: number): void {
  if (n > budget.left) throw new WireError("count", "allocation budget of the bunch exceeded");
  budget.left -= n;
}

export class FieldCodec {
  private scalar?: ScalarCodec;
  private vec?: Vector3Codec;
  private span = 0n;
  private intBits = 0;
  private cap = 0;
  private item?: FieldCodec;
  constructor(readonly spec: FieldSpec, depth = 0) {
    switch (spec.codec) {
      case "int_range": {
        this.span = BigInt(spec.max) - BigInt(spec.min);
        if (this.span < 0n) throw new RangeError("int_range max < min");
        this.intBits = this.span >= (1n << 64n) - 1n ? 64 : ceilLog2(this.span + 1n);
        break;
      }
      case "scalar":
        this.scalar = new ScalarCodec(spec.min, spec.max, spec.values_per_unit);
        break;
      case "vector3":
        this.vec = new Vector3Codec(spec.min, spec.max, spec.values_per_unit);
        break;
      case "quat":
        if (!(QUAT_MODES as readonly number[]).includes(spec.mode)) throw new RangeError("invalid quat mode");
        break;
      case "bytes":
        this.cap = Math.min(spec.max_len, BYTES_HARD_CAP);
        break;
      case "collection":
        if (depth > 0 || spec.item.codec === "collection") throw new RangeError("collections cannot nest");
        this.cap = Math.min(spec.max_items, COLLECTION_HARD_CAP);
        this.item = new FieldCodec(spec.item, depth + 1);
        break;
      case "bool":
        break;
      default:
        throw new RangeError(`unknown codec ${(spec as { codec: string }).codec}`);
    }
  }

  write(w: BitWriter, v: FieldValue): void {
    const s = this.spec;
    switch (s.codec) {
      case "bool":
        return w.write(v ? 1 : 0, 1);
      case "int_range": {
        const min = BigInt(s.min);
        let x = BigInt(v as number | bigint);
        if (x < min) x = min;
        if (x > BigInt(s.max)) x = BigInt(s.max);
        return w.writeBig(x - min, this.intBits);
      }
      case "scalar":
        return this.scalar!.write(w, v as number);
      case "vector3":
        return this.vec!.write(w, v as number[]);
      case "quat":
        return writeQuat(w, v as number[], s.mode);
      case "bytes": {
        const data = v as Uint8Array;
        if (data.length > this.cap) throw new RangeError(`bytes field longer than ${this.cap}`);
        w.writeVarint(data.length);
        return w.writeBytes(data);
      }
      case "collection": {
        const d = v as CollectionDelta;
        w.writeVarint(d.removed.length);
        for (const id of d.removed) {
          w.writeVarint(id.index);
          w.writeVarint(id.generation);
        }
        for (const list of [d.added, d.changed]) {
          w.writeVarint(list.length);
          for (const it of list) {
            w.writeVarint(it.index);
            w.writeVarint(it.generation);
            w.writeVarint(it.repKey);
            this.item!.write(w, it.value);
          }
        }
      }
    }
  }

  read(r: BitReader, budget: Budget): FieldValue {
    const s = this.spec;
    switch (s.codec) {
      case "bool":
        return r.read(1) === 1;
      case "int_range": {
        const code = r.readBig(this.intBits);
        if (code > this.span) throw new WireError("value", `IntRange code ${code} > ${this.span}`);
        const x = BigInt(s.min) + code;
        return x >= BigInt(Number.MIN_SAFE_INTEGER) && x <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(x) : x;
      }
      case "scalar":
        return this.scalar!.read(r);
      case "vector3":
        return this.vec!.read(r);
      case "quat":
        return readQuat(r, s.mode);
      case "bytes": {
        const n = r.readVarint();
        if (n > BigInt(this.cap)) throw new WireError("count", `bytes length ${n} > cap ${this.cap}`);
        spend(budget, Number(n));
        return r.readBytes(Number(n));
      }
      case "collection": {
        const seen = new Set<string>();
        const id = (index: number, generation: number): void => {
          const key = `${index}:${generation}`;
          if (seen.has(key)) throw new WireError("value", "collection item id repeated");
          seen.add(key);
        };
        const count = (): number => {
          const n = r.readVarint();
          if (n > BigInt(this.cap)) throw new WireError("count", `collection list of ${n} > cap ${this.cap}`);
          spend(budget, Number(n));
          return Number(n);
        };
        const u32 = (): number => {
          const v = r.readVarint();
          if (v > 0xffffffffn) throw new WireError("value", "collection index or generation exceeds u32");
          return Number(v);
        };
        const removed: { index: number; generation: number }[] = [];
        for (let i = count(); i > 0; i--) {
          const index = u32();
          const generation = u32();
          id(index, generation);
          removed.push({ index, generation });
        }
        const items = (): CollectionItem[] => {
          const out: CollectionItem[] = [];
          for (let i = count(); i > 0; i--) {
            const index = u32();
            const generation = u32();
            id(index, generation);
            out.push({ index, generation, repKey: r.readVarint(), value: this.item!.read(r, budget) });
          }
          return out;
        };
        const added = items();
        const changed = items();
        return { removed, added, changed };
      }
    }
  }
}

/** A class schema both ends hold (field id = position). */
export class RepSchema {
  readonly fields: FieldCodec[];
  readonly hash: Uint8Array;
  constructor(readonly spec: SchemaSpec) {
    this.fields = spec.fields.map((f) => new FieldCodec(f));
    this.hash = fromHex(spec.schema_hash_hex);
    if (this.hash.length !== 16) throw new RangeError("schema hash must be 16 bytes");
  }
}

export interface DeltaBunch {
  objectId: number;
  isFull: boolean;
  resultId: bigint;
  /** Delta bunches only. */
  baseId: bigint | null;
  /** Full bunches only (lowercase hex). */
  schemaHashHex: string | null;
  layoutVersion: number | null;
  /** Changed fields by field id. */
  values: Map<number, FieldValue>;
}

/** Kind 13 encoder. */
export function encodeDeltaBunch(b: DeltaBunch, schema: RepSchema): Uint8Array {
  const w = new BitWriter();
  w.write(b.objectId, 32);
  w.write(b.isFull ? 1 : 0, 1);
  w.writeVarint(b.resultId);
  if (b.isFull) {
    w.writeBytes(schema.hash);
    w.write(schema.spec.layout_version, 32);
  } else {
    w.writeVarint(b.baseId ?? 0n);
  }
  schema.fields.forEach((_, i) => w.write(b.values.has(i) ? 1 : 0, 1));
  schema.fields.forEach((f, i) => {
    if (b.values.has(i)) f.write(w, b.values.get(i)!);
  });
  return w.finish();
}

/** Kind 13 decoder; the whole bunch is rejected on any error. */
export function decodeDeltaBunch(body: Uint8Array, schema: RepSchema): DeltaBunch {
  const r = new BitReader(body);
  const objectId = r.read(32);
  const isFull = r.read(1) === 1;
  const resultId = r.readVarint();
  if (resultId === 0n) throw new WireError("value", "zero result_id");
  let baseId: bigint | null = null;
  let schemaHashHex: string | null = null;
  let layoutVersion: number | null = null;
  if (isFull) {
    const hash = r.readBytes(16);
    layoutVersion = r.read(32);
    if (toHex(hash) !== toHex(schema.hash)) throw new WireError("schema", "schema hash mismatch");
    if (layoutVersion !== schema.spec.layout_version) throw new WireError("schema", "layout_version mismatch");
    schemaHashHex = toHex(hash);
  } else {
    baseId = r.readVarint();
    if (baseId === 0n) throw new WireError("value", "zero base_id on a delta bunch");
  }
  const mask = schema.fields.map(() => r.read(1));
  const values = new Map<number, FieldValue>();
  const budget = { left: BUNCH_ALLOCATION_BUDGET };
  schema.fields.forEach((f, i) => {
    if (mask[i]) values.set(i, f.read(r, budget));
  });
  r.finish();
  return { objectId, isFull, resultId, baseId, schemaHashHex, layoutVersion, values };
}

export interface RepAckEntry {
  objectId: number;
  ackedResultId: bigint;
  history: number;
}

/** Kind 14. */
export function encodeRepAck(entries: readonly RepAckEntry[]): Uint8Array {
  if (entries.length > REP_MAX_ENTRIES) throw new RangeError("more than 8192 ack entries");
  const w = new BitWriter();
  w.writeVarint(entries.length);
  for (const e of entries) {
    w.write(e.objectId, 32);
    w.writeVarint(e.ackedResultId);
    w.write(e.history >>> 0, 32);
  }
  return w.finish();
}

export function decodeRepAck(body: Uint8Array): RepAckEntry[] {
  const r = new BitReader(body);
  const n = r.readVarint();
  if (n > BigInt(REP_MAX_ENTRIES)) throw new WireError("count", `entry_count ${n} > ${REP_MAX_ENTRIES}`);
  const out: RepAckEntry[] = [];
  for (let i = 0; i < Number(n); i++) out.push({ objectId: r.read(32), ackedResultId: r.readVarint(), history: r.read(32) });
  r.finish();
  return out;
}

export interface RepSchemaEntry {
  classId: number;
  schemaHashHex: string;
  layoutVersion: number;
}

/** Kind 15. */
export function encodeRepSchema(entries: readonly RepSchemaEntry[]): Uint8Array {
  if (entries.length > REP_MAX_ENTRIES) throw new RangeError("more than 8192 schema entries");
  const w = new BitWriter();
  w.writeVarint(entries.length);
  for (const e of entries) {
    w.write(e.classId, 32);
    w.writeBytes(fromHex(e.schemaHashHex));
    w.write(e.layoutVersion, 32);
  }
  return w.finish();
}

export function decodeRepSchema(body: Uint8Array): RepSchemaEntry[] {
  const r = new BitReader(body);
  const n = r.readVarint();
  if (n > BigInt(REP_MAX_ENTRIES)) throw new WireError("count", `entry_count ${n} > ${REP_MAX_ENTRIES}`);
  const out: RepSchemaEntry[] = [];
  for (let i = 0; i < Number(n); i++) out.push({ classId: r.read(32), schemaHashHex: toHex(r.readBytes(16)), layoutVersion: r.read(32) });
  r.finish();
  return out;
}
