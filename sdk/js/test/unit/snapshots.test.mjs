// Snapshot reconstruction, acknowledgements and interpolation (the Rust
// client's rules), driven by encoded kind-8 bodies.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "../../dist/index.js";

const codec = new sdk.TransformCodec();
const I = [0, 0, 0, 1];
const up = (objectId, position, extra = {}) => ({ objectId, genEpoch: 0, position, rotation: I, velocity: null, lastInputSeq: null, ...extra });
const snap = (snapshotId, base, updates, removed = [], tick = snapshotId * 3) =>
  sdk.encodeSnapshot({ serverTick: tick, snapshotId, baseSnapshotId: base, sendRateHz: 20, removed, updates }, codec);

test("full, delta, removal, stale and unknown-base snapshots", () => {
  const r = new sdk.SnapshotReceiver(codec);
  const a = r.handleSnapshot(snap(1, 0, [up(1, [100, 0, 0]), up(2, [0, 50, 0])]));
  assert.equal(a.state.size, 2);
  assert.deepEqual(r.pollAck(), { ackedSnapshotId: 1, history: 0 });
  assert.equal(r.pollAck(), null, "one ack per applied batch");
  const b = r.handleSnapshot(snap(2, 1, [{ ...up(1, [200, 0, 0]), rotation: null }], [2]));
  assert.deepEqual(b.state.get(1).position, [200, 0, 0]);
  assert.deepEqual(b.state.get(1).rotation, a.state.get(1).rotation, "absent fields keep the base value");
  assert.equal(b.state.has(2), false);
  assert.equal(r.handleSnapshot(snap(2, 1, [])), "stale");
  assert.equal(r.handleSnapshot(snap(9, 7, [])), "unknown_base");
  assert.equal(r.handleSnapshot(Uint8Array.of(1, 2)), "malformed");
  const c = r.handleSnapshot(snap(4, 2, [{ ...up(3, [1, 1, 1]), rotation: null }]));
  assert.equal(c.state.has(3), false, "a full entry without rotation is skipped");
  assert.equal(c.gap, 1);
  assert.deepEqual(r.pollAck(), { ackedSnapshotId: 4, history: 0b110 }, "ids 2 and 1 acknowledged in the window");
  const d = r.handleSnapshot(snap(5, 4, [{ ...up(1, null), genEpoch: 1, rotation: null, position: [5, 5, 5] }]));
  assert.equal(d.state.has(1), true);
  assert.equal(d.state.get(1).genEpoch, 0, "a new generation without rotation is not a delta");
});

test("the ack window follows §3.8", () => {
  const w = new sdk.AckWindow();
  w.ack(5);
  w.ack(7);
  assert.deepEqual([w.latest, w.history], [7, 0b10]);
  w.ack(6);
  assert.deepEqual([w.latest, w.history], [7, 0b11]);
  w.ack(39);
  assert.deepEqual([w.latest, w.history], [39, 0x80000000]);
  w.ack(100);
  assert.deepEqual([w.latest, w.history], [100, 0]);
});

test("interpolation renders between samples, clamps before and extrapolates at most 0.25 s", () => {
  const r = new sdk.SnapshotReceiver(codec);
  const interp = new sdk.Interpolator(60);
  interp.handleApplied(r.handleSnapshot(snap(1, 0, [up(1, [0, 0, 0])], [], 60)));
  interp.handleApplied(r.handleSnapshot(snap(2, 1, [{ ...up(1, [300, 0, 0]), rotation: null }], [], 63)));
  assert.equal(interp.sample(61.5).get(1).position[0], 150);
  assert.equal(interp.sample(10).get(1).position[0], 0);
  assert.equal(interp.sample(1000).get(1).position[0], 300, "no velocity: hold the last position");
  const v = new sdk.Interpolator(60);
  const r2 = new sdk.SnapshotReceiver(codec);
  v.handleApplied(r2.handleSnapshot(snap(1, 0, [up(1, [0, 0, 0], { velocity: [100, 0, 0] })], [], 60)));
  assert.equal(v.sample(60 + 600).get(1).position[0], 25, "100 cm/s for at most 0.25 s");
  assert.ok(v.delayTicks() > 0 && v.delayTicks() <= 0.4 * 60);
  const mid = sdk.slerp([0, 0, 0, 1], [0, Math.SQRT1_2, 0, Math.SQRT1_2], 0.5);
  assert.ok(Math.abs(mid[1] - Math.sin(Math.PI / 8)) < 1e-5);
});

test("ActorView latches its own spawn right before the batch", () => {
  const view = new sdk.ActorView();
  const t = sdk.IDENTITY_TRANSFORM;
  view.announce(0, t);
  const spawn = (objectId, owner) => new sdk.Envelope(sdk.KIND_NA_SPAWN, sdk.encodeActorSpawn({ objectId, archetypeId: 0, owner, transform: t }));
  view.handleEnvelope(spawn(9, 2n)); // another client's spawn crossing ours
  view.handleEnvelope(spawn(4, 1n)); // ours
  const events = view.handleEnvelope(new sdk.Envelope(sdk.KIND_NA_SPAWN_BATCH, sdk.encodeActorSpawnBatch([{ objectId: 1, archetypeId: 1, owner: 0n, transform: t }])));
  assert.equal(view.localObject, 4);
  assert.deepEqual(events.map((e) => [e.actor.objectId, e.actor.isLocal]), [[9, false], [4, true], [1, false]]);
  view.handleEnvelope(new sdk.Envelope(sdk.KIND_NA_DESPAWN, sdk.encodeActorDespawn(4)));
  assert.equal(view.localObject, null);
  assert.equal(view.actors.has(4), false);
});
