/**
 * Envelopes and their two transport forms (realtime-wire.md §1): framed
 * (`u32 len` ‖ `u16 kind` ‖ body, for WebSocket messages and streams) and
 * datagram (`u16 kind` ‖ body). `FrameDecoder` buffers partial input and
 * checks the length before allocating. What it is not: body codecs.
 */
import { KIND_BYTES, LENGTH_PREFIX_BYTES, MAX_FRAME_BODY_BYTES } from "./constants.js";
import { EMPTY } from "./bytes.js";
import { MalformedEnvelopeError } from "./errors.js";

export class Envelope {
  constructor(
    readonly kind: number,
    readonly body: Uint8Array = EMPTY,
  ) {
    if (!Number.isInteger(kind) || kind < 0 || kind > 0xffff) throw new RangeError(`kind ${kind} is not a u16`);
  }
  /** The framed form. */
  encodeFrame(): Uint8Array {
    const out = new Uint8Array(LENGTH_PREFIX_BYTES + KIND_BYTES + this.body.length);
    const view = new DataView(out.buffer);
    view.setUint32(0, KIND_BYTES + this.body.length);
    view.setUint16(4, this.kind);
    out.set(this.body, 6);
    return out;
  }
  /** The datagram form. */
  encodeDatagram(): Uint8Array {
    const out = new Uint8Array(KIND_BYTES + this.body.length);
    new DataView(out.buffer).setUint16(0, this.kind);
    out.set(this.body, 2);
    return out;
  }
}

/** Decodes one datagram; shorter than 2 bytes is malformed. */
export function decodeDatagram(data: Uint8Array): Envelope {
  if (data.length < KIND_BYTES) throw new MalformedEnvelopeError("datagram shorter than 2 bytes");
  const kind = (data[0] << 8) | data[1];
  return new Envelope(kind, data.slice(2));
}

/** Splits a byte stream into envelopes; keeps partial frames. */
export class FrameDecoder {
  private buf: Uint8Array = EMPTY;
  constructor(readonly maxFrameBytes = MAX_FRAME_BODY_BYTES) {}

  /** Appends bytes and returns every complete envelope. Throws MalformedEnvelopeError. */
  push(chunk: Uint8Array): Envelope[] {
    if (this.buf.length === 0) {
      this.buf = chunk;
    } else {
      const joined = new Uint8Array(this.buf.length + chunk.length);
      joined.set(this.buf);
      joined.set(chunk, this.buf.length);
      this.buf = joined;
    }
    const out: Envelope[] = [];
    let off = 0;
    while (this.buf.length - off >= LENGTH_PREFIX_BYTES) {
      const view = new DataView(this.buf.buffer, this.buf.byteOffset + off);
      const len = view.getUint32(0);
      if (len > this.maxFrameBytes) throw new MalformedEnvelopeError(`frame of ${len} bytes exceeds ${this.maxFrameBytes}`);
      if (len < KIND_BYTES) throw new MalformedEnvelopeError(`frame length ${len} is below 2`);
      if (this.buf.length - off < LENGTH_PREFIX_BYTES + len) break;
      const kind = view.getUint16(4);
      out.push(new Envelope(kind, this.buf.slice(off + 6, off + 4 + len)));
      off += 4 + len;
    }
    this.buf = off === this.buf.length ? EMPTY : this.buf.slice(off);
    return out;
  }

  /** Bytes held for an incomplete frame. */
  get buffered(): number {
    return this.buf.length;
  }
}
