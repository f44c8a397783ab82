// Every case of the shared vectors file: valid cases decode to the expected
// fields and re-encode byte-exact; malformed cases fail with the listed code.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "../../dist/index.js";
import { adapters, vectors } from "../vectors.mjs";

test("the vectors file covers kinds 1 to 28", () => {
  assert.deepEqual(vectors.kinds.map((k) => k.kind), Array.from({ length: 28 }, (_, i) => i + 1));
});

for (const k of vectors.kinds) {
  const a = adapters[k.kind];
  for (const c of k.valid) {
    test(`kind ${k.kind} ${k.name}: valid '${c.name}'`, () => {
      const body = sdk.fromHex(c.hex);
      assert.deepEqual(a.dec(body), c.fields);
      if (!c.name.startsWith("decode-only:")) assert.equal(sdk.toHex(a.enc(c.fields)), c.hex);
    });
  }
  for (const c of k.malformed) {
    test(`kind ${k.kind} ${k.name}: malformed '${c.name}' -> ${c.error}`, () => {
      assert.throws(() => a.dec(sdk.fromHex(c.hex)), (e) => e instanceof sdk.WireError && e.code === c.error);
    });
  }
}
