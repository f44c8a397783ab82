// Hostile input: every decoder, fed truncated, mutated and random bodies
// (a fixed-seed PRNG, so failures reproduce), either decodes or throws a
// WireError — never another exception, never a hang.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "../../dist/index.js";
import { adapters, vectors } from "../vectors.mjs";

function prng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

function mutants(hex, rand, count) {
  const base = sdk.fromHex(hex);
  const out = [];
  for (let i = 0; i <= base.length; i++) out.push(base.subarray(0, i));
  for (let n = 0; n < count; n++) {
    const m = Uint8Array.from(base);
    const flips = 1 + Math.floor(rand() * 4);
    for (let f = 0; f < flips && m.length; f++) m[Math.floor(rand() * m.length)] = Math.floor(rand() * 256);
    out.push(m);
  }
  for (let n = 0; n < 20; n++) out.push(Uint8Array.from({ length: Math.floor(rand() * 80) }, () => Math.floor(rand() * 256)));
  return out;
}

test("every decoder accepts or rejects with a WireError", () => {
  const rand = prng(19);
  let tried = 0;
  for (const k of vectors.kinds) {
    const dec = adapters[k.kind].dec;
    for (const c of [...k.valid, ...k.malformed]) {
      if (c.hex.length > 4000) continue; // the count-cap cases are large and already covered
      for (const body of mutants(c.hex, rand, 40)) {
        tried++;
        try {
          dec(body);
        } catch (e) {
          assert.ok(e instanceof sdk.WireError, `kind ${k.kind} threw ${e?.name}: ${e?.message}`);
        }
      }
    }
  }
  assert.ok(tried > 5000);
});

test("the frame decoder survives random chunking and garbage", () => {
  const rand = prng(7);
  for (let round = 0; round < 200; round++) {
    const dec = new sdk.FrameDecoder(1 << 16);
    try {
      for (let i = 0; i < 20; i++) dec.push(Uint8Array.from({ length: Math.floor(rand() * 64) }, () => Math.floor(rand() * 256)));
    } catch (e) {
      assert.ok(e instanceof sdk.MalformedEnvelopeError, `${e?.name}`);
    }
  }
  // Valid frames split at every boundary decode identically.
  const frames = [new sdk.Envelope(3, sdk.encodeRpcRequest(9n, "echo", sdk.encodeUtf8("x"))), new sdk.Envelope(101, new Uint8Array(300))];
  const bytes = new Uint8Array(frames.reduce((a, f) => a + f.encodeFrame().length, 0));
  let off = 0;
  for (const f of frames) {
    bytes.set(f.encodeFrame(), off);
    off += f.encodeFrame().length;
  }
  for (let cut = 0; cut <= bytes.length; cut++) {
    const dec = new sdk.FrameDecoder();
    const got = [...dec.push(bytes.subarray(0, cut)), ...dec.push(bytes.subarray(cut))];
    assert.deepEqual(got.map((e) => e.kind), [3, 101]);
  }
});

test("the strict JSON parser rejects hostile text with JsonSyntaxError only", () => {
  const rand = prng(3);
  const alphabet = '{}[]":,0123456789.eE-+tfnrul\\ ab';
  for (let i = 0; i < 3000; i++) {
    const text = Array.from({ length: Math.floor(rand() * 40) }, () => alphabet[Math.floor(rand() * alphabet.length)]).join("");
    try {
      sdk.parseJson(text);
    } catch (e) {
      assert.ok(e instanceof sdk.JsonSyntaxError, `${JSON.stringify(text)} threw ${e?.name}`);
    }
  }
});
