// src/constants.ts
var KIND_POSITION = 1;
var KIND_RPC_REQUEST = 3;
var KIND_RPC_RESPONSE = 4;
var KIND_AUTH = 5;
var KIND_AUTH_RESULT = 6;
var KIND_TSYNC_HELLO = 7;
var KIND_TSYNC_SNAPSHOT = 8;
var KIND_TSYNC_ACK = 10;
var KIND_TSYNC_ROLE = 11;
var KIND_NA_PRESENCE = 16;
var KIND_NA_SPAWN = 17;
var KIND_NA_SPAWN_BATCH = 18;
var KIND_NA_DESPAWN = 19;
var KIND_NA_STATE = 20;
var KIND_ROOM_CREATE = 21;
var KIND_ROOM_JOIN = 22;
var KIND_ROOM_JOINED = 23;
var KIND_ROOM_LEAVE = 24;
var KIND_ROOM_MAP_READY = 25;
var KIND_MATCHMAKER_MATCHED = 26;
var KIND_NOTIFICATION = 27;
var KIND_CHAT_EVENT = 28;
var KIND_ROOM_REJECT = 33;
var AUTH_STATUS_REJECTED = 2;
var RPC_STATUS_OK = 0;
var LENGTH_PREFIX_BYTES = 4;
var KIND_BYTES = 2;
var MAX_FRAME_BODY_BYTES = 8 * 1024 * 1024;
var DEFAULT_TIMEOUT_MS = 1e4;

// src/errors.ts
var CitadelError = class extends Error {
  constructor(code, message) {
    super(message);
    this.name = "CitadelError";
    this.code = code;
  }
};
var WireError = class extends CitadelError {
  constructor(code, message) {
    super(code, `${code}: ${message}`);
    this.name = "WireError";
    this.code = code;
  }
};
var MalformedEnvelopeError = class extends CitadelError {
  constructor(message) {
    super("malformed_envelope", message);
    this.name = "MalformedEnvelopeError";
  }
};
var ConnectionClosedError = class extends CitadelError {
  constructor(message, closeCode, reason = "") {
    super("connection_closed", message);
    this.name = "ConnectionClosedError";
    this.closeCode = closeCode;
    this.reason = reason;
  }
};
var HandshakeRejectedError = class extends CitadelError {
  constructor(reasonClass) {
    const what = ["auth failed", "auth required", "protocol"][reasonClass] ?? "unknown reason";
    super("handshake_rejected", `handshake rejected: ${what} (reason ${reasonClass})`);
    this.name = "HandshakeRejectedError";
    this.reasonClass = reasonClass;
  }
};
var TimeoutError = class extends CitadelError {
  constructor(what, timeoutMs) {
    super("timeout", `${what} timed out after ${timeoutMs} ms`);
    this.name = "TimeoutError";
    this.timeoutMs = timeoutMs;
  }
};
var RpcTimeoutError = class extends TimeoutError {
  constructor(method, requestId, timeoutMs) {
    super(`rpc ${method}`, timeoutMs);
    this.name = "RpcTimeoutError";
    this.code = "rpc_timeout";
    this.requestId = requestId;
    this.method = method;
  }
};
var RpcError = class extends CitadelError {
  constructor(requestId, serverMessage) {
    super("rpc_error", `rpc ${requestId} failed: ${serverMessage}`);
    this.name = "RpcError";
    this.requestId = requestId;
    this.serverMessage = serverMessage;
  }
};

// src/bytes.ts
var utf8Decoder = new TextDecoder("utf-8", { fatal: true });
var utf8Encoder = new TextEncoder();
function decodeUtf8(bytes) {
  try {
    return utf8Decoder.decode(bytes);
  } catch {
    throw new WireError("utf8", "invalid UTF-8");
  }
}
function encodeUtf8(text) {
  return utf8Encoder.encode(text);
}
var EMPTY = new Uint8Array(0);
var ByteReader = class {
  constructor(bytes) {
    this.bytes = bytes;
    this.pos = 0;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  get remaining() {
    return this.bytes.length - this.pos;
  }
  need(n, what) {
    if (n > this.remaining) {
      throw new WireError("truncated", `${what}: need ${n} bytes at ${this.pos}, have ${this.remaining}`);
    }
  }
  take(n, what = "bytes") {
    this.need(n, what);
    const out = this.bytes.subarray(this.pos, this.pos + n);
    this.pos += n;
    return out;
  }
  u8(what = "u8") {
    this.need(1, what);
    return this.bytes[this.pos++];
  }
  u16(what = "u16") {
    this.need(2, what);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }
  u32(what = "u32") {
    this.need(4, what);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }
  u64(what = "u64") {
    this.need(8, what);
    const v = this.view.getBigUint64(this.pos);
    this.pos += 8;
    return v;
  }
  f32(what = "f32") {
    this.need(4, what);
    const v = this.view.getFloat32(this.pos);
    this.pos += 4;
    return v;
  }
  f32s(n, what = "f32") {
    const out = [];
    for (let i = 0; i < n; i++) out.push(this.f32(what));
    return out;
  }
  rest() {
    return this.take(this.remaining);
  }
};
var ByteWriter = class {
  constructor() {
    this.buf = new Uint8Array(64);
    this.view = new DataView(this.buf.buffer);
    this.length = 0;
  }
  reserve(n) {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v) {
    this.reserve(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
    return this;
  }
  u16(v) {
    this.reserve(2);
    this.view.setUint16(this.length, v);
    this.length += 2;
    return this;
  }
  u32(v) {
    this.reserve(4);
    this.view.setUint32(this.length, v);
    this.length += 4;
    return this;
  }
  u64(v) {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt.asUintN(64, BigInt(v)));
    this.length += 8;
    return this;
  }
  f32(v) {
    this.reserve(4);
    this.view.setFloat32(this.length, v);
    this.length += 4;
    return this;
  }
  f32s(vs) {
    for (const v of vs) this.f32(v);
    return this;
  }
  bytes(b) {
    this.reserve(b.length);
    this.buf.set(b, this.length);
    this.length += b.length;
    return this;
  }
  finish() {
    return this.buf.slice(0, this.length);
  }
};

// src/bits.ts
var BitReader = class {
  constructor(data) {
    this.data = data;
    this.pos = 0;
    this.total = data.length * 8;
  }
  get remaining() {
    return this.total - this.pos;
  }
  bit() {
    const b = this.data[this.pos >> 3] >> 7 - (this.pos & 7) & 1;
    this.pos++;
    return b;
  }
  need(n) {
    if (n > this.remaining) {
      throw new WireError("truncated", `read of ${n} bits at bit ${this.pos}, ${this.remaining} left`);
    }
  }
  /** Reads `n` (0..32) bits as an unsigned number. */
  read(n) {
    this.need(n);
    let v = 0;
    for (let i = 0; i < n; i++) v = v * 2 + this.bit();
    return v;
  }
  /** Reads `n` (0..64) bits as a bigint. */
  readBig(n) {
    this.need(n);
    let v = 0n;
    for (let i = 0; i < n; i++) v = v << 1n | BigInt(this.bit());
    return v;
  }
  readVarint() {
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
  readBytes(n) {
    this.need(n * 8);
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.read(8);
    return out;
  }
  /** Canonical end: fewer than 8 bits left, all zero. */
  finish() {
    const rem = this.remaining;
    if (rem >= 8) throw new WireError("trailing", `${rem} bits after the last field`);
    if (rem && this.read(rem) !== 0) throw new WireError("padding", "non-zero pad bit");
  }
};

// src/quant.ts
var round = (x) => Math.floor(x + 0.5);
function ceilLog2(n) {
  const v = BigInt(n);
  let bits = 0;
  while (1n << BigInt(bits) < v) bits++;
  return bits;
}
var ScalarCodec = class {
  constructor(min, max, valuesPerUnit) {
    this.valuesPerUnit = valuesPerUnit;
    this.min = Math.fround(min);
    this.max = Math.fround(max);
    if (!Number.isFinite(this.min) || !Number.isFinite(this.max) || !(this.max > this.min) || !(valuesPerUnit >= 1)) {
      throw new RangeError("invalid scalar codec parameters");
    }
    this.steps = Math.max(1, round((this.max - this.min) * valuesPerUnit));
    this.bits = ceilLog2(this.steps + 1);
  }
  code(value) {
    let v = Math.fround(value);
    if (Number.isNaN(v)) throw new RangeError("NaN cannot be quantized");
    v = Math.min(Math.max(v, this.min), this.max);
    return Math.min(round((v - this.min) * this.valuesPerUnit), this.steps);
  }
  value(code) {
    if (code > this.steps) throw new WireError("value", `scalar code ${code} > steps ${this.steps}`);
    return Math.fround(this.min + code / this.valuesPerUnit);
  }
  write(w, v) {
    w.write(this.code(v), this.bits);
  }
  read(r) {
    return this.value(r.read(this.bits));
  }
};
var Vector3Codec = class {
  constructor(min, max, valuesPerUnit) {
    this.axes = [0, 1, 2].map((i) => new ScalarCodec(min[i], max[i], valuesPerUnit));
  }
  get bits() {
    return this.axes.reduce((a, s) => a + s.bits, 0);
  }
  write(w, v) {
    this.axes.forEach((a, i) => a.write(w, v[i]));
  }
  read(r) {
    return [this.axes[0].read(r), this.axes[1].read(r), this.axes[2].read(r)];
  }
};
var QUAT_MODES = [9, 10, 15];
var SQRT_HALF = 0.7071067811865476;
var QUAT_RANGE = 2 * SQRT_HALF;
var IDENTITY = [0, 0, 0, 1];
function normalised(q) {
  const norm = Math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!Number.isFinite(norm) || norm < 1e-6) return [...IDENTITY];
  return q.map((c) => c / norm);
}
function quatDecodeParts(index, codes, n) {
  const maxc = 2 ** n - 1;
  const kept = codes.map((c) => (c & maxc) / maxc * QUAT_RANGE - SQRT_HALF);
  const dropped = Math.sqrt(Math.max(0, 1 - (kept[0] * kept[0] + kept[1] * kept[1] + kept[2] * kept[2])));
  const q = [...kept];
  q.splice(index & 3, 0, dropped);
  return normalised(q).map(Math.fround);
}
function readQuat(r, n) {
  const index = r.read(2);
  const codes = [r.read(n), r.read(n), r.read(n)];
  return quatDecodeParts(index, codes, n);
}

// src/envelope.ts
var Envelope = class {
  constructor(kind, body = EMPTY) {
    this.kind = kind;
    this.body = body;
    if (!Number.isInteger(kind) || kind < 0 || kind > 65535) throw new RangeError(`kind ${kind} is not a u16`);
  }
  /** The framed form. */
  encodeFrame() {
    const out = new Uint8Array(LENGTH_PREFIX_BYTES + KIND_BYTES + this.body.length);
    const view = new DataView(out.buffer);
    view.setUint32(0, KIND_BYTES + this.body.length);
    view.setUint16(4, this.kind);
    out.set(this.body, 6);
    return out;
  }
  /** The datagram form. */
  encodeDatagram() {
    const out = new Uint8Array(KIND_BYTES + this.body.length);
    new DataView(out.buffer).setUint16(0, this.kind);
    out.set(this.body, 2);
    return out;
  }
};
function decodeDatagram(data) {
  if (data.length < KIND_BYTES) throw new MalformedEnvelopeError("datagram shorter than 2 bytes");
  const kind = data[0] << 8 | data[1];
  return new Envelope(kind, data.slice(2));
}
var FrameDecoder = class {
  constructor(maxFrameBytes = MAX_FRAME_BODY_BYTES) {
    this.maxFrameBytes = maxFrameBytes;
    this.buf = EMPTY;
  }
  /** Appends bytes and returns every complete envelope. Throws MalformedEnvelopeError. */
  push(chunk) {
    if (this.buf.length === 0) {
      this.buf = chunk;
    } else {
      const joined = new Uint8Array(this.buf.length + chunk.length);
      joined.set(this.buf);
      joined.set(chunk, this.buf.length);
      this.buf = joined;
    }
    const out = [];
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
  get buffered() {
    return this.buf.length;
  }
};

// src/codecs/session.ts
function encodePosition(x, y) {
  const out = new Uint8Array(8);
  const v = new DataView(out.buffer);
  v.setFloat32(0, x, true);
  v.setFloat32(4, y, true);
  return out;
}
function encodeRpcRequest(requestId, method, payload = new Uint8Array(0)) {
  let m = encodeUtf8(method);
  if (m.length > 65535) {
    let end = 65535;
    while (end > 0 && (m[end] & 192) === 128) end--;
    m = m.subarray(0, end);
  }
  return new ByteWriter().u64(requestId).u16(m.length).bytes(m).bytes(payload).finish();
}
function decodeRpcResponse(body) {
  const r = new ByteReader(body);
  const requestId = r.u64("request id");
  const status = r.u8("status");
  return { requestId, status, payload: r.rest() };
}
function decodeAuthResult(body) {
  const r = new ByteReader(body);
  const status = r.u8("status");
  if (status === 0) return { status, userId: decodeUtf8(r.rest()), reasonClass: null };
  if (status === 1) return { status, userId: null, reasonClass: null };
  if (status === 2) return { status, userId: null, reasonClass: r.remaining ? r.u8() : 0 };
  throw new WireError("value", `AUTH_RESULT status ${status}`);
}

// src/codecs/tsync.ts
var DEFAULT_HELLO = {
  posMin: [-262144, -262144, -32768],
  posMax: [262144, 262144, 32768],
  posVpu: 8,
  velMin: [-32768, -32768, -32768],
  velMax: [32768, 32768, 32768],
  velVpu: 4,
  quatMode: 10,
  sendRateHz: 20,
  simRateHz: 60
};
function decodeTsyncHello(body) {
  if (body.length < 59) throw new WireError("truncated", "TSYNC_HELLO needs 59 bytes");
  const r = new ByteReader(body);
  const h = {
    posMin: r.f32s(3),
    posMax: r.f32s(3),
    posVpu: r.u32(),
    velMin: r.f32s(3),
    velMax: r.f32s(3),
    velVpu: r.u32(),
    quatMode: r.u8(),
    sendRateHz: r.u8(),
    simRateHz: r.u8()
  };
  if (!QUAT_MODES.includes(h.quatMode)) throw new WireError("value", `quat_mode ${h.quatMode}`);
  return h;
}
var TransformCodec = class {
  constructor(hello = DEFAULT_HELLO) {
    this.hello = hello;
    this.position = new Vector3Codec(hello.posMin, hello.posMax, hello.posVpu);
    this.velocity = new Vector3Codec(hello.velMin, hello.velMax, hello.velVpu);
    if (!QUAT_MODES.includes(hello.quatMode)) throw new RangeError("invalid quat mode");
    this.quatMode = hello.quatMode;
  }
};
function decodeSnapshot(body, codec) {
  const r = new BitReader(body);
  const serverTick = r.read(32);
  const snapshotId = r.read(32);
  const baseSnapshotId = r.read(32);
  const sendRateHz = r.read(8);
  const nRemoved = r.read(16);
  const nUpdates = r.read(16);
  if (nRemoved * 32 > r.remaining) throw new WireError("truncated", "removed ids overrun the body");
  const removed = [];
  for (let i = 0; i < nRemoved; i++) removed.push(r.read(32));
  if (nUpdates * 52 > r.remaining) throw new WireError("truncated", "updates overrun the body");
  const updates = [];
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
function encodeTsyncAck(a) {
  return new ByteWriter().u32(a.ackedSnapshotId).u32(a.history >>> 0).finish();
}
function decodeTsyncRole(body) {
  const r = new ByteReader(body);
  const x = { objectId: r.u32(), role: r.u8(), owner: r.u64(), ownershipEpoch: r.u32(), genEpoch: r.u16(), event: r.u8() };
  if (x.role > 3) throw new WireError("value", `role ${x.role}`);
  if (x.event > 3) throw new WireError("value", `event ${x.event}`);
  return x;
}

// src/codecs/actors.ts
var SPAWN_BYTES = 54;
function writeTransform(w, t) {
  w.f32s(t.position).f32s(t.rotation).f32s(t.velocity);
}
function readTransform(r) {
  return {
    position: r.f32s(3),
    rotation: r.f32s(4),
    velocity: r.f32s(3)
  };
}
function needAtLeast(body, n, what) {
  if (body.length < n) throw new WireError("truncated", `${what} needs ${n} bytes, got ${body.length}`);
}
function encodeActorPresence(p) {
  const w = new ByteWriter().u16(p.archetypeId);
  writeTransform(w, p.transform);
  return w.finish();
}
function readSpawn(r) {
  return { objectId: r.u32(), archetypeId: r.u16(), owner: r.u64(), transform: readTransform(r) };
}
function decodeActorSpawn(body) {
  needAtLeast(body, SPAWN_BYTES, "NA_SPAWN");
  return readSpawn(new ByteReader(body));
}
function decodeActorSpawnBatch(body) {
  const r = new ByteReader(body);
  const count = r.u16("count");
  if (r.remaining < SPAWN_BYTES * count) throw new WireError("truncated", `${count} spawns overrun the body`);
  const out = [];
  for (let i = 0; i < count; i++) out.push(readSpawn(r));
  return out;
}
function decodeActorDespawn(body) {
  return new ByteReader(body).u32("object id");
}
function encodeActorState(s) {
  const w = new ByteWriter().u32(s.objectId);
  writeTransform(w, s.transform);
  return w.finish();
}

// src/codecs/rooms.ts
function encodeRoomCreate(params2) {
  const p = typeof params2 === "string" ? encodeUtf8(params2) : params2;
  if (p.length > 65535) throw new RangeError("room create params exceed 65535 bytes");
  return new ByteWriter().u16(p.length).bytes(p).finish();
}
function encodeRoomId(roomId) {
  return new ByteWriter().u64(roomId).finish();
}
function decodeRoomId(body) {
  return new ByteReader(body).u64("room id");
}
function readString(r, what) {
  return decodeUtf8(r.take(r.u16(`${what} length`), what));
}
function decodeRoomJoined(body) {
  const r = new ByteReader(body);
  const roomId = r.u64("room id");
  const map = readString(r, "map");
  const mode = readString(r, "mode");
  return { roomId, map, mode };
}
function decodeRoomReject(body) {
  const r = new ByteReader(body);
  return { requestKind: r.u16("request kind"), reason: readString(r, "reason") };
}

// src/json.ts
var JsonSyntaxError = class extends Error {
};
var MAX_DEPTH = 64;
function parseJson(text) {
  let i = 0;
  const fail = (what) => {
    throw new JsonSyntaxError(`${what} at offset ${i}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === " " || text[i] === "	" || text[i] === "\n" || text[i] === "\r")) i++;
  };
  const str = () => {
    i++;
    let out2 = "";
    for (; ; ) {
      if (i >= text.length) fail("unterminated string");
      const c = text[i++];
      if (c === '"') return out2;
      if (c === "\\") {
        const e = text[i++];
        const simple = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "	" };
        if (e in simple) out2 += simple[e];
        else if (e === "u") {
          const hex = text.slice(i, i + 4);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) fail("bad \\u escape");
          out2 += String.fromCharCode(parseInt(hex, 16));
          i += 4;
        } else fail("bad escape");
      } else if (c < " ") fail("control character in string");
      else out2 += c;
    }
  };
  const num = () => {
    const m = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/.exec(text.slice(i, i + 400));
    if (!m) return fail("bad number");
    i += m[0].length;
    if (!m[2] && !m[3]) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    return Number(m[0]);
  };
  const value = (depth) => {
    if (depth > MAX_DEPTH) fail("nesting too deep");
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      const obj = {};
      ws();
      if (text[i] === "}") {
        i++;
        return obj;
      }
      for (; ; ) {
        ws();
        if (text[i] !== '"') fail("expected key");
        const key = str();
        if (Object.prototype.hasOwnProperty.call(obj, key)) fail(`duplicate key "${key}"`);
        ws();
        if (text[i++] !== ":") fail("expected ':'");
        Object.defineProperty(obj, key, { value: value(depth + 1), enumerable: true, writable: true, configurable: true });
        ws();
        const sep = text[i++];
        if (sep === "}") return obj;
        if (sep !== ",") fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      i++;
      const arr = [];
      ws();
      if (text[i] === "]") {
        i++;
        return arr;
      }
      for (; ; ) {
        arr.push(value(depth + 1));
        ws();
        const sep = text[i++];
        if (sep === "]") return arr;
        if (sep !== ",") fail("expected ',' or ']'");
      }
    }
    if (c === '"') return str();
    if (text.startsWith("true", i)) {
      i += 4;
      return true;
    }
    if (text.startsWith("false", i)) {
      i += 5;
      return false;
    }
    if (text.startsWith("null", i)) {
      i += 4;
      return null;
    }
    return num();
  };
  const out = value(0);
  ws();
  if (i !== text.length) fail("trailing characters");
  return out;
}
function stringifyJson(value) {
  const marker = "@@citadel-bigint@@";
  const text = JSON.stringify(value, (_k, v) => typeof v === "bigint" ? `${marker}${v}` : v);
  return text.replace(new RegExp(`"${marker}(-?[0-9]+)"`, "g"), "$1");
}

// src/codecs/services.ts
var isU64 = (v) => typeof v === "number" && Number.isInteger(v) && v >= 0 || typeof v === "bigint" && v >= 0n && v < 1n << 64n;
var isI64 = (v) => typeof v === "number" && Number.isInteger(v) || typeof v === "bigint" && v >= -(1n << 63n) && v < 1n << 63n;
var isStr = (v) => typeof v === "string";
var isBool = (v) => typeof v === "boolean";
var isObj = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
function bad(message) {
  throw new WireError("json", message);
}
function check(obj, spec, closed, what) {
  if (!isObj(obj)) bad(`${what} is not an object`);
  const names = new Set(spec.map((s) => s[0]));
  if (closed) {
    for (const k of Object.keys(obj)) if (!names.has(k)) bad(`unknown field ${what}.${k}`);
  }
  for (const [name, pred, required] of spec) {
    if (!(name in obj)) {
      if (required) bad(`missing field ${what}.${name}`);
      continue;
    }
    if (!pred(obj[name])) bad(`wrong type for ${what}.${name}`);
  }
  return obj;
}
function parseBody(body) {
  try {
    return parseJson(decodeUtf8(body));
  } catch (e) {
    return bad(e instanceof Error ? e.message : "invalid JSON");
  }
}
var asBig = (v) => BigInt(v);
var K26 = [
  ["ticket_id", isStr, true],
  ["match_id", isU64, true],
  ["join_token", isStr, true],
  ["expires_at", isU64, true]
];
function decodeMatchmakerMatched(body) {
  return check(parseBody(body), K26, false, "matched");
}
var K27 = [
  ["id", isStr, true],
  ["code", isI64, true],
  ["subject", isStr, true],
  ["content", () => true, true],
  ["sender", isStr, true],
  ["created_at_unix_ms", isU64, true],
  ["read_at_unix_ms", (v) => v === null || isU64(v), true]
];
function decodeNotification(body) {
  return check(parseBody(body), K27, false, "notification");
}
var PRESENCE = [
  ["presence_id", isStr, true],
  ["user_id", isStr, true]
];
var MESSAGE = [
  ["id", isU64, true],
  ["sender", isStr, true],
  ["content", isStr, true],
  ["created_at_unix_ms", isU64, true],
  ["updated_at_unix_ms", isU64, true],
  ["revision", isU64, true],
  ["last_event_id", isU64, true],
  ["deleted", isBool, true]
];
var isPresence = (v) => !!check(v, PRESENCE, true, "presence");
var isMessage = (v) => !!check(v, MESSAGE, true, "message");
var COMMON = [
  ["version", isU64, true],
  ["type", isStr, true],
  ["channel_id", isStr, true]
];
var TYPES = {
  "presence.join": [
    ["channel_type", (v) => v === "direct" || v === "group" || v === "room", true],
    ["presence", isPresence, true]
  ],
  "presence.leave": [["presence", isPresence, true]],
  typing: [
    ["presence", isPresence, true],
    ["typing", isBool, true],
    ["expires_at", isU64, true]
  ],
  "message.create": [
    ["event_id", isU64, true],
    ["message", isMessage, true]
  ],
  "message.update": [
    ["event_id", isU64, true],
    ["message", isMessage, true]
  ],
  "message.remove": [
    ["event_id", isU64, true],
    ["message", isMessage, true]
  ],
  "access.revoked": [["presence", isPresence, true]],
  resync_required: [
    ["watermark_event_id", isU64, true],
    ["scopes", (v) => Array.isArray(v) && v.every((s) => typeof s === "string"), false]
  ]
};
function decodeChatEventStrict(body) {
  const obj = check(parseBody(body), COMMON, false, "chat event");
  if (obj.version !== 1) bad(`unknown version ${String(obj.version)}`);
  const type = obj.type;
  if (!Object.prototype.hasOwnProperty.call(TYPES, type)) bad(`unknown type ${type}`);
  check(obj, [...COMMON, ...TYPES[type]], true, "chat event");
  if (type.startsWith("message.")) {
    const m = obj.message;
    if (asBig(obj.event_id) === 0n) bad("event_id 0");
    if (asBig(m.id) === 0n || asBig(m.revision) === 0n || asBig(m.last_event_id) === 0n) bad("zero id, revision or last_event_id");
    if (asBig(m.updated_at_unix_ms) < asBig(m.created_at_unix_ms)) bad("updated before created");
    if (asBig(m.last_event_id) !== asBig(obj.event_id)) bad("message.last_event_id differs from event_id");
    if (type === "message.remove") {
      if (m.deleted !== true || m.content !== "") bad("message.remove must carry a tombstone");
    } else if (m.deleted) bad(`${type} with a deleted message`);
  }
  return obj;
}
function decodeChatEvent(body) {
  try {
    return decodeChatEventStrict(body);
  } catch {
    return null;
  }
}

// src/transport.ts
var BaseTransport = class {
  constructor() {
    this.handlers = null;
    this.pending = [];
    this.done = false;
    this.bytesSent = 0;
    this.bytesReceived = 0;
  }
  setHandlers(h) {
    this.handlers = h;
    for (const p of this.pending.splice(0)) p();
  }
  emit(env, path) {
    if (this.done) return;
    if (this.handlers) this.handlers.envelope(env, path);
    else this.pending.push(() => this.handlers.envelope(env, path));
  }
  finish(info) {
    if (this.done) return;
    this.done = true;
    if (this.handlers) this.handlers.closed(info);
    else this.pending.push(() => this.handlers.closed(info));
  }
  get finished() {
    return this.done;
  }
};
function toBytes(data) {
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return null;
}
var WebSocketTransport = class _WebSocketTransport extends BaseTransport {
  constructor(ws) {
    super();
    this.ws = ws;
    this.kind = "websocket";
    this.hasDatagrams = false;
    this.decoder = new FrameDecoder();
  }
  /** Opens `url`; rejects with ConnectionClosedError or TimeoutError. */
  static open(url, impl, timeoutMs) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new impl(url);
      } catch (e) {
        reject(new ConnectionClosedError(`cannot open ${url}: ${e.message}`));
        return;
      }
      ws.binaryType = "arraybuffer";
      const timer = setTimeout(() => {
        ws.onopen = ws.onclose = ws.onerror = null;
        try {
          ws.close();
        } catch {
        }
        reject(new TimeoutError(`connect to ${url}`, timeoutMs));
      }, timeoutMs);
      ws.onerror = () => {
      };
      ws.onclose = (ev) => {
        clearTimeout(timer);
        reject(new ConnectionClosedError(`connection to ${url} failed`, ev.code, ev.reason ?? ""));
      };
      ws.onopen = () => {
        clearTimeout(timer);
        const t = new _WebSocketTransport(ws);
        ws.onmessage = (ev) => t.onMessage(ev.data);
        ws.onclose = (ev) => t.finish({ code: ev.code, reason: ev.reason ?? "" });
        ws.onerror = () => {
        };
        resolve(t);
      };
    });
  }
  onMessage(data) {
    const bytes = toBytes(data);
    if (!bytes) {
      this.fail(new MalformedEnvelopeError("text message on the realtime socket"));
      return;
    }
    this.bytesReceived += bytes.length;
    let envs;
    try {
      envs = this.decoder.push(bytes);
    } catch (e) {
      this.fail(e);
      return;
    }
    for (const env of envs) this.emit(env, "reliable");
  }
  fail(error) {
    this.finish({ code: 1002, reason: error.message, error });
    try {
      this.ws.close(1002, "malformed frame");
    } catch {
    }
  }
  sendReliable(env) {
    if (this.finished || this.ws.readyState !== 1) throw new ConnectionClosedError("send on a closed connection");
    const frame = env.encodeFrame();
    this.bytesSent += frame.length;
    this.ws.send(frame);
  }
  sendUnreliable(env) {
    this.sendReliable(env);
  }
  close(code = 1e3, reason = "") {
    try {
      this.ws.close(code, reason);
    } catch {
    }
    this.finish({ code, reason: reason || "closed by the client" });
  }
};
var WebTransportTransport = class _WebTransportTransport extends BaseTransport {
  constructor(wt, reliable, datagrams) {
    super();
    this.wt = wt;
    this.reliable = reliable;
    this.datagrams = datagrams;
    this.kind = "webtransport";
    this.hasDatagrams = true;
  }
  static async open(url, impl, hashes, timeoutMs) {
    let wt;
    try {
      wt = new impl(url, hashes && hashes.length ? { serverCertificateHashes: hashes } : void 0);
    } catch (e) {
      throw new ConnectionClosedError(`cannot open ${url}: ${e.message}`);
    }
    wt.closed.catch(() => {
    });
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new TimeoutError(`connect to ${url}`, timeoutMs)), timeoutMs);
    });
    try {
      await Promise.race([wt.ready, timeout]);
      const bidi = await Promise.race([wt.createBidirectionalStream(), timeout]);
      const t = new _WebTransportTransport(wt, bidi.writable.getWriter(), wt.datagrams.writable.getWriter());
      t.pump();
      return t;
    } catch (e) {
      try {
        wt.close();
      } catch {
      }
      if (e instanceof TimeoutError) throw e;
      throw new ConnectionClosedError(`WebTransport session to ${url} failed: ${e?.message ?? e}`);
    } finally {
      clearTimeout(timer);
    }
  }
  pump() {
    void this.readStreams();
    void this.readDatagrams();
    this.wt.closed.then(
      (info) => this.finish({ code: info?.closeCode, reason: info?.reason ?? "session closed" }),
      (e) => this.finish({ reason: `session failed: ${e?.message ?? e}` })
    );
  }
  async readStreams() {
    const streams = this.wt.incomingUnidirectionalStreams.getReader();
    try {
      for (; ; ) {
        const { value: stream, done } = await streams.read();
        if (done || !stream) return;
        const reader = stream.getReader();
        const decoder = new FrameDecoder();
        for (; ; ) {
          const { value, done: end } = await reader.read();
          if (end) break;
          this.bytesReceived += value.length;
          for (const env of decoder.push(value)) this.emit(env, "reliable");
        }
        if (decoder.buffered) throw new MalformedEnvelopeError("stream ended inside a frame");
      }
    } catch (e) {
      if (e instanceof MalformedEnvelopeError) {
        this.finish({ reason: e.message, error: e });
        this.close(1002, "malformed frame");
      }
    }
  }
  async readDatagrams() {
    const reader = this.wt.datagrams.readable.getReader();
    try {
      for (; ; ) {
        const { value, done } = await reader.read();
        if (done) return;
        this.bytesReceived += value.length;
        let env;
        try {
          env = decodeDatagram(value);
        } catch {
          continue;
        }
        this.emit(env, "datagram");
      }
    } catch {
    }
  }
  sendReliable(env) {
    if (this.finished) throw new ConnectionClosedError("send on a closed connection");
    const frame = env.encodeFrame();
    this.bytesSent += frame.length;
    this.reliable.write(frame).catch(() => {
    });
  }
  sendUnreliable(env) {
    if (this.finished) throw new ConnectionClosedError("send on a closed connection");
    const dg = env.encodeDatagram();
    this.bytesSent += dg.length;
    this.datagrams.write(dg).catch(() => {
    });
  }
  close(code = 0, reason = "") {
    try {
      this.wt.close({ closeCode: code, reason });
    } catch {
    }
    this.finish({ code, reason: reason || "closed by the client" });
  }
};
function webTransportCertificateHash(base64) {
  const bin = atob(base64);
  const value = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) value[i] = bin.charCodeAt(i);
  if (value.length !== 32) throw new RangeError("a SHA-256 certificate hash is 32 bytes");
  return { algorithm: "sha-256", value };
}

// src/chat.ts
var ChatEventError = class extends CitadelError {
  constructor(message) {
    super("chat_cursor", message);
    this.name = "ChatEventError";
  }
};

// src/snapshots.ts
var RING_CAPACITY = 64;
var SAMPLES_PER_OBJECT = 32;
var MAX_EXTRAPOLATION_S = 0.25;
var AckWindow = class {
  constructor() {
    this.latest = 0;
    this.history = 0;
  }
  ack(id) {
    if (id === 0) return;
    if (this.latest === 0) {
      this.latest = id;
      this.history = 0;
      return;
    }
    if (id > this.latest) {
      const d = id - this.latest;
      this.history = d < 32 ? (this.history << d | 1 << d - 1) >>> 0 : d === 32 ? 2147483648 : 0;
      this.latest = id;
    } else if (id < this.latest) {
      const back = this.latest - id;
      if (back <= 32) this.history = (this.history | 1 << back - 1) >>> 0;
    }
  }
};
var SnapshotReceiver = class {
  constructor(codec) {
    this.codec = codec;
    this.ring = [];
    this.lastApplied = null;
    this.window = new AckWindow();
    this.ackPending = false;
    this.ownerSeq = /* @__PURE__ */ new Map();
  }
  latest() {
    return this.ring.length ? this.ring[this.ring.length - 1][1] : null;
  }
  ownerAck(objectId) {
    return this.ownerSeq.get(objectId);
  }
  /** Applies one kind-8 body; returns the applied state or why it was discarded. */
  handleSnapshot(body) {
    let snap;
    try {
      snap = decodeSnapshot(body, this.codec);
    } catch {
      return "malformed";
    }
    if (this.lastApplied !== null && snap.snapshotId <= this.lastApplied) return "stale";
    let state2;
    if (snap.baseSnapshotId === 0) state2 = /* @__PURE__ */ new Map();
    else {
      const base = this.ring.find(([id]) => id === snap.baseSnapshotId);
      if (!base) return "unknown_base";
      state2 = new Map([...base[1]].map(([id, v]) => [id, { ...v }]));
    }
    for (const id of snap.removed) state2.delete(id);
    for (const u of snap.updates) {
      const view = state2.get(u.objectId);
      if (view && view.genEpoch === u.genEpoch) {
        if (u.position) view.position = u.position;
        if (u.rotation) view.rotation = u.rotation;
        if (u.velocity) view.velocity = u.velocity;
      } else if (u.position && u.rotation) {
        state2.set(u.objectId, { genEpoch: u.genEpoch, position: u.position, rotation: u.rotation, velocity: u.velocity });
      } else {
        continue;
      }
      if (u.lastInputSeq !== null) this.ownerSeq.set(u.objectId, Math.max(this.ownerSeq.get(u.objectId) ?? 0, u.lastInputSeq));
    }
    const gap = this.lastApplied === null ? 0 : Math.max(0, snap.snapshotId - this.lastApplied - 1);
    this.lastApplied = snap.snapshotId;
    this.ring.push([snap.snapshotId, state2]);
    while (this.ring.length > RING_CAPACITY) this.ring.shift();
    this.window.ack(snap.snapshotId);
    this.ackPending = true;
    return { snapshotId: snap.snapshotId, serverTick: snap.serverTick, sendRateHz: snap.sendRateHz, state: state2, gap };
  }
  /** The acknowledgement to send, once per applied batch. */
  pollAck() {
    if (!this.ackPending) return null;
    this.ackPending = false;
    return { ackedSnapshotId: this.window.latest, history: this.window.history };
  }
};
var Interpolator = class {
  constructor(simRateHz = 60) {
    this.sendRateHz = 20;
    this.multiplier = 2.5;
    this.buffers = /* @__PURE__ */ new Map();
    this.simRateHz = Math.max(1, simRateHz);
  }
  handleApplied(applied) {
    if (applied.sendRateHz > 0) this.sendRateHz = applied.sendRateHz;
    this.multiplier = applied.gap > 0 ? Math.min(this.multiplier + 0.5 * applied.gap, 2.5) : Math.max(this.multiplier - 0.02, 1.5);
    for (const id of [...this.buffers.keys()]) if (!applied.state.has(id)) this.buffers.delete(id);
    for (const [id, view] of applied.state) {
      let buf = this.buffers.get(id);
      if (!buf) this.buffers.set(id, buf = []);
      if (buf.length && buf[buf.length - 1].tick >= applied.serverTick) continue;
      buf.push({ tick: applied.serverTick, position: view.position, rotation: view.rotation, velocity: view.velocity });
      while (buf.length > SAMPLES_PER_OBJECT) buf.shift();
    }
  }
  /** Render delay in ticks. */
  delayTicks() {
    const interval = 1 / this.sendRateHz;
    const delay = Math.min(Math.max(this.multiplier * interval, 1.5 * interval), 0.4);
    return delay * this.simRateHz;
  }
  renderTick(newestTick) {
    return newestTick - this.delayTicks();
  }
  sample(tick) {
    const out = /* @__PURE__ */ new Map();
    for (const [id, buf] of this.buffers) {
      const r = this.sampleOne(buf, tick);
      if (r) out.set(id, r);
    }
    return out;
  }
  sampleOne(buf, tick) {
    if (!buf.length) return null;
    const first = buf[0];
    const last = buf[buf.length - 1];
    if (tick <= first.tick) return { position: first.position, rotation: first.rotation };
    if (tick >= last.tick) {
      const ahead = Math.min((tick - last.tick) / this.simRateHz, MAX_EXTRAPOLATION_S);
      const v = last.velocity ?? [0, 0, 0];
      return { position: [0, 1, 2].map((i) => Math.fround(last.position[i] + v[i] * ahead)), rotation: last.rotation };
    }
    for (let k = 0; k + 1 < buf.length; k++) {
      const a = buf[k];
      const b = buf[k + 1];
      if (a.tick <= tick && tick <= b.tick) {
        const spanTicks = Math.max(b.tick - a.tick, 1);
        const t = (tick - a.tick) / spanTicks;
        const spanS = spanTicks / this.simRateHz;
        const position = a.velocity && b.velocity ? hermite(a.position, b.position, a.velocity, b.velocity, t, spanS) : [0, 1, 2].map((i) => Math.fround(a.position[i] + (b.position[i] - a.position[i]) * t));
        return { position, rotation: slerp(a.rotation, b.rotation, t) };
      }
    }
    return null;
  }
};
function hermite(p0, p1, v0, v1, t, spanS) {
  const t2 = t * t;
  const t3 = t2 * t;
  const h00 = 2 * t3 - 3 * t2 + 1;
  const h10 = t3 - 2 * t2 + t;
  const h01 = -2 * t3 + 3 * t2;
  const h11 = t3 - t2;
  return [0, 1, 2].map((i) => Math.fround(h00 * p0[i] + h10 * v0[i] * spanS + h01 * p1[i] + h11 * v1[i] * spanS));
}
function slerp(a, bIn, t) {
  let b = [...bIn];
  let dot2 = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
  if (dot2 < 0) {
    b = b.map((c) => -c);
    dot2 = -dot2;
  }
  let out;
  if (dot2 > 0.9995) out = [0, 1, 2, 3].map((i) => a[i] + (b[i] - a[i]) * t);
  else {
    const theta = Math.acos(Math.min(Math.max(dot2, -1), 1));
    const s = Math.sin(theta);
    const wa = Math.sin((1 - t) * theta) / s;
    const wb = Math.sin(t * theta) / s;
    out = [0, 1, 2, 3].map((i) => a[i] * wa + b[i] * wb);
  }
  const norm = Math.sqrt(out.reduce((acc, c) => acc + c * c, 0));
  if (!Number.isFinite(norm) || norm < 1e-9) return [0, 0, 0, 1];
  return out.map((c) => Math.fround(c / norm));
}

// src/actors.ts
var IDENTITY_TRANSFORM = { position: [0, 0, 0], rotation: [0, 0, 0, 1], velocity: [0, 0, 0] };
var ActorView = class {
  constructor() {
    this.hello = null;
    this.receiver = null;
    this.interp = new Interpolator(60);
    this.actors = /* @__PURE__ */ new Map();
    this.localObject = null;
    this.newestTick = 0;
    this.pendingAck = null;
    this.expectingOwn = false;
    this.held = [];
    /** Snapshots applied (for rate displays). */
    this.snapshotsApplied = 0;
  }
  static helloEnvelope() {
    return new Envelope(KIND_TSYNC_HELLO);
  }
  /** The presence announcement; the next spawn before the batch is ours. */
  announce(archetypeId, transform = IDENTITY_TRANSFORM) {
    this.expectingOwn = this.localObject === null;
    return new Envelope(KIND_NA_PRESENCE, encodeActorPresence({ archetypeId, transform }));
  }
  static stateEnvelope(objectId, transform) {
    return new Envelope(KIND_NA_STATE, encodeActorState({ objectId, transform }));
  }
  latest() {
    return this.receiver?.latest() ?? null;
  }
  /** Every object's transform rendered in the past by the adaptive delay. */
  render() {
    return this.interp.sample(this.interp.renderTick(this.newestTick));
  }
  /** The TSYNC_ACK to send after the last applied snapshot. */
  pollAck() {
    const a = this.pendingAck;
    this.pendingAck = null;
    return a;
  }
  handleEnvelope(env) {
    const events = [];
    try {
      switch (env.kind) {
        case KIND_TSYNC_HELLO: {
          const hello = decodeTsyncHello(env.body);
          const codec = new TransformCodec(hello);
          this.receiver = new SnapshotReceiver(codec);
          this.interp = new Interpolator(hello.simRateHz);
          this.hello = hello;
          events.push({ type: "negotiated", hello });
          break;
        }
        case KIND_TSYNC_SNAPSHOT: {
          if (!this.receiver) break;
          const applied = this.receiver.handleSnapshot(env.body);
          if (typeof applied === "string") break;
          this.newestTick = applied.serverTick;
          this.snapshotsApplied++;
          this.interp.handleApplied(applied);
          const ack = this.receiver.pollAck();
          if (ack) this.pendingAck = new Envelope(KIND_TSYNC_ACK, encodeTsyncAck(ack));
          events.push({ type: "snapshot", applied });
          break;
        }
        case KIND_NA_SPAWN: {
          const spawn = decodeActorSpawn(env.body);
          if (this.expectingOwn) this.held.push(spawn);
          else events.push(this.spawned(spawn, false));
          break;
        }
        case KIND_NA_SPAWN_BATCH: {
          const batch = decodeActorSpawnBatch(env.body);
          if (this.expectingOwn) {
            this.expectingOwn = false;
            const held = this.held.splice(0);
            held.forEach((s, i) => {
              const own = i === held.length - 1;
              if (own) this.localObject = s.objectId;
              events.push(this.spawned(s, own));
            });
          }
          for (const s of batch) events.push(this.spawned(s, false));
          break;
        }
        case KIND_NA_DESPAWN: {
          const id = decodeActorDespawn(env.body);
          if (this.actors.delete(id)) events.push({ type: "despawned", objectId: id });
          if (this.localObject === id) this.localObject = null;
          break;
        }
        case KIND_TSYNC_ROLE:
          events.push({ type: "role", role: decodeTsyncRole(env.body) });
          break;
      }
    } catch {
    }
    return events;
  }
  spawned(s, own) {
    const actor = {
      objectId: s.objectId,
      archetypeId: s.archetypeId,
      owner: s.owner,
      isLocal: own || this.localObject === s.objectId,
      spawn: s.transform
    };
    this.actors.set(s.objectId, actor);
    return { type: "spawned", actor };
  }
};

// src/client.ts
var RoomRejectedError = class extends CitadelError {
  constructor(requestKind, serverReason) {
    super("room_rejected", `room request refused: ${serverReason}`);
    this.requestKind = requestKind;
    this.serverReason = serverReason;
    this.name = "RoomRejectedError";
  }
};
function payloadBytes(payload) {
  if (payload === void 0) return EMPTY;
  return typeof payload === "string" ? encodeUtf8(payload) : payload;
}
function quiet(p) {
  p.catch(() => {
  });
  return p;
}
var CitadelClient = class _CitadelClient {
  constructor(transport, opts) {
    this.transport = transport;
    this.currentRoom = null;
    /** Participant-visible user id after an authenticated handshake. */
    this.userId = null;
    this.closeInfo = null;
    this.handlers = /* @__PURE__ */ new Map();
    this.anyHandlers = /* @__PURE__ */ new Set();
    this.waiters = /* @__PURE__ */ new Set();
    this.rpcs = /* @__PURE__ */ new Map();
    this.nextRequestId = 1n;
    // ---- transform sync and actors (docs/actors-and-sync.md) -------------
    /** The actor view once transform sync is enabled. */
    this.actorView = null;
    this.actorListeners = /* @__PURE__ */ new Set();
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.diag = opts.diagnostics ?? (() => {
    });
    this.whenClosed = new Promise((r) => this.resolveClosed = r);
    transport.setHandlers({
      envelope: (env) => this.dispatch(env),
      closed: (info) => this.onClosed(info)
    });
    this.on(KIND_ROOM_JOINED, (body) => {
      try {
        this.currentRoom = decodeRoomJoined(body);
      } catch {
        this.diag("malformed ROOM_JOINED ignored");
      }
    });
    this.on(KIND_ROOM_LEAVE, (body) => {
      try {
        if (this.currentRoom && decodeRoomId(body) === this.currentRoom.roomId) this.currentRoom = null;
      } catch {
        this.diag("malformed ROOM_LEAVE ignored");
      }
    });
  }
  /** Opens a WebSocket, e.g. `ws://127.0.0.1:7352/`. */
  static async connect(url, opts = {}) {
    const impl = opts.WebSocket ?? globalThis.WebSocket;
    if (!impl) throw new CitadelError("no_websocket", "no WebSocket implementation: pass opts.WebSocket (e.g. the ws package)");
    const t = await WebSocketTransport.open(url, impl, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new _CitadelClient(t, opts);
  }
  /** Opens WebTransport, e.g. `https://127.0.0.1:7353/citadel`. */
  static async connectWebTransport(url, opts = {}) {
    const impl = opts.WebTransport ?? globalThis.WebTransport;
    if (!impl) throw new CitadelError("no_webtransport", "this runtime has no WebTransport");
    let hashes = opts.serverCertificateHashes;
    if (!hashes && opts.serverCertificateHashBase64) hashes = [webTransportCertificateHash(opts.serverCertificateHashBase64)];
    const t = await WebTransportTransport.open(url, impl, hashes, opts.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return new _CitadelClient(t, opts);
  }
  /**
   * WebTransport first (URL and hash from `GET /v1/webtransport` when
   * `httpBaseUrl` is given), WebSocket if that fails before the session is
   * ready.
   */
  static async connectAuto(endpoints, opts = {}) {
    const diag = opts.diagnostics ?? (() => {
    });
    let wtUrl = endpoints.webTransportUrl;
    let hashB64 = endpoints.serverCertificateHashBase64 ?? opts.serverCertificateHashBase64;
    const hasWt = !!(opts.WebTransport ?? globalThis.WebTransport);
    if (hasWt && !wtUrl && endpoints.httpBaseUrl) {
      try {
        const info = await fetchWebTransportInfo(endpoints.httpBaseUrl);
        wtUrl = info.url;
        hashB64 = hashB64 ?? info.certificateHashBase64 ?? void 0;
      } catch (e) {
        diag(`webtransport info unavailable: ${e.message}`);
      }
    }
    if (hasWt && wtUrl) {
      try {
        return await _CitadelClient.connectWebTransport(wtUrl, { ...opts, serverCertificateHashBase64: hashB64 });
      } catch (e) {
        diag(`webtransport failed, falling back to websocket: ${e.message}`);
      }
    }
    if (!endpoints.webSocketUrl) throw new ConnectionClosedError("no transport available: WebTransport failed and no webSocketUrl was given");
    return _CitadelClient.connect(endpoints.webSocketUrl, opts);
  }
  get transportKind() {
    return this.transport.kind;
  }
  get isOpen() {
    return this.closeInfo === null;
  }
  /** True once the connection closed (see `whenClosed` and `closeInfo`). */
  get closed() {
    return this.closeInfo !== null;
  }
  /** Why the connection closed (null while open). */
  get closedInfo() {
    return this.closeInfo;
  }
  /** Bytes sent and received on this connection. */
  get bytesSent() {
    return this.transport.bytesSent;
  }
  get bytesReceived() {
    return this.transport.bytesReceived;
  }
  // ---- handshake -------------------------------------------------------
  handshakeGuest(opts = {}) {
    return this.handshake("", opts);
  }
  handshakeToken(token, opts = {}) {
    if (typeof token !== "string" || token.length === 0) {
      return Promise.reject(new TypeError("handshakeToken needs a non-empty token (use handshakeGuest for a guest)"));
    }
    return this.handshake(token, opts);
  }
  async handshake(token, opts) {
    const wait = this.waitForKind(KIND_AUTH_RESULT, opts.timeoutMs);
    this.send(KIND_AUTH, encodeUtf8(token));
    const body = await wait;
    let r;
    try {
      r = decodeAuthResult(body);
    } catch (e) {
      const err = new MalformedEnvelopeError(`AUTH_RESULT: ${e.message}`);
      this.fail(err);
      throw err;
    }
    if (r.status === AUTH_STATUS_REJECTED && opts.throwOnReject) throw new HandshakeRejectedError(r.reasonClass ?? 0);
    this.userId = r.userId;
    return r;
  }
  // ---- sending and handlers -------------------------------------------
  /** Sends one envelope; `reliable:false` is a datagram on WebTransport. */
  send(kind, body = EMPTY, opts = {}) {
    this.sendEnvelope(new Envelope(kind, payloadBytes(body)), opts);
  }
  sendEnvelope(env, opts = {}) {
    if (this.closeInfo) throw new ConnectionClosedError(`send on a closed connection: ${this.closeInfo.reason}`, this.closeInfo.code, this.closeInfo.reason);
    if (opts.reliable === false && this.transport.hasDatagrams) this.transport.sendUnreliable(env);
    else this.transport.sendReliable(env);
  }
  /** Kind 1 relay of (x, y); unreliable by default. */
  sendPosition(x, y, opts = { reliable: false }) {
    this.send(KIND_POSITION, encodePosition(x, y), opts);
  }
  /** Per-kind handler `(payload, env)`; returns an unsubscribe function. */
  on(kind, handler) {
    let set = this.handlers.get(kind);
    if (!set) this.handlers.set(kind, set = /* @__PURE__ */ new Set());
    set.add(handler);
    return () => this.off(kind, handler);
  }
  off(kind, handler) {
    this.handlers.get(kind)?.delete(handler);
  }
  /** Every inbound envelope except correlated RPC responses. */
  onAny(handler) {
    this.anyHandlers.add(handler);
    return () => this.anyHandlers.delete(handler);
  }
  /** Resolves with the body of the next envelope of `kind`. */
  waitForKind(kind, timeoutMs = this.timeoutMs) {
    return quiet(
      new Promise((resolve, reject) => {
        if (this.closeInfo) {
          reject(this.closedError());
          return;
        }
        const waiter = { reject: (e) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError(`wait for kind ${kind}`, timeoutMs)), timeoutMs);
        const off = this.on(kind, (body) => done(null, body));
        const done = (e, body) => {
          clearTimeout(timer);
          off();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(body);
        };
        this.waiters.add(waiter);
      })
    );
  }
  dispatch(env) {
    if (env.kind === KIND_RPC_RESPONSE) {
      let res;
      try {
        res = decodeRpcResponse(env.body);
      } catch {
        this.fail(new MalformedEnvelopeError("RPC_RESPONSE shorter than 9 bytes"));
        return;
      }
      const pending = this.rpcs.get(res.requestId);
      if (pending) {
        this.rpcs.delete(res.requestId);
        clearTimeout(pending.timer);
        if (res.status === RPC_STATUS_OK) pending.resolve(res.payload);
        else pending.reject(new RpcError(res.requestId, decodeUtf8Lossy(res.payload)));
        return;
      }
    }
    for (const h of [...this.handlers.get(env.kind) ?? []]) {
      try {
        h(env.body, env);
      } catch (e) {
        this.diag(`handler for kind ${env.kind} threw: ${e.message}`);
      }
    }
    for (const h of [...this.anyHandlers]) {
      try {
        h(env);
      } catch (e) {
        this.diag(`onAny handler threw: ${e.message}`);
      }
    }
  }
  // ---- RPC -------------------------------------------------------------
  /** Correlated RPC; rejects with RpcError, RpcTimeoutError or ConnectionClosedError. */
  callRpc(method, payload, opts = {}) {
    return new Promise((resolve, reject) => {
      if (this.closeInfo) {
        reject(this.closedError());
        return;
      }
      const id = this.nextRequestId++;
      const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
      const timer = setTimeout(() => {
        this.rpcs.delete(id);
        reject(new RpcTimeoutError(method, id, timeoutMs));
      }, timeoutMs);
      this.rpcs.set(id, { method, resolve, reject, timer });
      try {
        this.send(KIND_RPC_REQUEST, encodeRpcRequest(id, method, payloadBytes(payload)));
      } catch (e) {
        clearTimeout(timer);
        this.rpcs.delete(id);
        reject(e);
      }
    });
  }
  /** callRpc with a JSON request and a strictly parsed JSON reply (built-in services). */
  async callRpcJson(method, request, opts = {}) {
    const reply = await this.callRpc(method, stringifyJson(request ?? {}), opts);
    try {
      return parseJson(decodeUtf8(reply));
    } catch (e) {
      throw new MalformedEnvelopeError(`${method} reply is not JSON: ${e.message}`);
    }
  }
  // ---- rooms -------------------------------------------------------------
  /** Kind 21 with the room name; resolves on ROOM_JOINED, rejects on ROOM_REJECT or timeout. */
  joinOrCreateRoom(name, opts = {}) {
    return this.roomRequest(KIND_ROOM_CREATE, encodeRoomCreate(name), opts.timeoutMs);
  }
  /** Kind 22. */
  joinRoom(roomId, opts = {}) {
    return this.roomRequest(KIND_ROOM_JOIN, encodeRoomId(roomId), opts.timeoutMs);
  }
  /** Kind 24. */
  leaveRoom(roomId) {
    this.send(KIND_ROOM_LEAVE, encodeRoomId(roomId));
    if (this.currentRoom && this.currentRoom.roomId === BigInt(roomId)) this.currentRoom = null;
  }
  /** Kind 25. */
  sendMapReady(roomId) {
    this.send(KIND_ROOM_MAP_READY, encodeRoomId(roomId));
  }
  onRoomJoined(handler) {
    return this.on(KIND_ROOM_JOINED, (body) => {
      let room;
      try {
        room = decodeRoomJoined(body);
      } catch {
        return;
      }
      handler(room);
    });
  }
  onRoomLeft(handler) {
    return this.on(KIND_ROOM_LEAVE, (body) => {
      let id;
      try {
        id = decodeRoomId(body);
      } catch {
        return;
      }
      handler(id);
    });
  }
  roomRequest(kind, body, timeoutMs = this.timeoutMs) {
    return quiet(
      new Promise((resolve, reject) => {
        if (this.closeInfo) {
          reject(this.closedError());
          return;
        }
        const waiter = { reject: (e) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError("room request", timeoutMs)), timeoutMs);
        const offJoined = this.onRoomJoined((room) => done(null, room));
        const offReject = this.on(KIND_ROOM_REJECT, (b) => {
          try {
            const r = decodeRoomReject(b);
            done(new RoomRejectedError(r.requestKind, r.reason));
          } catch {
          }
        });
        const done = (e, room) => {
          clearTimeout(timer);
          offJoined();
          offReject();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(room);
        };
        this.waiters.add(waiter);
        try {
          this.send(kind, body);
        } catch (e) {
          done(e);
        }
      })
    );
  }
  /**
   * Opts in (kind 7) and resolves with the negotiated codec. From then on
   * spawns, despawns, roles and snapshots feed `actorView`, and each applied
   * snapshot is acknowledged (kind 10, unreliable where possible).
   */
  async enableTransformSync(opts = {}) {
    if (!this.actorView) {
      const view = new ActorView();
      this.actorView = view;
      this.onAny((env) => {
        const events = view.handleEnvelope(env);
        const ack = view.pollAck();
        if (ack && this.isOpen) {
          try {
            this.sendEnvelope(ack, { reliable: false });
          } catch {
          }
        }
        for (const e of events) for (const l of [...this.actorListeners]) l(e);
      });
    }
    const wait = this.waitForKind(7, opts.timeoutMs);
    this.sendEnvelope(ActorView.helloEnvelope());
    await wait;
    return this.actorView.hello;
  }
  /** Actor events (negotiated, spawned, despawned, role, snapshot). */
  onActorEvent(handler) {
    this.actorListeners.add(handler);
    return () => this.actorListeners.delete(handler);
  }
  /** Announces this client's avatar (kind 16); resolves with its object id. */
  announceActor(archetypeId, transform = IDENTITY_TRANSFORM, opts = {}) {
    const view = this.actorView;
    if (!view) return Promise.reject(new CitadelError("transform_sync_off", "call enableTransformSync() first"));
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    return quiet(
      new Promise((resolve, reject) => {
        const waiter = { reject: (e) => done(e) };
        const timer = setTimeout(() => done(new TimeoutError("actor announcement", timeoutMs)), timeoutMs);
        const off = this.onActorEvent((e) => {
          if (e.type === "spawned" && e.actor.isLocal) done(null, e.actor.objectId);
        });
        const done = (e, id) => {
          clearTimeout(timer);
          off();
          this.waiters.delete(waiter);
          if (e) reject(e);
          else resolve(id);
        };
        this.waiters.add(waiter);
        try {
          this.sendEnvelope(view.announce(archetypeId, transform));
        } catch (e) {
          done(e);
        }
      })
    );
  }
  /** Reports the local actor's transform (kind 20, unreliable where possible). */
  sendActorState(transform) {
    const id = this.actorView?.localObject;
    if (id === null || id === void 0) throw new CitadelError("no_local_actor", "announceActor() has not completed");
    this.sendEnvelope(ActorView.stateEnvelope(id, transform), { reliable: false });
  }
  // ---- notifications and matchmaker (services.md §3, §4) ------------------
  /** Live kind-27 notifications (deduplicate by `id`: delivery is at least once). */
  onNotification(handler) {
    return this.on(KIND_NOTIFICATION, (body) => {
      try {
        handler(decodeNotification(body));
      } catch {
        this.diag("malformed NOTIFICATION ignored");
      }
    });
  }
  /** `notifications.list`: newest first; `limit` 1-100 (server default 50). */
  listNotifications(opts = {}) {
    return this.callRpcJson("notifications.list", opts);
  }
  /** `notifications.mark_read`: returns `{read_ids}` (only ids that changed). */
  markNotificationsRead(ids) {
    return this.callRpcJson("notifications.mark_read", { ids });
  }
  /** Kind-26 match handoffs. */
  onMatchmakerMatched(handler) {
    return this.on(KIND_MATCHMAKER_MATCHED, (body) => {
      try {
        handler(decodeMatchmakerMatched(body));
      } catch {
        this.diag("malformed MATCHMAKER_MATCHED ignored");
      }
    });
  }
  addMatchmakerTicket(request) {
    return this.callRpcJson("matchmaker.add", request);
  }
  cancelMatchmakerTicket(ticketId) {
    return this.callRpcJson("matchmaker.cancel", { ticket_id: ticketId });
  }
  getMatchmakerStatus(ticketId) {
    return this.callRpcJson("matchmaker.status", { ticket_id: ticketId });
  }
  acceptMatch(ticketId, joinToken) {
    return this.callRpcJson("matchmaker.accept", { ticket_id: ticketId, join_token: joinToken });
  }
  // ---- chat (services.md §5) --------------------------------------------
  /** Decoded kind-28 events; malformed ones are ignored. */
  onChatEvent(handler) {
    return this.on(KIND_CHAT_EVENT, (body) => {
      const ev = decodeChatEvent(body);
      if (ev) handler(ev);
      else this.diag("malformed CHAT_EVENT ignored");
    });
  }
  joinChat(target) {
    return this.callRpcJson("chat.join", { target });
  }
  leaveChat(channelId) {
    return this.callRpcJson("chat.leave", { channel_id: channelId });
  }
  sendChatMessage(channelId, content) {
    return this.callRpcJson("chat.send", { channel_id: channelId, content });
  }
  getChatHistory(channelId, opts = {}) {
    if (opts.limit !== void 0 && (opts.limit < 1 || opts.limit > 200)) return Promise.reject(new RangeError("limit must be 1..200"));
    const req = { channel_id: channelId };
    if (opts.limit !== void 0) req.limit = opts.limit;
    if (opts.beforeMessageId !== void 0) req.before_message_id = opts.beforeMessageId;
    return this.callRpcJson("chat.history", req);
  }
  editChatMessage(channelId, messageId, content) {
    return this.callRpcJson("chat.edit", { channel_id: channelId, message_id: messageId, content });
  }
  deleteChatMessage(channelId, messageId) {
    return this.callRpcJson("chat.delete", { channel_id: channelId, message_id: messageId });
  }
  moderateChatMessage(channelId, messageId) {
    return this.callRpcJson("chat.moderate", { channel_id: channelId, message_id: messageId });
  }
  setChatTyping(channelId, typing) {
    return this.callRpcJson("chat.typing", { channel_id: channelId, typing });
  }
  /** chat.join after a reconnect; the cursor decides whether a reconcile is needed. */
  async rejoinChat(target, cursor) {
    const join = await this.joinChat(target);
    cursor.rejoined(join);
    return join;
  }
  /**
   * Pages history newest first, hands one atomic snapshot to `applyHistory`,
   * then sends the private watermark acknowledgement. A malformed
   * continuation restarts from the newest page; at most `maxAttempts` (10).
   */
  async reconcileChat(cursor, applyHistory, opts = {}) {
    const limit = opts.pageLimit ?? 200;
    const maxPages = opts.maxPages ?? 10;
    const attempts = Math.min(opts.maxAttempts ?? 10, 10);
    for (let attempt = 0; attempt < attempts; attempt++) {
      const items = [];
      let watermark = null;
      let before;
      let ok = true;
      for (let page = 0; page < maxPages; page++) {
        const res = await this.getChatHistory(cursor.channelId, { limit, beforeMessageId: before });
        if (!Array.isArray(res?.items) || typeof res.watermark_event_id !== "number" && typeof res.watermark_event_id !== "bigint") {
          ok = false;
          break;
        }
        if (watermark === null) watermark = res.watermark_event_id;
        for (const it of res.items) {
          const id = it?.id;
          if (typeof id !== "number" && typeof id !== "bigint" || before !== void 0 && BigInt(id) >= before) {
            ok = false;
            break;
          }
          before = BigInt(id);
          items.push(it);
        }
        if (!ok || res.items.length < limit) break;
      }
      if (!ok || watermark === null) continue;
      await applyHistory(items, watermark);
      cursor.historyApplied(watermark);
      if (cursor.state !== "ack_required") continue;
      await this.callRpcJson("chat.history", { channel_id: cursor.channelId, limit: 1, acknowledge_watermark: watermark });
      cursor.acknowledged(watermark);
      return;
    }
    throw new ChatEventError(`chat reconcile of ${cursor.channelId} did not converge`);
  }
  // ---- closing -------------------------------------------------------------
  close(code, reason) {
    this.transport.close(code, reason);
  }
  fail(error) {
    this.diag(`closing: ${error.message}`);
    this.onClosed({ code: 1002, reason: error.message, error });
    this.transport.close(1002, "malformed envelope");
  }
  closedError() {
    const info = this.closeInfo;
    if (info.error instanceof MalformedEnvelopeError) return info.error;
    return new ConnectionClosedError(`connection closed: ${info.reason}`, info.code, info.reason);
  }
  onClosed(info) {
    if (this.closeInfo) return;
    this.closeInfo = info;
    this.diag(`closed (${info.code ?? "-"}): ${info.reason}`);
    const err = this.closedError();
    for (const [, p] of this.rpcs) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.rpcs.clear();
    for (const w of [...this.waiters]) w.reject(err);
    this.resolveClosed(info);
  }
};
function decodeUtf8Lossy(b) {
  return new TextDecoder().decode(b);
}
async function fetchWebTransportInfo(httpBaseUrl, fetchImpl = fetch) {
  const res = await fetchImpl(new URL("/v1/webtransport", httpBaseUrl).toString());
  if (!res.ok) throw new CitadelError("webtransport_unavailable", `GET /v1/webtransport answered ${res.status}`);
  const body = await res.json();
  const hex = body.certificate_hash?.value ?? null;
  let b64 = body.certificate_hash?.base64 ?? null;
  if (!b64 && hex) {
    let bin = "";
    for (let i = 0; i < hex.length; i += 2) bin += String.fromCharCode(parseInt(hex.slice(i, i + 2), 16));
    b64 = btoa(bin);
  }
  return { url: body.url, certificateHashHex: hex, certificateHashBase64: b64, developmentCertificate: !!body.development_certificate };
}

// demo/main.ts
var DEMO_HELLO = 150;
var SPEED_CM_S = 400;
var BOUNDS = { minX: -1e3, maxX: 1e3, minY: -600, maxY: 600 };
var STATE_INTERVAL_MS = 50;
var params = new URLSearchParams(location.search);
var roomName = params.get("room") || "demo";
var transportChoice = params.get("transport") || "auto";
var config = JSON.parse(document.getElementById("citadel-config").textContent || "{}");
var canvas = document.getElementById("arena");
var ctx2d = canvas.getContext("2d");
var overlay = document.getElementById("overlay");
var state = {
  status: "connecting",
  error: null,
  transport: null,
  roomId: null,
  localObject: null,
  local: { x: 0, y: 0 },
  /** Rendered positions of every other actor, by object id. */
  remotes: {},
  rttMs: null,
  snapshotsPerSecond: 0,
  bytesPerSecond: 0
};
window.citadelDemo = state;
var keys = /* @__PURE__ */ new Set();
addEventListener("keydown", (e) => {
  keys.add(e.key.toLowerCase());
  if (e.key.startsWith("Arrow")) e.preventDefault();
});
addEventListener("keyup", (e) => keys.delete(e.key.toLowerCase()));
addEventListener("blur", () => keys.clear());
function transformAt(x, y, vx = 0, vy = 0) {
  return { position: [x, y, 0], rotation: [0, 0, 0, 1], velocity: [vx, vy, 0] };
}
async function connect() {
  const ws = config.webSocketUrl ?? `ws://${location.hostname}:7352/`;
  const opts = { timeoutMs: 1e4, diagnostics: (l) => console.debug("[citadel]", l) };
  if (transportChoice === "ws") return CitadelClient.connect(ws, opts);
  if (transportChoice === "wt") return CitadelClient.connectAuto({ httpBaseUrl: location.origin }, opts);
  return CitadelClient.connectAuto({ httpBaseUrl: config.webTransportEnabled ? location.origin : void 0, webSocketUrl: ws }, opts);
}
async function main() {
  const client = await connect();
  state.transport = client.transportKind;
  state.status = "handshake";
  const hs = await client.handshakeGuest({ throwOnReject: true });
  void hs;
  const room = await client.joinOrCreateRoom(roomName);
  state.roomId = room.roomId.toString();
  await client.enableTransformSync();
  state.local = { x: Math.round(Math.random() * 1200 - 600), y: Math.round(Math.random() * 600 - 300) };
  state.localObject = await client.announceActor(0, transformAt(state.local.x, state.local.y));
  client.send(DEMO_HELLO, roomName);
  state.status = "playing";
  client.whenClosed.then((info) => {
    state.status = "closed";
    state.error = state.error ?? `connection closed: ${info.reason}`;
  });
  setInterval(async () => {
    const t0 = performance.now();
    try {
      await client.callRpc("ping", void 0, { timeoutMs: 5e3 });
      state.rttMs = Math.round((performance.now() - t0) * 10) / 10;
    } catch {
    }
  }, 1e3);
  let lastSnaps = 0;
  let lastBytes = 0;
  setInterval(() => {
    const view = client.actorView;
    const bytes = client.bytesSent + client.bytesReceived;
    state.snapshotsPerSecond = view.snapshotsApplied - lastSnaps;
    state.bytesPerSecond = bytes - lastBytes;
    lastSnaps = view.snapshotsApplied;
    lastBytes = bytes;
  }, 1e3);
  let lastFrame = performance.now();
  let lastState = 0;
  let wasMoving = false;
  const frame = (now) => {
    const dt = Math.min((now - lastFrame) / 1e3, 0.1);
    lastFrame = now;
    let dx = 0;
    let dy = 0;
    if (keys.has("arrowleft") || keys.has("a")) dx -= 1;
    if (keys.has("arrowright") || keys.has("d")) dx += 1;
    if (keys.has("arrowup") || keys.has("w")) dy -= 1;
    if (keys.has("arrowdown") || keys.has("s")) dy += 1;
    const len = Math.hypot(dx, dy) || 1;
    const vx = dx / len * SPEED_CM_S;
    const vy = dy / len * SPEED_CM_S;
    const moving = dx !== 0 || dy !== 0;
    state.local.x = Math.min(Math.max(state.local.x + vx * dt, BOUNDS.minX), BOUNDS.maxX);
    state.local.y = Math.min(Math.max(state.local.y + vy * dt, BOUNDS.minY), BOUNDS.maxY);
    if (client.isOpen && (moving || wasMoving || now - lastState > 1e3) && now - lastState >= STATE_INTERVAL_MS) {
      client.sendActorState(transformAt(state.local.x, state.local.y, moving ? vx : 0, moving ? vy : 0));
      lastState = now;
      wasMoving = moving;
    }
    draw(client);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}
function toCanvas(x, y) {
  return [(x - BOUNDS.minX) / (BOUNDS.maxX - BOUNDS.minX) * canvas.width, (y - BOUNDS.minY) / (BOUNDS.maxY - BOUNDS.minY) * canvas.height];
}
function dot(x, y, color, label) {
  const [cx, cy] = toCanvas(x, y);
  ctx2d.fillStyle = color;
  ctx2d.beginPath();
  ctx2d.arc(cx, cy, 14, 0, Math.PI * 2);
  ctx2d.fill();
  ctx2d.fillStyle = "#d8dee9";
  ctx2d.font = "12px system-ui";
  ctx2d.fillText(label, cx + 18, cy + 4);
}
function draw(client) {
  ctx2d.clearRect(0, 0, canvas.width, canvas.height);
  ctx2d.strokeStyle = "#2e3748";
  for (let x = BOUNDS.minX; x <= BOUNDS.maxX; x += 200) {
    const [cx] = toCanvas(x, 0);
    ctx2d.beginPath();
    ctx2d.moveTo(cx, 0);
    ctx2d.lineTo(cx, canvas.height);
    ctx2d.stroke();
  }
  for (let y = BOUNDS.minY; y <= BOUNDS.maxY; y += 200) {
    const [, cy] = toCanvas(0, y);
    ctx2d.beginPath();
    ctx2d.moveTo(0, cy);
    ctx2d.lineTo(canvas.width, cy);
    ctx2d.stroke();
  }
  const view = client.actorView;
  const remotes = {};
  if (view) {
    for (const [id, r] of view.render()) {
      if (id === state.localObject) continue;
      const actor = view.actors.get(id);
      const npc = actor ? actor.owner === 0n : false;
      remotes[id] = { x: r.position[0], y: r.position[1], npc };
      dot(r.position[0], r.position[1], npc ? "#ebcb8b" : "#bf616a", npc ? `NPC ${id}` : `player ${id}`);
    }
  }
  state.remotes = remotes;
  dot(state.local.x, state.local.y, "#88c0d0", `you (${state.localObject ?? "\u2026"})`);
  overlay.textContent = [
    `transport  ${state.transport === "webtransport" ? "WebTransport" : state.transport === "websocket" ? "WebSocket" : "\u2026"}`,
    `room       ${roomName} (#${state.roomId ?? "\u2026"})`,
    `RTT        ${state.rttMs === null ? "\u2026" : `${state.rttMs} ms`}`,
    `snapshots  ${state.snapshotsPerSecond}/s`,
    `traffic    ${(state.bytesPerSecond / 1024).toFixed(1)} KiB/s`,
    `players    ${Object.values(remotes).filter((r) => !r.npc).length + 1}`,
    state.error ? `error      ${state.error}` : `status     ${state.status}`
  ].join("\n");
}
main().catch((e) => {
  state.status = "failed";
  state.error = `${e.name}: ${e.message}`;
  overlay.textContent = `error: ${state.error}`;
});
