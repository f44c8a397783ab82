// Framing: partial input, several frames per chunk, size checks before
// allocation, datagrams.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "../../dist/index.js";

test("a frame round-trips and may arrive byte by byte", () => {
  const env = new sdk.Envelope(sdk.KIND_RPC_REQUEST, sdk.encodeRpcRequest(1n, "ping"));
  const frame = env.encodeFrame();
  assert.equal(sdk.toHex(frame.subarray(0, 6)), "00000010" + "0003");
  const dec = new sdk.FrameDecoder();
  const got = [];
  for (const b of frame) got.push(...dec.push(Uint8Array.of(b)));
  assert.equal(got.length, 1);
  assert.equal(got[0].kind, 3);
  assert.deepEqual(got[0].body, env.body);
  assert.equal(dec.buffered, 0);
});

test("several frames in one chunk decode in order", () => {
  const a = new sdk.Envelope(100, Uint8Array.of(1, 2)).encodeFrame();
  const b = new sdk.Envelope(101).encodeFrame();
  const joined = new Uint8Array([...a, ...b, 0, 0]);
  const dec = new sdk.FrameDecoder();
  const got = dec.push(joined);
  assert.deepEqual(got.map((e) => e.kind), [100, 101]);
  assert.equal(dec.buffered, 2, "a partial length prefix is kept");
});

test("an oversized or undersized length is malformed before any allocation", () => {
  const dec = new sdk.FrameDecoder(1024);
  assert.throws(() => dec.push(Uint8Array.of(0, 0, 4, 1)), sdk.MalformedEnvelopeError);
  assert.throws(() => new sdk.FrameDecoder().push(Uint8Array.of(0x00, 0x80, 0, 1)), sdk.MalformedEnvelopeError);
  assert.throws(() => new sdk.FrameDecoder().push(Uint8Array.of(0, 0, 0, 1, 9)), sdk.MalformedEnvelopeError);
});

test("datagrams carry the kind without a length", () => {
  const env = new sdk.Envelope(sdk.KIND_POSITION, sdk.encodePosition(1, 2));
  const back = sdk.decodeDatagram(env.encodeDatagram());
  assert.equal(back.kind, 1);
  assert.deepEqual(sdk.decodePosition(back.body), { x: 1, y: 2 });
  assert.throws(() => sdk.decodeDatagram(Uint8Array.of(7)), sdk.MalformedEnvelopeError);
});

test("the strict JSON parser keeps large ids exact and rejects duplicates", () => {
  assert.equal(sdk.parseJson('{"a":18446744073709551615}').a, 18446744073709551615n);
  assert.equal(sdk.parseJson('{"a":9007199254740991}').a, 9007199254740991);
  assert.throws(() => sdk.parseJson('{"a":1,"a":2}'), sdk.JsonSyntaxError);
  assert.throws(() => sdk.parseJson("[".repeat(100) + "]".repeat(100)), sdk.JsonSyntaxError);
  assert.equal(sdk.stringifyJson({ id: 18446744073709551615n }), '{"id":18446744073709551615}');
});

test("bit-varints match byte LEB128 when aligned", () => {
  for (const [v, hex] of [[0n, "00"], [127n, "7f"], [128n, "8001"], [300n, "ac02"]]) {
    const w = new sdk.BitWriter();
    w.writeVarint(v);
    assert.equal(sdk.toHex(w.finish()), hex);
    assert.equal(new sdk.BitReader(sdk.fromHex(hex)).readVarint(), v);
  }
});
