/**
 * MSB-first bitstream (realtime-wire.md §3.1) and bit-varint (§3.2), used
 * by kinds 8, 13, 14 and 15. What it is not: any message layout. Reads are
 * bound-before-consume; `finish()` enforces the canonical end (fewer than 8
 * zero pad bits). Values wider than 32 bits use bigint.
 */
import { WireError } from "./errors.js";

export class BitWriter {
  private bytes: number[] = [];
  private bitLen = 0;

  /** Writes the low `n` (0..32) bits of `value`, top bit first. */
  write(value: number, n: number): void {
    for (let i = n - 1; i >= 0; i--) this.pushBit(Math.floor(value / 2 ** i) & 1);
  }

  /** Writes the low `n` (0..64) bits of a bigint. */
  writeBig(value: bigint, n: number): void {
    for (let i = n - 1; i >= 0; i--) this.pushBit(Number((value >> BigInt(i)) & 1n));
  }

  writeVarint(value: bigint | number): void {
    let v = BigInt.asUintN(64, BigInt(value));
    for (;;) {
      const group = Number(v & 0x7fn);
      v >>= 7n;
      this.pushBit(v ? 1 : 0);
      this.write(group, 7);
      if (!v) return;
    }
  }

  writeBytes(data: Uint8Array): void {
    for (const b of data) this.write(b, 8);
  }

  get bitLength(): number {
    return this.bitLen;
  }

  private pushBit(bit: number): void {
    const idx = this.bitLen >> 3;
    if (idx === this.bytes.length) this.bytes.push(0);
    if (bit) this.bytes[idx] |= 0x80 >> (this.bitLen & 7);
    this.bitLen++;
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

export class BitReader {
  private pos = 0;
  private readonly total: number;
  constructor(private readonly data: Uint8Array) {
    this.total = data.length * 8;
  }
  get remaining(): number {
    return this.total - this.pos;
  }
  private bit(): number {
    const b = (this.data[this.pos >> 3] >> (7 - (this.pos & 7))) & 1;
    this.pos++;
    return b;
  }
  private need(n: number): void {
    if (n > this.remaining) {
      throw new WireError("truncated", `read of ${n} bits at bit ${this.pos}, ${this.remaining} left`);
    }
  }
  /** Reads `n` (0..32) bits as an unsigned number. */
  read(n: number): number {
    this.need(n);
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 2 + this.bit();
    return v;
  }
  /** Reads `n` (0..64) bits as a bigint. */
  readBig(n: number): bigint {
    this.need(n);
    let v = 0n;
    for (let i = 0; i < n; i++) v = (v << 1n) | BigInt(this.bit());
    return v;
  }
  readVarint(): bigint {
    let value = 0n;
    for (let i = 0; i < 10; i++) {
      const more = this.read(1);
      const group = this.read(7);
      if (i === 9 && (more || group > 1)) throw new WireError("varint", "u64 overflow in the 10th group");
      value |= BigInt(group) << BigInt(7 * i);
      if (!more) {
        if (i > 0 && group === 0) throw new WireError("varint", "overlong varint");
        return value;
      }
    }
    throw new WireError("varint", "varint longer than 10 groups");
  }
  readBytes(n: number): Uint8Array {
    this.need(n * 8);
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.read(8);
    return out;
  }
  /** Canonical end: fewer than 8 bits left, all zero. */
  finish(): void {
    const rem = this.remaining;
    if (rem >= 8) throw new WireError("trailing", `${rem} bits after the last field`);
    if (rem && this.read(rem) !== 0) throw new WireError("padding", "non-zero pad bit");
  }
}
