#!/usr/bin/env python3
"""Independent (stdlib-only) reference encoders/decoders for Citadel realtime
kinds 1..28, used to generate ``kinds.json`` next to this script.

    python3 gen_kinds.py          # rewrite kinds.json (deterministic)
    python3 gen_kinds.py --check  # verify kinds.json is up to date, re-verify the
                                  # realtime-wire.md §13 worked examples and the
                                  # published codec vectors (shared/fixtures/wire_vectors.json)

Everything here is derived from shared/spec/realtime-wire.md (§1, §3-§9, §13, §14;
where docs and code disagree the "Code does" column of §14 is followed) and
shared/spec/services.md (§3.5, §4.2, §5.4-§5.5). It deliberately shares no code with
the Rust crate: it is a second, independent implementation used for cross-checking.

Every generated case is self-verified before the file is written:
  * valid cases: decode(hex) == fields; and encode(fields) == hex unless the case
    name starts with "decode-only:" (the generator computes this and refuses to
    write a mislabelled case);
  * malformed cases: decode(hex) fails with exactly the stated error code.
"""

import json
import math
import struct
import sys
from pathlib import Path

SCRIPT_DIR = Path(__file__).resolve().parent
OUT_PATH = SCRIPT_DIR / "kinds.json"
# <repo>/crates/citadel-wire/tests/vectors -> <repo> is four levels up.
REPO_ROOT = SCRIPT_DIR.parents[3] if len(SCRIPT_DIR.parents) > 3 else SCRIPT_DIR
SHARED_DIR = REPO_ROOT.parent / "shared"
WIRE_VECTORS = SHARED_DIR / "fixtures" / "wire_vectors.json"
# fallback: the crate-local copy of the published vectors, if one sits next to this script
LOCAL_WIRE_VECTORS = SCRIPT_DIR / "wire_vectors.json"

DECODE_ONLY = "decode-only: "


# ---------------------------------------------------------------------------
# errors


class WireError(Exception):
    CODES = ("truncated", "trailing", "padding", "utf8", "count", "value",
             "varint", "schema", "json")

    def __init__(self, code, detail=""):
        assert code in self.CODES, code
        super().__init__(f"{code}: {detail}")
        self.code = code


ERROR_CODES = {
    "truncated": "body shorter than a fixed size, a count/length that overruns the data, "
                 "or a bitstream read past the end",
    "trailing": "bytes after the end where the layout forbids them (bitstream kinds 8/13/14/15: "
                "a whole extra byte after the last field; kind 1: more than 8 bytes)",
    "padding": "non-zero pad bits in the final partial byte of a bitstream",
    "utf8": "a string field that is not valid UTF-8",
    "count": "a count or length above a documented cap (TSYNC_INPUT frame_count > 32, "
             "REP_ACK/REP_SCHEMA entry_count > 8192, DeltaBunch Bytes length > max_len)",
    "value": "a field value outside its domain (unknown role/event byte, HELLO quat_mode not "
             "9/10/15, TSYNC_ACK acked=0 with history!=0, zero result_id, zero base_id on a delta "
             "bunch, IntRange code > max-min, scalar code > steps, AUTH_RESULT status > 2)",
    "varint": "overlong (multi-group value whose last group is 0) or overflowing "
              "(more than 10 groups, or 10th group > 1) bit-varint",
    "schema": "a full DeltaBunch whose schema hash or layout_version differs from the schema",
    "json": "kinds 26-28: body that is not the required JSON shape (bad JSON, missing/unknown/"
            "duplicate field, wrong type, wrong version, unknown type, inconsistent message state)",
}


# ---------------------------------------------------------------------------
# numeric helpers


def f32(x):
    """Narrow a Python float (f64) to the nearest f32, returned widened to f64."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def rnd(x):
    """round(x) = floor(x + 0.5) in f64 (§3.4)."""
    return math.floor(x + 0.5)


def ceil_log2(n):
    return 0 if n <= 1 else (n - 1).bit_length()


def be_f32(x):
    return struct.pack(">f", x)


def u8(v):
    return struct.pack(">B", v)


def u16(v):
    return struct.pack(">H", v)


def u32(v):
    return struct.pack(">I", v)


def u64(v):
    return struct.pack(">Q", v)


class ByteReader:
    """Big-endian byte cursor; every short read is a 'truncated' error."""

    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0

    def remaining(self):
        return len(self.data) - self.pos

    def take(self, n):
        if n > self.remaining():
            raise WireError("truncated", f"need {n} bytes at {self.pos}, have {self.remaining()}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack(">H", self.take(2))[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def u64(self):
        return struct.unpack(">Q", self.take(8))[0]

    def f32(self):
        return struct.unpack(">f", self.take(4))[0]

    def f32s(self, n):
        return [self.f32() for _ in range(n)]

    def rest(self):
        return self.take(self.remaining())


def utf8(b):
    try:
        return bytes(b).decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise WireError("utf8", str(e))


# ---------------------------------------------------------------------------
# bitstream (§3.1) and bit-varint (§3.2)


class BitWriter:
    def __init__(self):
        self.bits = []

    def write(self, value, n):
        assert 0 <= n <= 64, n
        assert 0 <= value and (n == 64 or value < (1 << n)), (value, n)
        for i in range(n - 1, -1, -1):
            self.bits.append((value >> i) & 1)

    def write_varint(self, v):
        assert 0 <= v < (1 << 64)
        while True:
            group = v & 0x7F
            v >>= 7
            self.write(1 if v else 0, 1)
            self.write(group, 7)
            if not v:
                break

    def write_bytes(self, data):
        for b in data:
            self.write(b, 8)

    def bit_len(self):
        return len(self.bits)

    def to_bytes(self):
        bits = self.bits + [0] * (-len(self.bits) % 8)
        out = bytearray()
        for i in range(0, len(bits), 8):
            byte = 0
            for b in bits[i:i + 8]:
                byte = (byte << 1) | b
            out.append(byte)
        return bytes(out)


class BitReader:
    def __init__(self, data):
        self.data = bytes(data)
        self.pos = 0
        self.total = len(self.data) * 8

    def remaining(self):
        return self.total - self.pos

    def read(self, n):
        assert 0 <= n <= 64
        if n > self.remaining():  # bound-before-consume
            raise WireError("truncated", f"read {n} bits at bit {self.pos}, {self.remaining()} left")
        v = 0
        for _ in range(n):
            byte = self.data[self.pos >> 3]
            v = (v << 1) | ((byte >> (7 - (self.pos & 7))) & 1)
            self.pos += 1
        return v

    def read_varint(self):
        value = 0
        for i in range(10):
            more = self.read(1)
            group = self.read(7)
            if i == 9 and (more or group > 1):
                raise WireError("varint", "u64 overflow in 10th group")
            value |= group << (7 * i)
            if not more:
                if i > 0 and group == 0:
                    raise WireError("varint", "overlong (last group is zero)")
                return value
        raise AssertionError("unreachable")

    def read_bytes(self, n):
        return bytes(self.read(8) for _ in range(n))

    def finish(self):
        rem = self.remaining()
        if rem >= 8:
            raise WireError("trailing", f"{rem} bits after the last field")
        if rem and self.read(rem) != 0:
            raise WireError("padding", "non-zero pad bit")


# ---------------------------------------------------------------------------
# quantizers (§3.4, §3.5, §3.6)


class Scalar:
    def __init__(self, mn, mx, vpu):
        self.min = f32(mn)
        self.max = f32(mx)
        self.vpu = int(vpu)
        if not (math.isfinite(self.min) and math.isfinite(self.max)) or not self.max > self.min \
                or self.vpu < 1:
            raise ValueError("invalid scalar codec parameters")
        self.steps = max(1, rnd((self.max - self.min) * self.vpu))
        self.bits = ceil_log2(self.steps + 1)

    def code(self, v):
        v = f32(v)
        if math.isnan(v):
            raise ValueError("NaN cannot be quantized")
        v = min(max(v, self.min), self.max)
        return min(rnd((v - self.min) * self.vpu), self.steps)

    def value(self, code):
        if code > self.steps:
            raise WireError("value", f"scalar code {code} > steps {self.steps}")
        return f32(self.min + code / self.vpu)

    def write(self, w, v):
        w.write(self.code(v), self.bits)

    def read(self, r):
        return self.value(r.read(self.bits))


class Vector3:
    def __init__(self, mins, maxs, vpu):
        self.axes = [Scalar(mins[i], maxs[i], vpu) for i in range(3)]

    @property
    def bits(self):
        return sum(a.bits for a in self.axes)

    def write(self, w, v):
        for a, x in zip(self.axes, v):
            a.write(w, x)

    def read(self, r):
        return [a.read(r) for a in self.axes]


SQRT_HALF = 0.7071067811865476  # 1/sqrt(2) as f64 (wire_vectors.json quat_component_order.sqrt_half)
QUAT_RANGE = 2.0 * SQRT_HALF    # 2/sqrt(2)
QUAT_MODES = (9, 10, 15)


def quat_encode_parts(q, n):
    q = [f32(c) if c is not None else math.nan for c in q]
    if not all(math.isfinite(c) for c in q):
        q = [0.0, 0.0, 0.0, 1.0]
    norm = math.sqrt(sum(c * c for c in q))
    if not math.isfinite(norm) or norm < 1e-6:
        q = [0.0, 0.0, 0.0, 1.0]
    else:
        q = [c / norm for c in q]
    index = 0
    for i in range(1, 4):
        if abs(q[i]) > abs(q[index]):
            index = i
    if q[index] < 0:
        q = [-c for c in q]
    maxc = (1 << n) - 1
    codes = []
    for i in range(4):
        if i == index:
            continue
        c = rnd((q[i] + SQRT_HALF) / QUAT_RANGE * maxc)
        codes.append(min(max(c, 0), maxc))
    return index, codes


def quat_decode_parts(index, codes, n):
    maxc = (1 << n) - 1
    index &= 3
    kept = [(c & maxc) / maxc * QUAT_RANGE - SQRT_HALF for c in codes]
    dropped = math.sqrt(max(0.0, 1.0 - sum(k * k for k in kept)))
    q = list(kept)
    q.insert(index, dropped)
    norm = math.sqrt(sum(c * c for c in q))
    if not math.isfinite(norm) or norm < 1e-6:
        q = [0.0, 0.0, 0.0, 1.0]
    else:
        q = [c / norm for c in q]
    return [f32(c) for c in q]


def quat_write(w, q, n):
    index, codes = quat_encode_parts(q, n)
    w.write(index, 2)
    for c in codes:
        w.write(c, n)


def quat_read(r, n):
    index = r.read(2)
    codes = [r.read(n) for _ in range(3)]
    return quat_decode_parts(index, codes, n)


# ---------------------------------------------------------------------------
# kind 1..6 (§4)


def enc_k1(f):
    return struct.pack("<ff", f["x"], f["y"])


def dec_k1(b):
    if len(b) < 8:
        raise WireError("truncated", "POSITION needs exactly 8 bytes")
    if len(b) > 8:
        raise WireError("trailing", "POSITION needs exactly 8 bytes")
    x, y = struct.unpack("<ff", b)
    return {"x": x, "y": y}


def enc_k2(f):
    return u64(f["sender_id"]) + bytes.fromhex(f["payload_hex"])


def dec_k2(b):
    r = ByteReader(b)
    sender = r.u64()
    return {"sender_id": sender, "payload_hex": r.rest().hex()}


def enc_k3(f):
    m = f["method"].encode("utf-8")
    return u64(f["request_id"]) + u16(len(m)) + m + bytes.fromhex(f["payload_hex"])


def dec_k3(b):
    r = ByteReader(b)
    rid = r.u64()
    mlen = r.u16()
    method = utf8(r.take(mlen))
    return {"request_id": rid, "method": method, "payload_hex": r.rest().hex()}


def enc_k4(f):
    return u64(f["request_id"]) + u8(f["status"]) + bytes.fromhex(f["payload_hex"])


def dec_k4(b):
    r = ByteReader(b)
    rid = r.u64()
    status = r.u8()
    return {"request_id": rid, "status": status, "payload_hex": r.rest().hex()}


def enc_k5(f):
    return f["token"].encode("utf-8")


def dec_k5(b):
    return {"token": utf8(b)}


def enc_k6(f):
    s = f["status"]
    if s == 0:
        return u8(0) + f["user_id"].encode("utf-8")
    if s == 1:
        return u8(1)
    return u8(2) + u8(f["reason"])


def dec_k6(b):
    r = ByteReader(b)
    s = r.u8()
    if s == 0:
        return {"status": 0, "user_id": utf8(r.rest()), "reason": None}
    if s == 1:
        return {"status": 1, "user_id": None, "reason": None}  # any trailer ignored
    if s == 2:
        reason = r.u8() if r.remaining() else 0  # missing reason byte reads as 0
        return {"status": 2, "user_id": None, "reason": reason}
    raise WireError("value", f"AUTH_RESULT status {s}")


# ---------------------------------------------------------------------------
# kinds 7..12 (§5)


def enc_k7(f):
    out = b"".join(be_f32(v) for v in f["pos_min"] + f["pos_max"]) + u32(f["pos_vpu"])
    out += b"".join(be_f32(v) for v in f["vel_min"] + f["vel_max"]) + u32(f["vel_vpu"])
    return out + u8(f["quat_mode"]) + u8(f["send_rate_hz"]) + u8(f["sim_rate_hz"])


def dec_k7(b):
    if len(b) < 59:
        raise WireError("truncated", "TSYNC_HELLO needs 59 bytes")
    r = ByteReader(b)
    f = {"pos_min": r.f32s(3), "pos_max": r.f32s(3), "pos_vpu": r.u32(),
         "vel_min": r.f32s(3), "vel_max": r.f32s(3), "vel_vpu": r.u32(),
         "quat_mode": r.u8(), "send_rate_hz": r.u8(), "sim_rate_hz": r.u8()}
    if f["quat_mode"] not in QUAT_MODES:
        raise WireError("value", f"quat_mode {f['quat_mode']}")
    return f


class TransformCodec:
    def __init__(self, h):
        self.desc = {k: h[k] for k in ("pos_min", "pos_max", "pos_vpu", "vel_min", "vel_max",
                                        "vel_vpu", "quat_mode")}
        self.pos = Vector3(h["pos_min"], h["pos_max"], h["pos_vpu"])
        self.vel = Vector3(h["vel_min"], h["vel_max"], h["vel_vpu"])
        assert h["quat_mode"] in QUAT_MODES
        self.quat_mode = h["quat_mode"]


DEFAULT_HELLO = {
    "pos_min": [-262144.0, -262144.0, -32768.0], "pos_max": [262144.0, 262144.0, 32768.0],
    "pos_vpu": 8,
    "vel_min": [-32768.0, -32768.0, -32768.0], "vel_max": [32768.0, 32768.0, 32768.0],
    "vel_vpu": 4,
    "quat_mode": 10, "send_rate_hz": 20, "sim_rate_hz": 60,
}
DEFAULT_CODEC = TransformCodec(DEFAULT_HELLO)
DEFAULT_HELLO_HEX = ("c8800000c8800000c700000048800000488000004700000000000008"
                     "c7000000c7000000c700000047000000470000004700000000000004"
                     "0a143c")


def snapshot_writer(f, codec=DEFAULT_CODEC):
    w = BitWriter()
    w.write(f["server_tick"], 32)
    w.write(f["snapshot_id"], 32)
    w.write(f["base_snapshot_id"], 32)
    w.write(f["send_rate_hz"], 8)
    w.write(len(f["removed"]), 16)
    w.write(len(f["updates"]), 16)
    for oid in f["removed"]:
        w.write(oid, 32)
    for u in f["updates"]:
        w.write(u["object_id"], 32)
        w.write(u["gen_epoch"], 16)
        mask = ((8 if u["last_input_seq"] is not None else 0)
                | (4 if u["position"] is not None else 0)
                | (2 if u["rotation"] is not None else 0)
                | (1 if u["velocity"] is not None else 0))
        w.write(mask, 4)
        if u["position"] is not None:
            codec.pos.write(w, u["position"])
        if u["rotation"] is not None:
            quat_write(w, u["rotation"], codec.quat_mode)
        if u["velocity"] is not None:
            codec.vel.write(w, u["velocity"])
        if u["last_input_seq"] is not None:
            w.write(u["last_input_seq"], 32)
    return w


def enc_k8(f):
    return snapshot_writer(f).to_bytes()


def dec_k8(b, codec=DEFAULT_CODEC):
    r = BitReader(b)
    f = {"server_tick": r.read(32), "snapshot_id": r.read(32), "base_snapshot_id": r.read(32),
         "send_rate_hz": r.read(8)}
    n_removed = r.read(16)
    n_updates = r.read(16)
    f["removed"] = [r.read(32) for _ in range(n_removed)]
    ups = []
    for _ in range(n_updates):
        u = {"object_id": r.read(32), "gen_epoch": r.read(16)}
        mask = r.read(4)
        u["position"] = codec.pos.read(r) if mask & 4 else None
        u["rotation"] = quat_read(r, codec.quat_mode) if mask & 2 else None
        u["velocity"] = codec.vel.read(r) if mask & 1 else None
        u["last_input_seq"] = r.read(32) if mask & 8 else None
        ups.append(u)
    f["updates"] = ups
    r.finish()
    return f


def enc_k9(f):
    out = u32(f["acked_snapshot_id"]) + u32(f["last_seen_snapshot_id"]) + u8(len(f["frames"]))
    for fr in f["frames"]:
        payload = bytes.fromhex(fr["payload_hex"])
        out += u32(fr["input_seq"]) + u32(fr["sim_tick"]) + be_f32(fr["dt"])
        out += u32(fr["object_id"]) + u32(fr["ownership_epoch"])
        out += b"".join(be_f32(v) for v in fr["move_velocity"])
        out += u8(fr["flags"]) + u16(len(payload)) + payload
        assert (fr["fire"] is not None) == bool(fr["flags"] & 1)
        if fr["fire"] is not None:
            out += b"".join(be_f32(v) for v in fr["fire"]["origin"] + fr["fire"]["direction"])
    return out


def dec_k9(b):
    r = ByteReader(b)
    f = {"acked_snapshot_id": r.u32(), "last_seen_snapshot_id": r.u32()}
    count = r.u8()
    if count > 32:
        raise WireError("count", f"frame_count {count} > 32")
    frames = []
    for _ in range(count):
        fr = {"input_seq": r.u32(), "sim_tick": r.u32(), "dt": r.f32(), "object_id": r.u32(),
              "ownership_epoch": r.u32(), "move_velocity": r.f32s(3), "flags": r.u8()}
        plen = r.u16()
        fr["payload_hex"] = r.take(plen).hex()
        fr["fire"] = {"origin": r.f32s(3), "direction": r.f32s(3)} if fr["flags"] & 1 else None
        frames.append(fr)
    f["frames"] = frames
    return f  # bytes after the last frame are not checked


def enc_k10(f):
    return u32(f["acked_snapshot_id"]) + u32(f["history"])


def dec_k10(b):
    r = ByteReader(b)
    f = {"acked_snapshot_id": r.u32(), "history": r.u32()}
    if f["acked_snapshot_id"] == 0 and f["history"] != 0:
        raise WireError("value", "acked 0 with non-zero history")
    return f


def enc_k11(f):
    return (u32(f["object_id"]) + u8(f["role"]) + u64(f["owner"]) + u32(f["ownership_epoch"])
            + u16(f["gen_epoch"]) + u8(f["event"]))


def dec_k11(b):
    r = ByteReader(b)
    f = {"object_id": r.u32(), "role": r.u8(), "owner": r.u64(), "ownership_epoch": r.u32(),
         "gen_epoch": r.u16(), "event": r.u8()}
    if f["role"] > 3:
        raise WireError("value", f"role {f['role']}")
    if f["event"] > 3:
        raise WireError("value", f"event {f['event']}")
    return f


def enc_k12(f):
    return (u32(f["input_seq"]) + u8(f["flags"]) + u32(f["object_id"])
            + b"".join(be_f32(v) for v in f["hit_point"]) + u32(f["rewind_tick"]))


def dec_k12(b):
    r = ByteReader(b)
    return {"input_seq": r.u32(), "flags": r.u8(), "object_id": r.u32(),
            "hit_point": r.f32s(3), "rewind_tick": r.u32()}


# ---------------------------------------------------------------------------
# kinds 13..15 (§6)

BYTES_HARD_CAP = 1048576

EXAMPLE_SCHEMA = {
    "fields": [
        {"codec": "bool"},
        {"codec": "int_range", "min": 0, "max": 100},
        {"codec": "scalar", "min": -1000.0, "max": 1000.0, "values_per_unit": 4},
        {"codec": "vector3", "min": [-1000.0, -1000.0, -1000.0],
         "max": [1000.0, 1000.0, 1000.0], "values_per_unit": 4},
        {"codec": "quat", "mode": 10},
        {"codec": "bytes", "max_len": 32},
    ],
    "schema_hash_hex": "000102030405060708090a0b0c0d0e0f",
    "layout_version": 1,
}


class FieldCodec:
    def __init__(self, d):
        self.d = d
        c = d["codec"]
        self.kind = c
        if c == "int_range":
            span = d["max"] - d["min"]
            assert span >= 0
            self.span = span
            self.bits = 64 if span >= (1 << 64) - 1 else ceil_log2(span + 1)
        elif c == "scalar":
            self.scalar = Scalar(d["min"], d["max"], d["values_per_unit"])
        elif c == "vector3":
            self.vec = Vector3(d["min"], d["max"], d["values_per_unit"])
        elif c == "quat":
            assert d["mode"] in QUAT_MODES
        elif c == "bytes":
            self.cap = min(d["max_len"], BYTES_HARD_CAP)
        else:
            assert c == "bool", c

    def write(self, w, v):
        k = self.kind
        if k == "bool":
            w.write(1 if v else 0, 1)
        elif k == "int_range":
            w.write(min(max(v, self.d["min"]), self.d["max"]) - self.d["min"], self.bits)
        elif k == "scalar":
            self.scalar.write(w, v)
        elif k == "vector3":
            self.vec.write(w, v)
        elif k == "quat":
            quat_write(w, v, self.d["mode"])
        else:
            data = bytes.fromhex(v)
            assert len(data) <= self.cap
            w.write_varint(len(data))
            w.write_bytes(data)

    def read(self, r):
        k = self.kind
        if k == "bool":
            return r.read(1) == 1
        if k == "int_range":
            code = r.read(self.bits)
            if code > self.span:
                raise WireError("value", f"IntRange code {code} > {self.span}")
            return self.d["min"] + code
        if k == "scalar":
            return self.scalar.read(r)
        if k == "vector3":
            return self.vec.read(r)
        if k == "quat":
            return quat_read(r, self.d["mode"])
        n = r.read_varint()
        if n > self.cap:
            raise WireError("count", f"bytes length {n} > cap {self.cap}")
        return r.read_bytes(n).hex()


class Schema:
    def __init__(self, d):
        self.fields = [FieldCodec(x) for x in d["fields"]]
        self.hash = bytes.fromhex(d["schema_hash_hex"])
        assert len(self.hash) == 16
        self.layout_version = d["layout_version"]


SCHEMA = Schema(EXAMPLE_SCHEMA)


def bunch_writer(f, schema=SCHEMA):
    w = BitWriter()
    w.write(f["object_id"], 32)
    w.write(1 if f["is_full"] else 0, 1)
    w.write_varint(f["result_id"])
    if f["is_full"]:
        w.write_bytes(bytes.fromhex(f["schema_hash_hex"]))
        w.write(f["layout_version"], 32)
    else:
        w.write_varint(f["base_id"])
    values = {int(k): v for k, v in f["values"].items()}
    for i in range(len(schema.fields)):
        w.write(1 if i in values else 0, 1)
    for i, fc in enumerate(schema.fields):
        if i in values:
            fc.write(w, values[i])
    return w


def enc_k13(f):
    return bunch_writer(f).to_bytes()


def dec_k13(b, schema=SCHEMA):
    r = BitReader(b)
    f = {"object_id": r.read(32)}
    f["is_full"] = r.read(1) == 1
    f["result_id"] = r.read_varint()
    if f["result_id"] == 0:
        raise WireError("value", "zero result_id")
    if f["is_full"]:
        h = r.read_bytes(16)
        lv = r.read(32)
        if h != schema.hash:
            raise WireError("schema", "schema hash mismatch")
        if lv != schema.layout_version:
            raise WireError("schema", "layout_version mismatch")
        f["base_id"] = None
        f["schema_hash_hex"] = h.hex()
        f["layout_version"] = lv
    else:
        f["base_id"] = r.read_varint()
        if f["base_id"] == 0:
            raise WireError("value", "zero base_id on a delta bunch")
        f["schema_hash_hex"] = None
        f["layout_version"] = None
    mask = [r.read(1) for _ in schema.fields]
    values = {}
    for i, fc in enumerate(schema.fields):
        if mask[i]:
            values[str(i)] = fc.read(r)
    f["values"] = values
    r.finish()
    # key order as documented in the brief
    return {k: f[k] for k in ("object_id", "is_full", "result_id", "base_id", "schema_hash_hex",
                              "layout_version", "values")}


REP_MAX_ENTRIES = 8192


def enc_k14(f):
    w = BitWriter()
    w.write_varint(len(f["entries"]))
    for e in f["entries"]:
        w.write(e["object_id"], 32)
        w.write_varint(e["acked_result_id"])
        w.write(e["history"], 32)
    return w.to_bytes()


def dec_k14(b):
    r = BitReader(b)
    n = r.read_varint()
    if n > REP_MAX_ENTRIES:
        raise WireError("count", f"entry_count {n} > {REP_MAX_ENTRIES}")
    entries = []
    for _ in range(n):
        entries.append({"object_id": r.read(32), "acked_result_id": r.read_varint(),
                        "history": r.read(32)})
    r.finish()
    return {"entries": entries}


def enc_k15(f):
    w = BitWriter()
    w.write_varint(len(f["entries"]))
    for e in f["entries"]:
        w.write(e["class_id"], 32)
        w.write_bytes(bytes.fromhex(e["schema_hash_hex"]))
        w.write(e["layout_version"], 32)
    return w.to_bytes()


def dec_k15(b):
    r = BitReader(b)
    n = r.read_varint()
    if n > REP_MAX_ENTRIES:
        raise WireError("count", f"entry_count {n} > {REP_MAX_ENTRIES}")
    entries = []
    for _ in range(n):
        entries.append({"class_id": r.read(32), "schema_hash_hex": r.read_bytes(16).hex(),
                        "layout_version": r.read(32)})
    r.finish()
    return {"entries": entries}


# ---------------------------------------------------------------------------
# kinds 16..20 (§7)


def enc_transform(t):
    return b"".join(be_f32(v) for v in t["position"] + t["rotation"] + t["velocity"])


def dec_transform(r):
    return {"position": r.f32s(3), "rotation": r.f32s(4), "velocity": r.f32s(3)}


def enc_k16(f):
    return u16(f["archetype_id"]) + enc_transform(f["transform"])


def dec_k16(b):
    if len(b) < 42:
        raise WireError("truncated", "NA_PRESENCE needs 42 bytes")
    r = ByteReader(b)
    return {"archetype_id": r.u16(), "transform": dec_transform(r)}


def enc_k17(f):
    return u32(f["object_id"]) + u16(f["archetype_id"]) + u64(f["owner"]) + enc_transform(
        f["transform"])


def dec_spawn(r):
    return {"object_id": r.u32(), "archetype_id": r.u16(), "owner": r.u64(),
            "transform": dec_transform(r)}


def dec_k17(b):
    if len(b) < 54:
        raise WireError("truncated", "NA_SPAWN needs 54 bytes")
    return dec_spawn(ByteReader(b))


def enc_k18(f):
    return u16(len(f["spawns"])) + b"".join(enc_k17(s) for s in f["spawns"])


def dec_k18(b):
    r = ByteReader(b)
    n = r.u16()
    if r.remaining() < 54 * n:
        raise WireError("truncated", f"{n} spawns overrun the body")
    return {"spawns": [dec_spawn(r) for _ in range(n)]}


def enc_k19(f):
    return u32(f["object_id"])


def dec_k19(b):
    return {"object_id": ByteReader(b).u32()}


def enc_k20(f):
    return u32(f["object_id"]) + enc_transform(f["transform"])


def dec_k20(b):
    if len(b) < 44:
        raise WireError("truncated", "NA_STATE needs 44 bytes")
    r = ByteReader(b)
    return {"object_id": r.u32(), "transform": dec_transform(r)}


# ---------------------------------------------------------------------------
# kinds 21..25 (§8)


def enc_k21(f):
    p = bytes.fromhex(f["params_hex"])
    return u16(len(p)) + p


def dec_k21(b):
    r = ByteReader(b)
    return {"params_hex": r.take(r.u16()).hex()}


def enc_room_id(f):
    return u64(f["room_id"])


def dec_room_id(b):
    return {"room_id": ByteReader(b).u64()}


def enc_k23(f):
    m = f["map"].encode("utf-8")
    mo = f["mode"].encode("utf-8")
    return u64(f["room_id"]) + u16(len(m)) + m + u16(len(mo)) + mo


def dec_k23(b):
    r = ByteReader(b)
    rid = r.u64()
    mp = utf8(r.take(r.u16()))
    mode = utf8(r.take(r.u16()))
    return {"room_id": rid, "map": mp, "mode": mode}


# ---------------------------------------------------------------------------
# JSON kinds 26..28 (services.md §3.5, §4.2, §5.4-§5.5)


class JsonShapeError(Exception):
    pass


def _no_dup_pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise JsonShapeError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _reject_constant(name):
    raise JsonShapeError(f"non-JSON constant {name}")


def parse_json(body):
    try:
        text = bytes(body).decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_no_dup_pairs, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, JsonShapeError) as e:
        raise WireError("json", str(e))
    return obj


def is_u64(v):
    return type(v) is int and 0 <= v < (1 << 64)


def is_i64(v):
    return type(v) is int and -(1 << 63) <= v < (1 << 63)


def is_str(v):
    return type(v) is str


def is_bool(v):
    return type(v) is bool


def _require_obj(v, what):
    if type(v) is not dict:
        raise WireError("json", f"{what} is not an object")


def check_fields(obj, spec, closed, what):
    """spec: list of (name, predicate, required)."""
    _require_obj(obj, what)
    names = {s[0] for s in spec}
    if closed:
        for k in obj:
            if k not in names:
                raise WireError("json", f"unknown field {what}.{k}")
    for name, pred, required in spec:
        if name not in obj:
            if required:
                raise WireError("json", f"missing field {what}.{name}")
            continue
        if not pred(obj[name]):
            raise WireError("json", f"wrong type for {what}.{name}")


K26_SPEC = [("ticket_id", is_str, True), ("match_id", is_u64, True),
            ("join_token", is_str, True), ("expires_at", is_u64, True)]

K27_SPEC = [("id", is_str, True), ("code", is_i64, True), ("subject", is_str, True),
            ("content", lambda v: True, True), ("sender", is_str, True),
            ("created_at_unix_ms", is_u64, True),
            ("read_at_unix_ms", lambda v: v is None or is_u64(v), True)]


def dec_k26(b):
    obj = parse_json(b)
    check_fields(obj, K26_SPEC, closed=False, what="matched")
    return obj


def dec_k27(b):
    obj = parse_json(b)
    check_fields(obj, K27_SPEC, closed=False, what="notification")
    return obj


PRESENCE_SPEC = [("presence_id", is_str, True), ("user_id", is_str, True)]
MESSAGE_SPEC = [("id", is_u64, True), ("sender", is_str, True), ("content", is_str, True),
                ("created_at_unix_ms", is_u64, True), ("updated_at_unix_ms", is_u64, True),
                ("revision", is_u64, True), ("last_event_id", is_u64, True),
                ("deleted", is_bool, True)]
CHANNEL_TYPES = ("direct", "group", "room")


def is_presence(v):
    check_fields(v, PRESENCE_SPEC, closed=True, what="presence")
    return True


def is_message(v):
    check_fields(v, MESSAGE_SPEC, closed=True, what="message")
    return True


K28_COMMON = [("version", is_u64, True), ("type", is_str, True), ("channel_id", is_str, True)]
K28_TYPES = {
    "presence.join": [("channel_type", lambda v: v in CHANNEL_TYPES, True),
                      ("presence", is_presence, True)],
    "presence.leave": [("presence", is_presence, True)],
    "typing": [("presence", is_presence, True), ("typing", is_bool, True),
               ("expires_at", is_u64, True)],
    "message.create": [("event_id", is_u64, True), ("message", is_message, True)],
    "message.update": [("event_id", is_u64, True), ("message", is_message, True)],
    "message.remove": [("event_id", is_u64, True), ("message", is_message, True)],
    "access.revoked": [("presence", is_presence, True)],
    "resync_required": [("watermark_event_id", is_u64, True),
                        ("scopes", lambda v: type(v) is list and all(is_str(s) for s in v),
                         False)],
}


def dec_k28(b):
    obj = parse_json(b)
    _require_obj(obj, "chat event")
    check_fields(obj, K28_COMMON, closed=False, what="chat event")
    if obj["version"] != 1:
        raise WireError("json", f"unknown version {obj['version']}")
    if obj["type"] not in K28_TYPES:
        raise WireError("json", f"unknown type {obj['type']!r}")
    check_fields(obj, K28_COMMON + K28_TYPES[obj["type"]], closed=True, what="chat event")
    if obj["type"].startswith("message."):
        m = obj["message"]
        if obj["event_id"] == 0:
            raise WireError("json", "event_id 0")
        if m["id"] == 0 or m["revision"] == 0 or m["last_event_id"] == 0:
            raise WireError("json", "zero id/revision/last_event_id")
        if m["updated_at_unix_ms"] < m["created_at_unix_ms"]:
            raise WireError("json", "updated before created")
        if m["last_event_id"] != obj["event_id"]:
            raise WireError("json", "message.last_event_id != event_id")
        if obj["type"] == "message.remove":
            if not m["deleted"] or m["content"] != "":
                raise WireError("json", "message.remove must carry a tombstone")
        elif m["deleted"]:
            raise WireError("json", f"{obj['type']} with deleted message")
    return obj


def _project(obj, spec_names):
    return {k: obj[k] for k in spec_names if k in obj}


def json_body(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def enc_k26(f):
    return json_body(_project(f, [s[0] for s in K26_SPEC]))


def enc_k27(f):
    return json_body(_project(f, [s[0] for s in K27_SPEC]))


def enc_k28(f):
    names = [s[0] for s in K28_COMMON + K28_TYPES[f["type"]]]
    return json_body(_project(f, names))


# ---------------------------------------------------------------------------
# kind table

KINDS = [
    (1, "POSITION", enc_k1, dec_k1),
    (2, "PEER_POSITION", enc_k2, dec_k2),
    (3, "RPC_REQUEST", enc_k3, dec_k3),
    (4, "RPC_RESPONSE", enc_k4, dec_k4),
    (5, "AUTH", enc_k5, dec_k5),
    (6, "AUTH_RESULT", enc_k6, dec_k6),
    (7, "TSYNC_HELLO", enc_k7, dec_k7),
    (8, "TSYNC_SNAPSHOT", enc_k8, dec_k8),
    (9, "TSYNC_INPUT", enc_k9, dec_k9),
    (10, "TSYNC_ACK", enc_k10, dec_k10),
    (11, "TSYNC_ROLE", enc_k11, dec_k11),
    (12, "TSYNC_REWIND", enc_k12, dec_k12),
    (13, "REP_DELTA", enc_k13, dec_k13),
    (14, "REP_ACK", enc_k14, dec_k14),
    (15, "REP_SCHEMA", enc_k15, dec_k15),
    (16, "NA_PRESENCE", enc_k16, dec_k16),
    (17, "NA_SPAWN", enc_k17, dec_k17),
    (18, "NA_SPAWN_BATCH", enc_k18, dec_k18),
    (19, "NA_DESPAWN", enc_k19, dec_k19),
    (20, "NA_STATE", enc_k20, dec_k20),
    (21, "ROOM_CREATE", enc_k21, dec_k21),
    (22, "ROOM_JOIN", enc_room_id, dec_room_id),
    (23, "ROOM_JOINED", enc_k23, dec_k23),
    (24, "ROOM_LEAVE", enc_room_id, dec_room_id),
    (25, "ROOM_MAP_READY", enc_room_id, dec_room_id),
    (26, "MATCHMAKER_MATCHED", enc_k26, dec_k26),
    (27, "NOTIFICATION", enc_k27, dec_k27),
    (28, "CHAT_EVENT", enc_k28, dec_k28),
]
KIND_BY_NUM = {k[0]: k for k in KINDS}
LOSSY_KINDS = (8, 13)  # fields are decoded (quantized) values


# ---------------------------------------------------------------------------
# §13 worked examples (realtime-wire.md), reproduced by the encoders above

IDENTITY = [0.0, 0.0, 0.0, 1.0]

SEC13_SNAP_EMPTY = {"server_tick": 1, "snapshot_id": 1, "base_snapshot_id": 0,
                    "send_rate_hz": 30, "removed": [], "updates": []}
SEC13_SNAP_FULL = {"server_tick": 123, "snapshot_id": 5, "base_snapshot_id": 0,
                   "send_rate_hz": 20, "removed": [],
                   "updates": [{"object_id": 1, "gen_epoch": 0, "position": [100.0, -200.5, 30.0],
                                "rotation": IDENTITY, "velocity": [10.0, 0.0, 0.0],
                                "last_input_seq": None}]}
SEC13_SNAP_DELTA = {"server_tick": 200, "snapshot_id": 9, "base_snapshot_id": 5,
                    "send_rate_hz": 20, "removed": [77],
                    "updates": [{"object_id": 3, "gen_epoch": 2, "position": None,
                                 "rotation": [0.0, SQRT_HALF, 0.0, SQRT_HALF], "velocity": None,
                                 "last_input_seq": None}]}
SEC13_BUNCH_DELTA = {"object_id": 42, "is_full": False, "result_id": 7, "base_id": 3,
                     "schema_hash_hex": None, "layout_version": None,
                     "values": {"0": True, "1": 73, "5": "6869"}}
SEC13_BUNCH_FULL = {"object_id": 1, "is_full": True, "result_id": 1, "base_id": None,
                    "schema_hash_hex": "000102030405060708090a0b0c0d0e0f", "layout_version": 1,
                    "values": {"1": 100}}

SEC13_EXAMPLES = [
    ("empty snapshot", snapshot_writer, SEC13_SNAP_EMPTY, 136,
     "0000000100000001000000001e00000000"),
    ("full snapshot", snapshot_writer, SEC13_SNAP_FULL, 343,
     "0000007b0000000500000000140000000100000001000074006407fe6f1003c38020080100142000040000"),
    ("delta snapshot", snapshot_writer, SEC13_SNAP_DELTA, 252,
     "000000c8000000090000000514000100010000004d0000000300022600803ff0"),
    ("DeltaBunch delta", bunch_writer, SEC13_BUNCH_DELTA, 87, "0000002a0381e39204d0d2"),
    ("DeltaBunch full", bunch_writer, SEC13_BUNCH_FULL, 214,
     "00000001808000810182028303840485058606870780000000a190"),
]


def fnv1a64(data, h=0xcbf29ce484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def bounds_shape_int_range(name, mn, mx):
    base = (1 << 56) | (fnv1a64(struct.pack("<qq", mn, mx)) & 0x00FFFFFFFFFFFFFF)
    key = fnv1a64(name.encode("utf-8"))
    return base, key, fnv1a64(struct.pack("<QQ", base, key))


def check_sec13():
    """Returns a list of failure strings (empty = all reproduced)."""
    fails = []
    for name, writer, fields, bits, hexs in SEC13_EXAMPLES:
        w = writer(fields)
        got = w.to_bytes().hex()
        if w.bit_len() != bits or got != hexs:
            bitstr = "".join(map(str, w.bits))
            fails.append(f"§13 {name}: got {w.bit_len()} bits {got} (bits {bitstr}), "
                         f"expected {bits} bits {hexs}")
    # other spec anchors
    anchors = []
    w = BitWriter(); w.write(1, 1); anchors.append(("§3.1 1-bit", w.to_bytes().hex(), "80"))
    w = BitWriter(); w.write(0xA, 4); w.write(0x5, 4)
    anchors.append(("§3.1 A5", w.to_bytes().hex(), "a5"))
    for v, h in ((0, "00"), (127, "7f"), (128, "8001"), (300, "ac02")):
        w = BitWriter(); w.write_varint(v)
        anchors.append((f"§3.2 varint {v}", w.to_bytes().hex(), h))
    w = BitWriter(); quat_write(w, IDENTITY, 10)
    anchors.append(("§3.6 identity Bits10", w.to_bytes().hex(), "e0080200"))
    anchors.append(("§5.2 default HELLO", enc_k7(DEFAULT_HELLO).hex(), DEFAULT_HELLO_HEX))
    anchors.append(("§6.4 REP_ACK example",
                    enc_k14({"entries": [{"object_id": 1, "acked_result_id": 5, "history": 0}]})
                    .hex(), "010000000105" + "00000000"))
    base, key, comb = bounds_shape_int_range("health", 0, 100)
    anchors.append(("§13 bounds_shape health", f"{base:016x}/{key:016x}/{comb:016x}",
                    "01dc2273d758f7c1/7f69d4b5288ba9cf/2274df58bde525e0"))
    for r, e in ((BitReader(bytes.fromhex("8000")), "varint"),):
        try:
            r.read_varint()
            fails.append("§3.2 overlong 80 00 accepted")
        except WireError as err:
            if err.code != e:
                fails.append(f"§3.2 overlong 80 00 gave {err.code}")
    bit_budgets = [("§3.4 default pos x bits", Scalar(-262144, 262144, 8).bits, 23),
                   ("§3.4 default pos z bits", Scalar(-32768, 32768, 8).bits, 20),
                   ("§3.4 default vel bits", Scalar(-32768, 32768, 4).bits, 19),
                   ("§3.5 default position bits", DEFAULT_CODEC.pos.bits, 66),
                   ("§3.5 default velocity bits", DEFAULT_CODEC.vel.bits, 57)]
    for name, got, exp in anchors + bit_budgets:
        if got != exp:
            fails.append(f"{name}: got {got}, expected {exp}")
    return fails


# ---------------------------------------------------------------------------
# published codec vectors (shared/fixtures/wire_vectors.json)


def check_published(path):
    fails = []
    d = json.loads(path.read_text())
    n = 0
    for v in d["scalar"]:
        n += 1
        s = Scalar(v["min"], v["max"], v["values_per_unit"])
        w = BitWriter()
        s.write(w, v["value"])
        got = (s.bits, s.steps + 1, s.code(v["value"]), w.bit_len(), w.to_bytes().hex())
        exp = (v["bits"], v["code_count"], v["code"], v["bit_len"], v["bytes_hex"])
        dec = s.read(BitReader(bytes.fromhex(v["bytes_hex"])))
        if got != exp or dec != f32(v["decoded"]):
            fails.append(f"scalar {v}: got {got} decoded {dec}")
    for v in d["vector"]:
        n += 1
        vec = Vector3(v["bounds_min"], v["bounds_max"], v["values_per_unit"])
        w = BitWriter()
        vec.write(w, v["position"])
        dec = vec.read(BitReader(bytes.fromhex(v["bytes_hex"])))
        got = (vec.bits, w.bit_len(), w.to_bytes().hex(), dec)
        exp = (v["bits"], v["bit_len"], v["bytes_hex"], [f32(x) for x in v["decoded"]])
        if got != exp:
            fails.append(f"vector {v}: got {got}")
    for v in d["quat"]:
        n += 1
        nbits = {"Bits9": 9, "Bits10": 10, "Bits15": 15}[v["mode"]]
        inp = [math.nan if x is None else x for x in v["input"]]
        idx, codes = quat_encode_parts(inp, nbits)
        w = BitWriter()
        quat_write(w, inp, nbits)
        dec = quat_read(BitReader(bytes.fromhex(v["bytes_hex"])), nbits)
        got = (idx, codes, w.bit_len(), w.to_bytes().hex(), dec)
        exp = (v["dropped_index"], v["component_codes"], v["total_bits"], v["bytes_hex"],
               [f32(x) for x in v["decoded"]])
        if got != exp:
            fails.append(f"quat {v}: got {got}")
    for v in d["ack"]:
        n += 1
        latest, hist = 0, 0
        for x in v["acks"]:
            if x == 0:
                continue
            if latest == 0:
                latest, hist = x, 0
            elif x > latest:
                dd = x - latest
                if dd < 32:
                    hist = ((hist << dd) & 0xFFFFFFFF) | (1 << (dd - 1))
                elif dd == 32:
                    hist = 1 << 31
                else:
                    hist = 0
                latest = x
            elif x < latest and latest - x <= 32:
                hist |= 1 << (latest - x - 1)
        if (latest, hist, f"{hist:08x}") != (v["latest"], v["history"], v["history_hex"]):
            fails.append(f"ack {v}: got latest {latest} history {hist}")
        if dec_k10(enc_k10({"acked_snapshot_id": latest, "history": hist})) != {
                "acked_snapshot_id": latest, "history": hist}:
            fails.append(f"ack {v}: TSYNC_ACK round trip")
    return n, fails


# ---------------------------------------------------------------------------
# case construction


class Builder:
    def __init__(self, kind):
        self.kind, self.name, self.enc, self.dec = KIND_BY_NUM[kind]
        self.valid = []
        self.malformed = []

    def valid_fields(self, name, fields):
        """Encode `fields`; for lossy kinds the stored fields are the decoded values."""
        body = self.enc(fields)
        decoded = self.dec(body)
        if self.kind not in LOSSY_KINDS:
            assert decoded == fields, (self.kind, name, decoded, fields)
        self._add_valid(name, body, decoded)
        return body

    def valid_raw(self, name, body, expect):
        decoded = self.dec(body)
        assert decoded == expect, (self.kind, name, decoded, expect)
        self._add_valid(name, body, decoded)

    def _add_valid(self, name, body, decoded):
        # JSON kinds: bodies are generated in spec key order, so byte equality is used here;
        # consumers should compare JSON re-encodings semantically.
        reencodes = self.enc(decoded) == body
        assert reencodes == (not name.startswith(DECODE_ONLY)), \
            (self.kind, name, "re-encode" if reencodes else "no re-encode", body.hex())
        self.valid.append({"name": name, "hex": body.hex(), "fields": decoded})

    def bad(self, name, body, error):
        try:
            got = self.dec(body)
        except WireError as e:
            assert e.code == error, (self.kind, name, e.code, error, str(e))
        else:
            raise AssertionError((self.kind, name, "decoded but expected error", error, got))
        self.malformed.append({"name": name, "hex": bytes(body).hex(), "error": error})

    def out(self):
        return {"kind": self.kind, "name": self.name, "valid": self.valid,
                "malformed": self.malformed}


def T(pos, rot, vel):
    return {"position": [float(x) for x in pos], "rotation": [float(x) for x in rot],
            "velocity": [float(x) for x in vel]}


F32_SQRT_HALF = f32(SQRT_HALF)  # 0.70710677 as f32
F32_DT = f32(1.0 / 60.0)


def build_k1():
    b = Builder(1)
    b.valid_fields("x=125 y=64 (little-endian f32)", {"x": 125.0, "y": 64.0})
    b.valid_fields("negative and fractional", {"x": -1.5, "y": f32(0.1)})
    body = enc_k1({"x": 125.0, "y": 64.0})
    b.bad("7 bytes", body[:7], "truncated")
    b.bad("9 bytes (strict canonical decoder)", body + b"\x00", "trailing")
    b.bad("empty", b"", "truncated")
    return b


def build_k2():
    b = Builder(2)
    b.valid_fields("sender 7 + canonical kind-1 body",
                   {"sender_id": 7, "payload_hex": enc_k1({"x": 125.0, "y": 64.0}).hex()})
    b.valid_fields("sender only, empty opaque payload (relay body is opaque)",
                   {"sender_id": 0x0102030405060708, "payload_hex": ""})
    b.bad("7 bytes (no full sender prefix)", bytes(7), "truncated")
    b.bad("empty", b"", "truncated")
    return b


def build_k3():
    b = Builder(3)
    b.valid_fields("ping, empty payload", {"request_id": 1, "method": "ping", "payload_hex": ""})
    b.valid_fields("JSON payload", {"request_id": 0x0011223344556677,
                                    "method": "matchmaker.add",
                                    "payload_hex": b'{"min_count":2}'.hex()})
    b.valid_fields("non-ASCII UTF-8 method, binary payload",
                   {"request_id": 42, "method": "caf\u00e9.\u00fcber", "payload_hex": "00ff10"})
    b.valid_fields("empty method", {"request_id": 9, "method": "", "payload_hex": "01"})
    b.bad("9 bytes: short header", u64(1) + b"\x00", "truncated")
    b.bad("method_len overruns body", u64(1) + u16(5) + b"ping", "truncated")
    b.bad("method is not UTF-8", u64(1) + u16(2) + b"\xff\xfe" + b"xx", "utf8")
    b.bad("method is a lone continuation byte", u64(1) + u16(1) + b"\x80", "utf8")
    return b


def build_k4():
    b = Builder(4)
    b.valid_fields("ok with JSON payload", {"request_id": 1, "status": 0,
                                            "payload_hex": b'{"pong":true}'.hex()})
    b.valid_fields("error with short message", {"request_id": 77, "status": 1,
                                                "payload_hex": b"unknown method".hex()})
    b.valid_fields("ok, empty payload (9 bytes)", {"request_id": 3, "status": 0, "payload_hex": ""})
    b.bad("8 bytes", u64(1), "truncated")
    b.bad("empty", b"", "truncated")
    return b


def build_k5():
    b = Builder(5)
    b.valid_fields("empty body = guest request", {"token": ""})
    b.valid_fields("access token", {"token": "cit.access.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_ab"})
    b.bad("token is not UTF-8", b"cit.\xc3\x28", "utf8")
    return b


def build_k6():
    b = Builder(6)
    b.valid_fields("authenticated", {"status": 0, "user_id": "user-1234", "reason": None})
    b.valid_fields("authenticated, non-ASCII id", {"status": 0, "user_id": "\u00fc-\u4e16",
                                                   "reason": None})
    b.valid_fields("guest", {"status": 1, "user_id": None, "reason": None})
    b.valid_fields("rejected AUTH_FAILED", {"status": 2, "user_id": None, "reason": 0})
    b.valid_fields("rejected AUTH_REQUIRED", {"status": 2, "user_id": None, "reason": 1})
    b.valid_fields("rejected PROTOCOL", {"status": 2, "user_id": None, "reason": 2})
    b.valid_raw(DECODE_ONLY + "rejected without reason byte reads as reason 0", b"\x02",
                {"status": 2, "user_id": None, "reason": 0})
    b.valid_raw(DECODE_ONLY + "guest with trailing bytes (trailer ignored)", b"\x01\xaa\xbb",
                {"status": 1, "user_id": None, "reason": None})
    b.valid_raw(DECODE_ONLY + "rejected with bytes after the reason (ignored)", b"\x02\x01\xff",
                {"status": 2, "user_id": None, "reason": 1})
    b.bad("empty body", b"", "truncated")
    b.bad("authenticated with non-UTF-8 user_id", b"\x00user-\xff", "utf8")
    b.bad("status 3", b"\x03", "value")
    return b


def build_k7():
    b = Builder(7)
    body = b.valid_fields("default negotiation (§5.2)", DEFAULT_HELLO)
    assert body.hex() == DEFAULT_HELLO_HEX
    custom = {"pos_min": [-1000.0, -500.0, -250.0], "pos_max": [1000.0, 500.0, 250.0],
              "pos_vpu": 16, "vel_min": [-2048.0, -2048.0, -1024.0],
              "vel_max": [2048.0, 2048.0, 1024.0], "vel_vpu": 2,
              "quat_mode": 15, "send_rate_hz": 30, "sim_rate_hz": 120}
    b.valid_fields("custom bounds, quat_mode 15", custom)
    b.valid_fields("quat_mode 9", dict(DEFAULT_HELLO, quat_mode=9, send_rate_hz=10))
    b.valid_raw(DECODE_ONLY + "60-byte body (extra byte ignored)", body + b"\xee", DEFAULT_HELLO)
    b.bad("58 bytes", body[:58], "truncated")
    b.bad("empty (client opt-in body is not a server negotiation)", b"", "truncated")
    b.bad("quat_mode 11", body[:56] + b"\x0b" + body[57:], "value")
    b.bad("quat_mode 0", body[:56] + b"\x00" + body[57:], "value")
    return b


def build_k8():
    b = Builder(8)
    for (name, _w, fields, _bits, hexs), label in zip(SEC13_EXAMPLES[:3], (
            "§13 empty snapshot", "§13 full snapshot, defaults",
            "§13 delta snapshot, rotation only (y/w tie drops y)")):
        body = enc_k8(fields)
        assert body.hex() == hexs, (name, body.hex())
        reenc = enc_k8(dec_k8(body)) == body
        b.valid_fields(label if reenc else DECODE_ONLY + label, fields)
    seq_case = {"server_tick": 1000, "snapshot_id": 40, "base_snapshot_id": 38,
                "send_rate_hz": 20, "removed": [4, 5],
                "updates": [
                    {"object_id": 7, "gen_epoch": 3, "position": [1234.5, -9876.25, 42.0],
                     "rotation": [0.0, 0.0, 0.3826834261417389, 0.9238795042037964],
                     "velocity": [-150.25, 0.0, 75.5], "last_input_seq": 4242},
                    {"object_id": 9, "gen_epoch": 1, "position": None, "rotation": None,
                     "velocity": None, "last_input_seq": 17},
                ]}
    b.valid_fields("owner snapshot: all four fields + seq-only update, 2 removals", seq_case)
    vel_only = {"server_tick": 5, "snapshot_id": 6, "base_snapshot_id": 5, "send_rate_hz": 10,
                "removed": [],
                "updates": [{"object_id": 11, "gen_epoch": 0, "position": None, "rotation": None,
                             "velocity": [0.25, -0.5, 32768.0], "last_input_seq": None},
                            {"object_id": 12, "gen_epoch": 65535,
                             "position": [-262144.0, 262144.0, -32768.0], "rotation": None,
                             "velocity": None, "last_input_seq": None}]}
    b.valid_fields("velocity-only and position-only deltas at bound extremes", vel_only)
    empty = enc_k8(SEC13_SNAP_EMPTY)
    delta = enc_k8(SEC13_SNAP_DELTA)
    assert delta[-1] & 0x0F == 0
    b.bad("delta snapshot with non-zero pad bit", delta[:-1] + bytes([delta[-1] | 0x01]),
          "padding")
    b.bad("empty snapshot plus one extra 00 byte", empty + b"\x00", "trailing")
    b.bad("delta snapshot plus one extra 00 byte", delta + b"\x00", "trailing")
    b.bad("update_count 1 but no update data", empty[:-2] + u16(1), "truncated")
    b.bad("removed_count 2 but one id, no updates",
          empty[:13] + u16(2) + u16(0) + u32(1), "truncated")
    b.bad("header cut to 16 bytes", empty[:16], "truncated")
    full = enc_k8(SEC13_SNAP_FULL)
    b.bad("full snapshot cut inside the velocity", full[:40], "truncated")
    # position x code above steps (23-bit field, steps 4194304)
    w = BitWriter()
    for v, n in ((1, 32), (2, 32), (1, 32), (20, 8), (0, 16), (1, 16), (5, 32), (0, 16), (4, 4),
                 (0x7FFFFF, 23), (2097152, 23), (262144, 20)):
        w.write(v, n)
    b.bad("position x code 8388607 > steps 4194304", w.to_bytes(), "value")
    return b


def frame(seq, tick, oid, epoch, vel, flags=0, payload="", fire=None):
    return {"input_seq": seq, "sim_tick": tick, "dt": F32_DT, "object_id": oid,
            "ownership_epoch": epoch, "move_velocity": [float(x) for x in vel], "flags": flags,
            "payload_hex": payload, "fire": fire}


def build_k9():
    b = Builder(9)
    one = {"acked_snapshot_id": 12, "last_seen_snapshot_id": 13,
           "frames": [frame(100, 600, 7, 1, [300.0, 0.0, -150.5])]}
    body1 = b.valid_fields("one frame, no payload, no fire", one)
    fire = {"origin": [10.0, 20.0, 30.0], "direction": [0.0, 1.0, 0.0]}
    two = {"acked_snapshot_id": 0, "last_seen_snapshot_id": 0,
           "frames": [frame(101, 601, 7, 1, [0.0, 0.0, 0.0], flags=0, payload="0102"),
                      frame(102, 602, 7, 1, [1.0, 2.0, 3.0], flags=1, payload="", fire=fire)]}
    body2 = b.valid_fields("two frames, payload, fire on the second", two)
    b.valid_fields("zero frames", {"acked_snapshot_id": 5, "last_seen_snapshot_id": 6,
                                   "frames": []})
    b.valid_fields("flags 0x06 (non-fire bits ignored, no fire block)",
                   {"acked_snapshot_id": 1, "last_seen_snapshot_id": 1,
                    "frames": [frame(1, 2, 3, 4, [0.5, -0.5, 0.0], flags=6, payload="ff")]})
    full32 = {"acked_snapshot_id": 1, "last_seen_snapshot_id": 2,
              "frames": [frame(i + 1, 1000 + i, 3, 2, [0.0, 0.0, 0.0]) for i in range(32)]}
    body32 = b.valid_fields("32 frames (the cap)", full32)
    b.valid_raw(DECODE_ONLY + "bytes after the last frame are not checked", body1 + b"\xde\xad",
                one)
    b.bad("8 bytes", body1[:8], "truncated")
    frame33 = enc_k9({"acked_snapshot_id": 1, "last_seen_snapshot_id": 2,
                      "frames": [frame(33, 1032, 3, 2, [0.0, 0.0, 0.0])]})[9:]
    body33 = body32[:8] + u8(33) + body32[9:] + frame33
    b.bad("frame_count 33 with 33 complete frames", body33, "count")
    b.bad("frame_count 1, frame cut inside the fixed part", body1[:9 + 20], "truncated")
    b.bad("frame_count 1, no frame data", body1[:9], "truncated")
    # payload overrun: first frame of `two` declares payload_len 2; give 1 byte
    b.bad("payload cut short", body2[:9 + 35 + 1], "truncated")
    b.bad("fire block cut short", body2[:-4], "truncated")
    return b


def build_k10():
    b = Builder(10)
    b.valid_fields("acked 10, history 2", {"acked_snapshot_id": 10, "history": 2})
    b.valid_fields("nothing acknowledged", {"acked_snapshot_id": 0, "history": 0})
    b.valid_fields("full history", {"acked_snapshot_id": 4000000000, "history": 0xFFFFFFFF})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", u32(33) + u32(0x80000000) + b"\x01\x02",
                {"acked_snapshot_id": 33, "history": 0x80000000})
    b.bad("7 bytes", (u32(10) + u32(2))[:7], "truncated")
    b.bad("acked 0 with history 1", u32(0) + u32(1), "value")
    return b


def build_k11():
    b = Builder(11)
    b.valid_fields("assign owner-predicted", {"object_id": 7, "role": 0, "owner": 12345,
                                              "ownership_epoch": 1, "gen_epoch": 0, "event": 0})
    b.valid_fields("relevancy enter, server simulated", {
        "object_id": 9, "role": 2, "owner": 0, "ownership_epoch": 0, "gen_epoch": 4, "event": 2})
    b.valid_fields("handoff remote-interpolated", {
        "object_id": 0xFFFFFFFF, "role": 1, "owner": (1 << 53) - 1, "ownership_epoch": 3,
        "gen_epoch": 65535, "event": 1})
    b.valid_fields("relevancy exit, static replicated", {
        "object_id": 1, "role": 3, "owner": 0, "ownership_epoch": 0, "gen_epoch": 1, "event": 3})
    good = enc_k11({"object_id": 7, "role": 0, "owner": 12345, "ownership_epoch": 1,
                    "gen_epoch": 0, "event": 0})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", good + b"\x00",
                {"object_id": 7, "role": 0, "owner": 12345, "ownership_epoch": 1,
                 "gen_epoch": 0, "event": 0})
    b.bad("19 bytes", good[:19], "truncated")
    b.bad("role 4", good[:4] + b"\x04" + good[5:], "value")
    b.bad("event 4", good[:19] + b"\x04", "value")
    return b


def build_k12():
    b = Builder(12)
    hit = {"input_seq": 102, "flags": 1, "object_id": 9, "hit_point": [10.0, 25.5, 30.0],
           "rewind_tick": 598}
    body = b.valid_fields("hit", hit)
    b.valid_fields("miss", {"input_seq": 103, "flags": 0, "object_id": 0,
                            "hit_point": [0.0, 0.0, 0.0], "rewind_tick": 599})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", body + b"\x00\x00", hit)
    b.bad("24 bytes", body[:24], "truncated")
    return b


def bunch_bits(parts):
    w = BitWriter()
    for kind, v, *n in parts:
        if kind == "b":
            w.write(v, n[0])
        elif kind == "v":
            w.write_varint(v)
        elif kind == "raw":
            w.write_bytes(v)
        elif kind == "groups":  # explicit varint groups (more, data)
            for more, data in v:
                w.write(more, 1)
                w.write(data, 7)
    return w


def build_k13():
    b = Builder(13)
    for fields, label, hexs in ((SEC13_BUNCH_DELTA, "§13 delta bunch: bool, int 73, bytes 'hi'",
                                 SEC13_EXAMPLES[3][4]),
                                (SEC13_BUNCH_FULL, "§13 full bunch: int 100", SEC13_EXAMPLES[4][4])):
        body = enc_k13(fields)
        assert body.hex() == hexs
        b.valid_fields(label, fields)
    allf = {"object_id": 1000, "is_full": True, "result_id": 300, "base_id": None,
            "schema_hash_hex": EXAMPLE_SCHEMA["schema_hash_hex"], "layout_version": 1,
            "values": {"0": False, "1": 0, "2": 12.25, "3": [1.5, -2.75, 999.75],
                       "4": [0.1, 0.2, 0.3, 0.9273618495495703], "5": ""}}
    b.valid_fields("full bunch, all six fields (scalar, vector3, quat, empty bytes)", allf)
    sv = {"object_id": 5, "is_full": False, "result_id": 129, "base_id": 128,
          "schema_hash_hex": None, "layout_version": None,
          "values": {"2": -1000.0, "3": [1000.0, 0.0, -0.25], "4": [0.0, 0.0, 0.0, 1.0],
                     "5": "00" * 32}}
    b.valid_fields("delta bunch: scalar min, vector3, identity quat, 32-byte bytes", sv)
    b.valid_fields("delta bunch with empty changed mask",
                   {"object_id": 0, "is_full": False, "result_id": 2, "base_id": 1,
                    "schema_hash_hex": None, "layout_version": None, "values": {}})
    big = {"object_id": 0xFFFFFFFF, "is_full": False, "result_id": (1 << 53) - 1,
           "base_id": (1 << 53) - 2, "schema_hash_hex": None, "layout_version": None,
           "values": {"0": True, "1": 100}}
    b.valid_fields("delta bunch with 8-group result/base varints", big)

    H = bytes.fromhex(EXAMPLE_SCHEMA["schema_hash_hex"])
    mask = lambda *ids: ("b", sum(1 << (5 - i) for i in ids), 6)  # noqa: E731
    # zero result_id (delta, otherwise the §13 delta example)
    tail_delta = [mask(0, 1, 5), ("b", 1, 1), ("b", 73, 7), ("v", 2), ("raw", b"hi")]
    b.bad("result_id 0", bunch_bits([("b", 42, 32), ("b", 0, 1), ("v", 0), ("v", 3)]
                                    + tail_delta).to_bytes(), "value")
    b.bad("delta bunch with base_id 0", bunch_bits([("b", 42, 32), ("b", 0, 1), ("v", 7),
                                                    ("v", 0)] + tail_delta).to_bytes(), "value")
    tail_full = [mask(1), ("b", 100, 7)]
    other = bytes(range(1, 17))
    b.bad("full bunch with a different schema hash",
          bunch_bits([("b", 1, 32), ("b", 1, 1), ("v", 1), ("raw", other), ("b", 1, 32)]
                     + tail_full).to_bytes(), "schema")
    b.bad("full bunch with layout_version 2",
          bunch_bits([("b", 1, 32), ("b", 1, 1), ("v", 1), ("raw", H), ("b", 2, 32)]
                     + tail_full).to_bytes(), "schema")
    d = enc_k13(SEC13_BUNCH_DELTA)
    assert d[-1] & 1 == 0
    b.bad("§13 delta bunch with the pad bit set", d[:-1] + bytes([d[-1] | 1]), "padding")
    b.bad("§13 delta bunch plus one extra 00 byte", d + b"\x00", "trailing")
    fb = enc_k13(SEC13_BUNCH_FULL)
    b.bad("§13 full bunch plus one extra 00 byte", fb + b"\x00", "trailing")
    b.bad("IntRange code 101", bunch_bits([("b", 42, 32), ("b", 0, 1), ("v", 7), ("v", 3),
                                           mask(1), ("b", 101, 7)]).to_bytes(), "value")
    b.bad("IntRange code 127", bunch_bits([("b", 42, 32), ("b", 0, 1), ("v", 7), ("v", 3),
                                           mask(1), ("b", 127, 7)]).to_bytes(), "value")
    b.bad("scalar code 8191 > steps 8000", bunch_bits(
        [("b", 42, 32), ("b", 0, 1), ("v", 7), ("v", 3), mask(2), ("b", 8191, 13)]).to_bytes(),
        "value")
    b.bad("bytes length 33 > max_len 32 (33 bytes present)", bunch_bits(
        [("b", 42, 32), ("b", 0, 1), ("v", 7), ("v", 3), mask(5), ("v", 33),
         ("raw", b"\x61" * 33)]).to_bytes(), "count")
    b.bad("overlong result_id varint (groups 0x87 0x00 = 7)", bunch_bits(
        [("b", 42, 32), ("b", 0, 1), ("groups", [(1, 7), (0, 0)]), ("v", 3)]
        + tail_delta).to_bytes(), "varint")
    b.bad("result_id varint overflows u64 (10th group = 2)", bunch_bits(
        [("b", 42, 32), ("b", 0, 1), ("groups", [(1, 0x7F)] * 9 + [(0, 2)]), ("v", 3)]
        + tail_delta).to_bytes(), "varint")
    b.bad("result_id varint with 11 groups", bunch_bits(
        [("b", 42, 32), ("b", 0, 1), ("groups", [(1, 1)] + [(1, 0)] * 9 + [(0, 1)]), ("v", 3)]
        + tail_delta).to_bytes(), "varint")
    b.bad("§13 delta bunch cut inside the bytes value", d[:10], "truncated")
    b.bad("object_id only", d[:4], "truncated")
    b.bad("§13 full bunch cut inside the schema hash", fb[:12], "truncated")
    return b


def build_k14():
    b = Builder(14)
    ex = b.valid_fields("§6.4 example: object 1, acked 5, history 0",
                        {"entries": [{"object_id": 1, "acked_result_id": 5, "history": 0}]})
    assert ex.hex() == "01000000010500000000"
    b.valid_fields("no entries", {"entries": []})
    b.valid_fields("three entries, multi-group varints", {"entries": [
        {"object_id": 2, "acked_result_id": 0, "history": 0},
        {"object_id": 3, "acked_result_id": 300, "history": 0x80000001},
        {"object_id": 0xFFFFFFFF, "acked_result_id": (1 << 53) - 1, "history": 0xFFFFFFFF}]})
    max_entries = {"entries": [{"object_id": i, "acked_result_id": 1, "history": 0}
                               for i in range(REP_MAX_ENTRIES)]}
    cap = enc_k14(max_entries)  # not stored as a valid case (its fields would be ~1 MB)
    w = BitWriter()
    w.write_varint(REP_MAX_ENTRIES + 1)
    over = w.to_bytes() + cap[2:] + u32(8192) + b"\x01" + u32(0)
    b.bad("entry_count 8193 with 8193 complete entries", over, "count")
    b.bad("entry_count 2, one entry", b"\x02" + ex[1:], "truncated")
    b.bad("§6.4 example cut inside history", ex[:-1], "truncated")
    b.bad("empty body", b"", "truncated")
    b.bad("§6.4 example plus one extra 00 byte", ex + b"\x00", "trailing")
    b.bad("overlong entry_count (80 00)", b"\x80\x00", "varint")
    b.bad("overlong acked_result_id (85 00)", b"\x01" + u32(1) + b"\x85\x00" + u32(0), "varint")
    return b


def build_k15():
    b = Builder(15)
    one = {"entries": [{"class_id": 1, "schema_hash_hex": "000102030405060708090a0b0c0d0e0f",
                        "layout_version": 1}]}
    body = b.valid_fields("one class", one)
    b.valid_fields("no entries", {"entries": []})
    b.valid_fields("two classes", {"entries": [
        {"class_id": 7, "schema_hash_hex": "25ed07bf54d4a1f85bd5bac50d6be206", "layout_version": 1},
        {"class_id": 0xFFFFFFFF, "schema_hash_hex": "d51af9875460e1b0ab0fcde2a6038a50",
         "layout_version": 0xFFFFFFFF}]})
    entry = body[1:]
    w = BitWriter()
    w.write_varint(REP_MAX_ENTRIES + 1)
    b.bad("entry_count 8193 with 8193 complete entries",
          w.to_bytes() + entry * (REP_MAX_ENTRIES + 1), "count")
    b.bad("cut inside the schema hash", body[:10], "truncated")
    b.bad("entry_count 2, one entry", b"\x02" + entry, "truncated")
    b.bad("plus one extra 00 byte", body + b"\x00", "trailing")
    return b


TF_A = T([100.0, -200.5, 30.0], [0.0, 0.0, 0.0, 1.0], [10.0, 0.0, 0.0])
TF_B = T([-1.25, 2.5, 1e6], [0.0, F32_SQRT_HALF, 0.0, F32_SQRT_HALF], [0.0, -3.5, 0.0])


def build_k16():
    b = Builder(16)
    f = {"archetype_id": 3, "transform": TF_A}
    body = b.valid_fields("archetype 3 at rest-ish", f)
    b.valid_fields("archetype 65535, rotated", {"archetype_id": 65535, "transform": TF_B})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", body + b"\x00\x01", f)
    b.bad("41 bytes", body[:41], "truncated")
    return b


def build_k17():
    b = Builder(17)
    f = {"object_id": 7, "archetype_id": 3, "owner": 12345, "transform": TF_A}
    body = b.valid_fields("player-owned spawn", f)
    b.valid_fields("server-owned spawn (owner 0)", {"object_id": 100, "archetype_id": 9,
                                                    "owner": 0, "transform": TF_B})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", body + b"\xff", f)
    b.bad("53 bytes", body[:53], "truncated")
    return b


def build_k18():
    b = Builder(18)
    s1 = {"object_id": 7, "archetype_id": 3, "owner": 12345, "transform": TF_A}
    s2 = {"object_id": 100, "archetype_id": 9, "owner": 0, "transform": TF_B}
    b.valid_fields("empty batch", {"spawns": []})
    b.valid_fields("one spawn", {"spawns": [s1]})
    body = b.valid_fields("two spawns", {"spawns": [s1, s2]})
    b.valid_raw(DECODE_ONLY + "extra bytes after the batch ignored", body + b"\x00",
                {"spawns": [s1, s2]})
    b.bad("count 3, two entries", u16(3) + body[2:], "truncated")
    b.bad("count 2, second entry cut short", body[:-1], "truncated")
    b.bad("1 byte", b"\x00", "truncated")
    return b


def build_k19():
    b = Builder(19)
    b.valid_fields("object 7", {"object_id": 7})
    b.valid_fields("max id", {"object_id": 0xFFFFFFFF})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", u32(7) + b"\x00", {"object_id": 7})
    b.bad("3 bytes", u32(7)[:3], "truncated")
    return b


def build_k20():
    b = Builder(20)
    f = {"object_id": 7, "transform": TF_A}
    body = b.valid_fields("owner state", f)
    b.valid_fields("rotated state", {"object_id": 8, "transform": TF_B})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", body + b"\x00", f)
    b.bad("43 bytes", body[:43], "truncated")
    return b


def build_k21():
    b = Builder(21)
    body = b.valid_fields("room name 'lobby'", {"params_hex": b"lobby".hex()})
    b.valid_fields("empty params", {"params_hex": ""})
    b.valid_fields("opaque non-UTF-8 params", {"params_hex": "fffe00"})
    b.valid_raw(DECODE_ONLY + "trailing bytes ignored", body + b"xyz",
                {"params_hex": b"lobby".hex()})
    b.bad("params_len overruns", u16(6) + b"lobby", "truncated")
    b.bad("1 byte", b"\x00", "truncated")
    return b


def build_room_id(kind):
    b = Builder(kind)
    b.valid_fields("room 42", {"room_id": 42})
    b.valid_fields("large room id", {"room_id": (1 << 53) - 1})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", u64(42) + b"\x00", {"room_id": 42})
    b.bad("7 bytes", u64(42)[:7], "truncated")
    b.bad("empty", b"", "truncated")
    return b


def build_k23():
    b = Builder(23)
    f = {"room_id": 42, "map": "default", "mode": "matchmaker"}
    body = b.valid_fields("matchmaker room", f)
    b.valid_fields("empty mode", {"room_id": 1, "map": "arena_01", "mode": ""})
    b.valid_fields("non-ASCII map", {"room_id": 2, "map": "\u5730\u56f3", "mode": "ffa"})
    b.valid_raw(DECODE_ONLY + "extra bytes ignored", body + b"\x00",  f)
    b.bad("9 bytes", body[:9], "truncated")
    b.bad("map_len overruns", u64(42) + u16(50) + b"default", "truncated")
    b.bad("missing mode length", u64(42) + u16(7) + b"default", "truncated")
    b.bad("mode_len overruns", u64(42) + u16(7) + b"default" + u16(11) + b"matchmaker",
          "truncated")
    b.bad("map is not UTF-8", u64(42) + u16(3) + b"m\xffp" + u16(0), "utf8")
    b.bad("mode is not UTF-8", u64(42) + u16(1) + b"m" + u16(1) + b"\xc0", "utf8")
    return b


def build_k26():
    b = Builder(26)
    f = {"ticket_id": "AbCdEfGhIjKlMnOpQrStUvWx", "match_id": 42,
         "join_token": "jt_0123456789abcdef", "expires_at": 1735689630000}
    b.valid_fields("handoff", f)
    b.valid_raw(DECODE_ONLY + "unknown field tolerated (forward compatibility)",
                json_body(dict(f, region="eu")), dict(f, region="eu"))
    good = json_body(f)
    b.bad("invalid JSON (truncated object)", good[:-1], "json")
    b.bad("missing join_token", json_body({k: v for k, v in f.items() if k != "join_token"}),
          "json")
    b.bad("match_id is a string", json_body(dict(f, match_id="42")), "json")
    b.bad("expires_at is negative", json_body(dict(f, expires_at=-1)), "json")
    b.bad("body is a JSON array", b'["AbCd",42,"jt",1]', "json")
    return b


def build_k27():
    b = Builder(27)
    f = {"id": "n_01HZX", "code": 7, "subject": "Reward", "content": {"coins": 100},
         "sender": "server", "created_at_unix_ms": 1735689600000, "read_at_unix_ms": None}
    b.valid_fields("unread notification", f)
    b.valid_fields("read notification, nested content", dict(
        f, id="n_2", content={"items": [1, 2], "note": "\u00e9t\u00e9"},
        read_at_unix_ms=1735689700000))
    b.valid_raw(DECODE_ONLY + "unknown field tolerated (forward compatibility)",
                json_body(dict(f, priority=1)), dict(f, priority=1))
    b.bad("invalid JSON", b'{"id":"n_1",', "json")
    b.bad("missing id", json_body({k: v for k, v in f.items() if k != "id"}), "json")
    b.bad("code is a string", json_body(dict(f, code="7")), "json")
    b.bad("created_at_unix_ms is a float", json_body(dict(f, created_at_unix_ms=1.5)), "json")
    return b


def build_k28():
    b = Builder(28)
    pres = {"presence_id": "pr_0123456789abcdef", "user_id": "user-alice"}
    base = {"version": 1, "channel_id": "ch_room_42"}

    def ev(t, **kw):
        d = {"version": 1, "type": t, "channel_id": base["channel_id"]}
        d.update(kw)
        return d

    msg = {"id": 17, "sender": "user-alice", "content": "hello \U0001F44B",
           "created_at_unix_ms": 1735689600000, "updated_at_unix_ms": 1735689600000,
           "revision": 1, "last_event_id": 101, "deleted": False}
    upd = dict(msg, content="hello (edited)", updated_at_unix_ms=1735689660000, revision=2,
               last_event_id=102)
    rem = dict(msg, content="", updated_at_unix_ms=1735689720000, revision=3, last_event_id=103,
               deleted=True)
    b.valid_fields("presence.join direct",
                   ev("presence.join", channel_type="direct", presence=pres))
    b.valid_fields("presence.join group", ev("presence.join", channel_type="group", presence=pres))
    b.valid_fields("presence.join room", ev("presence.join", channel_type="room", presence=pres))
    b.valid_fields("presence.leave", ev("presence.leave", presence=pres))
    b.valid_fields("typing true", ev("typing", presence=pres, typing=True,
                                     expires_at=1735689605000))
    b.valid_fields("typing false", ev("typing", presence=pres, typing=False,
                                      expires_at=1735689606000))
    b.valid_fields("message.create", ev("message.create", event_id=101, message=msg))
    b.valid_fields("message.update", ev("message.update", event_id=102, message=upd))
    b.valid_fields("message.remove (tombstone)", ev("message.remove", event_id=103, message=rem))
    b.valid_fields("access.revoked", ev("access.revoked", presence=pres))
    b.valid_fields("resync_required", ev("resync_required", watermark_event_id=103))
    b.valid_fields("resync_required with scopes",
                   ev("resync_required", watermark_event_id=103, scopes=["history", "presence"]))
    leave = ev("presence.leave", presence=pres)
    b.bad("invalid JSON", json_body(leave)[:-2], "json")
    b.bad("missing channel_id", json_body({k: v for k, v in leave.items() if k != "channel_id"}),
          "json")
    b.bad("typing is a string", json_body(ev("typing", presence=pres, typing="true",
                                             expires_at=1735689605000)), "json")
    b.bad("unknown top-level field", json_body(dict(leave, extra=1)), "json")
    b.bad("unknown field inside presence", json_body(ev("presence.leave",
                                                        presence=dict(pres, x=1))), "json")
    b.bad("duplicate key", b'{"version":1,"type":"presence.leave","channel_id":"ch_room_42",'
          b'"channel_id":"ch_room_42","presence":{"presence_id":"pr_0123456789abcdef",'
          b'"user_id":"user-alice"}}', "json")
    b.bad("version 2", json_body(dict(leave, version=2)), "json")
    b.bad("unknown type", json_body(dict(leave, type="presence.update")), "json")
    b.bad("typing without expires_at", json_body(ev("typing", presence=pres, typing=True)),
          "json")
    b.bad("message.create whose message.last_event_id != event_id",
          json_body(ev("message.create", event_id=101, message=dict(msg, last_event_id=100))),
          "json")
    b.bad("message.remove with deleted=false",
          json_body(ev("message.remove", event_id=103, message=dict(rem, deleted=False))), "json")
    b.bad("presence.join with unknown channel_type",
          json_body(ev("presence.join", channel_type="guild", presence=pres)), "json")
    b.bad("message.create missing event_id", json_body(ev("message.create", message=msg)), "json")
    return b


BUILDERS = [build_k1, build_k2, build_k3, build_k4, build_k5, build_k6, build_k7, build_k8,
            build_k9, build_k10, build_k11, build_k12, build_k13, build_k14, build_k15,
            build_k16, build_k17, build_k18, build_k19, build_k20, build_k21,
            lambda: build_room_id(22), build_k23, lambda: build_room_id(24),
            lambda: build_room_id(25), build_k26, build_k27, build_k28]

COMMENT = (
    "Self-derived (NOT published) per-kind body vectors for realtime kinds 1..28, generated by "
    "an independent stdlib-only Python implementation of shared/spec/realtime-wire.md (§1, §3-§9, "
    "§13, §14 'Code does' column) and shared/spec/services.md (§3.5, §4.2, §5.4-§5.5). "
    "Regenerate with `python3 crates/citadel-wire/tests/vectors/gen_kinds.py`; "
    "`python3 crates/citadel-wire/tests/vectors/gen_kinds.py --check` verifies this file is up "
    "to date and re-verifies the §13 worked examples and the published scalar/vector/quat/ack "
    "vectors. Hex is the envelope BODY only (no kind, no framing). "
    "Conventions: (1) valid cases: decode(hex) == fields; encode(fields) == hex unless the name "
    "starts with 'decode-only:' (ignored trailing bytes, missing-but-defaulted bytes, tolerated "
    "unknown JSON fields, or a lossy quaternion that re-quantizes differently). "
    "(2) malformed cases: decoding fails, for exactly one reason, with the listed error code. "
    "(3) kind 8 is decoded with 'codec'; position/rotation/velocity are the DECODED f32 values "
    "(quantized), per-object changed mask is 4 bits (8=last_input_seq,4=pos,2=rot,1=vel; values "
    "in order pos,rot,vel,seq) per §14 #1. "
    "(4) kind 13 is decoded against schemas.example; 'values' keys are field ids as strings; "
    "bool->true/false, int_range->integer, scalar->decoded f32, vector3->[x,y,z] decoded, "
    "quat->[x,y,z,w] decoded, bytes->lowercase hex. The schema hash is a fixed stand-in "
    "(00..0f), not a BLAKE3 digest. "
    "(5) kinds 26-28: hex is compact UTF-8 JSON in spec key order; 'fields' is the JSON object; "
    "only semantic equality is normative (key order/whitespace are not). "
    "Choices where the spec is silent: kind 2 payload is opaque (any length >= 0 after the "
    "8-byte sender); kind 4 status is not range-checked by the decoder (no case depends on it); "
    "kind 6 reason byte is not range-checked; kind 7 decoder checks only length >= 59 and "
    "quat_mode (bounds are validated when the codec is built, §14 #4); kinds 26/27 tolerate "
    "unknown fields, kind 28 is closed (top level and nested presence/message objects) and also "
    "requires: event_id == message.last_event_id for all three message.* types, message.remove "
    "carries deleted=true with empty content, create/update carry deleted=false; kind 27 "
    "read_at_unix_ms is u64 or null; the count-cap cases (kind 9 frame_count 33, kinds 14/15 "
    "entry_count 8193, kind 13 bytes length 33) carry complete data so 'count' is the only "
    "possible error; the overlong-varint case uses groups 0x87 0x00 (value 7, not 0) so it is "
    "not also a zero result_id; 'trailing' cases append a 00 byte so pad bits stay zero."
)


def generate():
    kinds = []
    for build in BUILDERS:
        kinds.append(build().out())
    assert [k["kind"] for k in kinds] == list(range(1, 29))
    return {
        "_comment": COMMENT,
        "error_codes": ERROR_CODES,
        "codec": DEFAULT_CODEC.desc,
        "schemas": {"example": EXAMPLE_SCHEMA},
        "kinds": kinds,
    }


def render(doc):
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"


def summary(doc):
    lines = []
    tv = tm = 0
    for k in doc["kinds"]:
        nv, nm = len(k["valid"]), len(k["malformed"])
        tv += nv
        tm += nm
        errs = sorted({m["error"] for m in k["malformed"]})
        lines.append(f"  {k['kind']:2d} {k['name']:<20} valid {nv:2d}  malformed {nm:2d}  "
                     f"{','.join(errs)}")
    lines.append(f"  total: {tv} valid, {tm} malformed, {tv + tm} cases")
    return "\n".join(lines)


def main(argv):
    check = "--check" in argv[1:]
    fails = check_sec13()
    for f in fails:
        print("FAIL", f)
    if not fails:
        print(f"ok: §13 worked examples ({len(SEC13_EXAMPLES)} hex strings) and spec anchors "
              "reproduced")
    vec_path = WIRE_VECTORS if WIRE_VECTORS.is_file() else LOCAL_WIRE_VECTORS
    if vec_path.is_file():
        n, pf = check_published(vec_path)
        for f in pf:
            print("FAIL published", f)
        if not pf:
            print(f"ok: {n} published scalar/vector/quat/ack vectors reproduced ({vec_path})")
        fails += pf
    else:
        print(f"note: {WIRE_VECTORS.parent} not found (nor {LOCAL_WIRE_VECTORS.name} next to "
              "this script); skipping the published-vector re-check")
    doc = generate()
    text = render(doc)
    print(summary(doc))
    if check:
        if not OUT_PATH.is_file():
            print(f"FAIL: {OUT_PATH} does not exist; run without --check to generate it")
            return 1
        if OUT_PATH.read_text(encoding="utf-8") != text:
            print(f"FAIL: {OUT_PATH} differs from the generated output; rerun without --check")
            return 1
        print(f"ok: {OUT_PATH.name} is up to date")
    else:
        OUT_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {OUT_PATH}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
