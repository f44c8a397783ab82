/**
 * Byte helpers: a big-endian reader whose every short read is a
 * `truncated` WireError, a growable writer, hex and strict UTF-8. What it
 * is not: bit packing (bits.ts) or any message layout (codecs/).
 */
import { WireError } from "./errors.js";

const utf8Decoder = new TextDecoder("utf-8", { fatal: true });
const utf8Encoder = new TextEncoder();

/** Strict UTF-8 decode; invalid input is a `utf8` WireError. */
export function decodeUtf8(bytes: Uint8Array): string {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    throw new WireError("utf8", "invalid UTF-8");
  }
}

export function encodeUtf8(text: string): Uint8Array {
  return utf8Encoder.encode(text);
}

export function toHex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += b.toString(16).padStart(2, "0");
  return out;
}

export function fromHex(hex: string): Uint8Array {
  if (hex.length % 2 !== 0 || /[^0-9a-fA-F]/.test(hex)) throw new TypeError("invalid hex string");
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

export const EMPTY = new Uint8Array(0);

/** Big-endian cursor over a body. */
export class ByteReader {
  private readonly view: DataView;
  pos = 0;
  constructor(readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  get remaining(): number {
    return this.bytes.length - this.pos;
  }
  private need(n: number, what: string): void {
    if (n > this.remaining) {
      throw new WireError("truncated", `${what}: need ${n} bytes at ${this.pos}, have ${this.remaining}`);
    }
  }
  take(n: number, what = "bytes"): Uint8Array {
    this.need(n, what);
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  u8(what = "u8"): number {
    this.need(1, what);
    return this.bytes[this.pos++];
  }
  u16(what = "u16"): number {
    this.need(2, what);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  u32(what = "u32"): number {
    this.need(4, what);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  u64(what = "u64"): bigint {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos);
    this.pos += 8;
    return v;
  }
  f32(what = "f32"): number {
    this.need(4, what);
    const v = this.view.getFloat32(this.pos);
    this.pos += 4;
    return v;
  }
  f32s(n: number, what = "f32"): number[] {
    const out: number[] = [];
    for (let i = 0; i < n; i++) out.push(this.f32(what));
    return out;
  }
  rest(): Uint8Array {
    return this.take(this.remaining);
  }
}

/** Growable big-endian writer. */
export class ByteWriter {
  private buf = new Uint8Array(64);
  private view = new DataView(this.buf.buffer);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): this {
    this.reserve(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
    return this;
  }
  u16(v: number): this {
    this.reserve(2);
    this.view.setUint16(this.length, v);
    this.length += 2;
    return this;
  }
  u32(v: number): this {
    this.reserve(4);
    this.view.setUint32(this.length, v);
    this.length += 4;
    return this;
  }
  u64(v: bigint | number): this {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt.asUintN(64, BigInt(v)));
    this.length += 8;
    return this;
  }
  f32(v: number): this {
    this.reserve(4);
    this.view.setFloat32(this.length, v);
    this.length += 4;
    return this;
  }
  f32s(vs: readonly number[]): this {
    for (const v of vs) this.f32(v);
    return this;
  }
  bytes(b: Uint8Array): this {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
    return this;
  }
  finish(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}
