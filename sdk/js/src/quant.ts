/**
 * Quantizers shared by snapshots and NetworkPeer fields: bounded scalar
 * (realtime-wire.md §3.4), Vector3 (§3.5) and smallest-three quaternion
 * (§3.6). All arithmetic in f64 after widening f32 inputs, results narrowed
 * with Math.fround, so decoded values equal the Rust and Python ones.
 */
import type { BitReader, BitWriter } from "./bits.js";
import { WireError } from "./errors.js";

const round = (x: number): number => Math.floor(x + 0.5);
/** Integer ceil(log2(n)); 0 for n <= 1. */
export function ceilLog2(n: number | bigint): number {
  const v = BigInt(n);
  let bits = 0;
  while (1n << BigInt(bits) < v) bits++;
  return bits;
}

export class ScalarCodec {
  readonly min: number;
  readonly max: number;
  readonly steps: number;
  readonly bits: number;
  constructor(min: number, max: number, readonly valuesPerUnit: number) {
    this.min = Math.fround(min);
    this.max = Math.fround(max);
    if (!Number.isFinite(this.min) || !Number.isFinite(this.max) || !(this.max > this.min) || !(valuesPerUnit >= 1)) {
      throw new RangeError("invalid scalar codec parameters");
    }
    this.steps = Math.max(1, round((this.max - this.min) * valuesPerUnit));
    this.bits = ceilLog2(this.steps + 1);
  }
  code(value: number): number {
    let v = Math.fround(value);
    if (Number.isNaN(v)) throw new RangeError("NaN cannot be quantized");
    v = Math.min(Math.max(v, this.min), this.max);
    return Math.min(round((v - this.min) * this.valuesPerUnit), this.steps);
  }
  value(code: number): number {
    if (code > this.steps) throw new WireError("value", `scalar code ${code} > steps ${this.steps}`);
    return Math.fround(this.min + code / this.valuesPerUnit);
  }
  write(w: BitWriter, v: number): void {
    w.write(this.code(v), this.bits);
  }
  read(r: BitReader): number {
    return this.value(r.read(this.bits));
  }
}

export type Vec3 = [number, number, number];
export type Quat = [number, number, number, number];

export class Vector3Codec {
  readonly axes: ScalarCodec[];
  constructor(min: readonly number[], max: readonly number[], valuesPerUnit: number) {
    this.axes = [0, 1, 2].map((i) => new ScalarCodec(min[i], max[i], valuesPerUnit));
  }
  get bits(): number {
    return this.axes.reduce((a, s) => a + s.bits, 0);
  }
  write(w: BitWriter, v: readonly number[]): void {
    this.axes.forEach((a, i) => a.write(w, v[i]));
  }
  read(r: BitReader): Vec3 {
    return [this.axes[0].read(r), this.axes[1].read(r), this.axes[2].read(r)];
  }
}

export const QUAT_MODES = [9, 10, 15] as const;
const SQRT_HALF = 0.7071067811865476;
const QUAT_RANGE = 2 * SQRT_HALF;
const IDENTITY: Quat = [0, 0, 0, 1];

function normalised(q: number[]): number[] {
  const norm = Math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!Number.isFinite(norm) || norm < 1e-6) return [...IDENTITY];
  return q.map((c) => c / norm);
}

/** Smallest-three encode: dropped index and three codes of `n` bits. */
export function quatEncodeParts(q: readonly number[], n: number): [number, number[]] {
  let v = q.map((c) => Math.fround(c));
  if (!v.every(Number.isFinite)) v = [...IDENTITY];
  v = normalised(v);
  let index = 0;
  for (let i = 1; i < 4; i++) if (Math.abs(v[i]) > Math.abs(v[index])) index = i;
  if (v[index] < 0) v = v.map((c) => -c);
  const maxc = 2 ** n - 1;
  const codes: number[] = [];
  for (let i = 0; i < 4; i++) {
    if (i === index) continue;
    codes.push(Math.min(Math.max(round(((v[i] + SQRT_HALF) / QUAT_RANGE) * maxc), 0), maxc));
  }
  return [index, codes];
}

export function quatDecodeParts(index: number, codes: readonly number[], n: number): Quat {
  const maxc = 2 ** n - 1;
  const kept = codes.map((c) => ((c & maxc) / maxc) * QUAT_RANGE - SQRT_HALF);
  const dropped = Math.sqrt(Math.max(0, 1 - (kept[0] * kept[0] + kept[1] * kept[1] + kept[2] * kept[2])));
  const q = [...kept];
  q.splice(index & 3, 0, dropped);
  return normalised(q).map(Math.fround) as Quat;
}

export function writeQuat(w: BitWriter, q: readonly number[], n: number): void {
  const [index, codes] = quatEncodeParts(q, n);
  w.write(index, 2);
  for (const c of codes) w.write(c, n);
}

export function readQuat(r: BitReader, n: number): Quat {
  const index = r.read(2);
  const codes = [r.read(n), r.read(n), r.read(n)];
  return quatDecodeParts(index, codes, n);
}
