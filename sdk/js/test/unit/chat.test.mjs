// The chat cursor state machine (services.md §5.5).
import { test } from "node:test";
import assert from "node:assert/strict";
import { ChatEventCursor, ChatEventError } from "../../dist/index.js";

const CH = "ch_1";
const presence = { presence_id: "pr_1", user_id: "u1" };
const msg = (eventId, type = "message.create") => ({
  version: 1,
  type,
  channel_id: CH,
  event_id: eventId,
  message: { id: 1, sender: "u1", content: type === "message.remove" ? "" : "hi", created_at_unix_ms: 1, updated_at_unix_ms: 1, revision: 1, last_event_id: eventId, deleted: type === "message.remove" },
});

test("in-order events apply and advance the watermark; repeats are duplicates", () => {
  const c = new ChatEventCursor(CH, 10);
  assert.equal(c.observe(msg(11)), "apply");
  assert.equal(c.observe(msg(12, "message.update")), "apply");
  assert.equal(c.watermark, 12n);
  assert.equal(c.observe(msg(12)), "duplicate");
  assert.equal(c.observe(msg(3)), "duplicate");
  assert.equal(c.state, "live");
});

test("a cursor without a watermark takes the first durable event as its base", () => {
  const c = new ChatEventCursor(CH);
  assert.equal(c.observe(msg(40)), "apply");
  assert.equal(c.watermark, 40n);
});

test("a gap asks for a reconcile; history then the acknowledgement return to live", () => {
  const c = new ChatEventCursor(CH, 10);
  assert.equal(c.observe(msg(13)), "reconcile_gap");
  assert.equal(c.state, "reconcile_required");
  assert.equal(c.requiredWatermark, 13n);
  assert.equal(c.observe(msg(14)), "reconcile_gap", "nothing applies while reconciling");
  assert.equal(c.requiredWatermark, 14n);
  c.historyApplied(12);
  assert.equal(c.state, "reconcile_required", "history older than the gap is not enough");
  c.historyApplied(14);
  assert.equal(c.state, "ack_required");
  assert.throws(() => c.acknowledged(13), ChatEventError);
  c.acknowledged(14);
  assert.equal(c.state, "live");
  assert.equal(c.observe(msg(14)), "duplicate");
  assert.equal(c.observe(msg(15)), "apply");
});

test("resync_required moves to reconcile with the server's watermark", () => {
  const c = new ChatEventCursor(CH, 5);
  assert.equal(c.observe({ version: 1, type: "resync_required", channel_id: CH, watermark_event_id: 9 }), "resync_required");
  assert.equal(c.state, "reconcile_required");
  assert.equal(c.requiredWatermark, 9n);
});

test("typing is tracked per presence and expires at expires_at", () => {
  const c = new ChatEventCursor(CH, 0);
  assert.equal(c.observe({ version: 1, type: "typing", channel_id: CH, presence, typing: true, expires_at: 1000 }), "typing");
  assert.deepEqual(c.typingPresences, ["pr_1"]);
  assert.deepEqual(c.expireTyping(999), []);
  assert.deepEqual(c.expireTyping(1000), ["pr_1"]);
  assert.equal(c.observe({ version: 1, type: "presence.join", channel_id: CH, channel_type: "room", presence }), "ephemeral");
  assert.equal(c.state, "live", "typing and presence never trigger a resync");
});

test("access.revoked is terminal until a fresh join", () => {
  const c = new ChatEventCursor(CH, 3);
  assert.equal(c.observe({ version: 1, type: "access.revoked", channel_id: CH, presence }), "access_revoked");
  assert.equal(c.state, "revoked");
  assert.equal(c.observe(msg(4)), "access_revoked");
  c.disconnected();
  assert.equal(c.state, "revoked");
  c.rejoined({ channel_id: CH, watermark_event_id: 3 });
  assert.equal(c.state, "live");
});

test("a reconnect requires a rejoin; a newer join watermark requires a reconcile", () => {
  const c = new ChatEventCursor(CH, 7);
  c.disconnected();
  assert.equal(c.state, "rejoin_required");
  assert.equal(c.observe(msg(8)), "reconcile_gap");
  c.rejoined({ channel_id: CH, watermark_event_id: 9 });
  assert.equal(c.state, "reconcile_required");
  assert.equal(c.watermark, 7n, "rejoining never advances the watermark");
  const d = new ChatEventCursor(CH, 7);
  d.disconnected();
  d.rejoined({ channel_id: CH, watermark_event_id: 7 });
  assert.equal(d.state, "live");
});

test("events of another channel are refused", () => {
  const c = new ChatEventCursor("ch_other", 0);
  assert.throws(() => c.observe(msg(1)), ChatEventError);
});
