// The SDK against the real `citadel` binary (spawned on free ports): guest
// and token handshakes, rooms, relay between two clients, RPC, HTTP routes,
// actors and snapshots with the default game's patrolling NPC.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import * as sdk from "../../dist/index.js";
import { startNode } from "../harness.mjs";

let node;
const clients = [];
before(async () => {
  node = await startNode();
});
after(async () => {
  for (const c of clients) c.close();
  await node?.stop();
});

async function connect() {
  const c = await sdk.CitadelClient.connect(node.wsUrl, { WebSocket, timeoutMs: 5000 });
  clients.push(c);
  return c;
}

async function guest() {
  const c = await connect();
  const r = await c.handshakeGuest();
  assert.equal(r.status, sdk.AUTH_STATUS_GUEST);
  return c;
}

let deviceSeq = 0;
async function register() {
  const http = new sdk.CitadelHttpClient(node.httpUrl);
  const n = `${process.pid}-${++deviceSeq}`;
  return { http, pair: await http.authenticateDevice({ id: `device-${n}`, create: true, username: `player${n.replace("-", "x")}` }) };
}

test("guest handshake", async () => {
  const c = await connect();
  assert.equal(c.transportKind, "websocket");
  assert.equal(c.isOpen, true);
  assert.deepEqual(await c.handshakeGuest(), { status: 1, userId: null, reasonClass: null });
});

test("token handshake with a session from the HTTP API; a bad token is rejected", async () => {
  const { pair } = await register();
  assert.equal(pair.created, true);
  const c = await connect();
  const r = await c.handshakeToken(pair.token);
  assert.equal(r.status, sdk.AUTH_STATUS_AUTHENTICATED);
  assert.equal(r.userId, pair.user_id);

  const bad = await connect();
  const rejected = await bad.handshakeToken("cit.access.not-a-real-token");
  assert.equal(rejected.status, sdk.AUTH_STATUS_REJECTED);
  assert.equal(rejected.reasonClass, sdk.AUTH_REASON_AUTH_FAILED);
  const info = await bad.whenClosed;
  assert.equal(bad.isOpen, false, `closed after a rejection (${info.reason})`);
  await assert.rejects(bad.callRpc("ping"), sdk.ConnectionClosedError);

  const strict = await connect();
  await assert.rejects(strict.handshakeToken("cit.access.nope", { throwOnReject: true }), (e) => e instanceof sdk.HandshakeRejectedError && e.reasonClass === 0);
  await assert.rejects(strict.handshakeToken(""), TypeError);
});

test("HTTP profile routes and typed errors", async () => {
  const { http, pair } = await register();
  const me = await http.getAccount(pair.token);
  assert.equal(me.user_id, pair.user_id);
  const renamed = await http.updateAccount(pair.token, { display_name: "Ada" });
  assert.equal(renamed.display_name, "Ada");
  const found = await http.lookupUsers(pair.token, { user_ids: [pair.user_id] });
  assert.equal(found.users.length, 1);
  await assert.rejects(http.getAccount("cit.access.garbage"), (e) => e instanceof sdk.HttpApiError && e.status === 401 && e.code === "authentication_failed");
  await assert.rejects(http.authenticateDevice({ id: "x", unknown_field: 1 }), (e) => e.status === 400 && e.code === "invalid_request");
  const next = await http.refreshSession(pair.refresh_token);
  assert.equal(next.user_id, pair.user_id);
  await assert.rejects(http.refreshSession(pair.refresh_token), (e) => e.code === "authentication_failed");
  await http.logoutSession({ accessToken: next.token, refreshToken: next.refresh_token });
  await http.logoutSession({ accessToken: next.token });
});

test("rooms: join-or-create by name, join by id, leave", async () => {
  const a = await guest();
  const b = await guest();
  const joined = [];
  a.onRoomJoined((room) => joined.push(room));
  const room = await a.joinOrCreateRoom("js-lobby");
  assert.equal(typeof room.roomId, "bigint");
  assert.equal(room.map, "js-lobby");
  assert.deepEqual(a.currentRoom, room);
  assert.deepEqual(joined, [room]);
  const same = await b.joinRoom(room.roomId);
  assert.equal(same.roomId, room.roomId);
  a.sendMapReady(room.roomId);
  a.leaveRoom(room.roomId);
  assert.equal(a.currentRoom, null);
  const c = await guest();
  const again = await c.joinOrCreateRoom("js-lobby");
  assert.equal(again.roomId, room.roomId, "the room lives while b is in it");
});

test("relay between two clients: positions and application kinds", async () => {
  const a = await guest();
  const b = await guest();
  await a.joinOrCreateRoom("js-relay");
  await b.joinOrCreateRoom("js-relay");
  const whoami = sdk.splitSender;
  const gotPos = b.waitForKind(sdk.KIND_PEER_POSITION);
  a.sendPosition(12.5, -3.25);
  const tagged = whoami(await gotPos);
  assert.equal(typeof tagged.senderId, "bigint");
  assert.deepEqual(sdk.decodePosition(tagged.payload), { x: 12.5, y: -3.25 });

  const gotApp = b.waitForKind(120);
  a.send(120, "hello room");
  const body = await gotApp;
  assert.equal(new TextDecoder().decode(body.subarray(body.length - 10)), "hello room");
  const seenByA = [];
  a.on(sdk.KIND_PEER_POSITION, (p) => seenByA.push(p));
  b.sendPosition(1, 2);
  await a.waitForKind(sdk.KIND_PEER_POSITION);
  assert.equal(sdk.splitSender(seenByA[0]).senderId !== tagged.senderId, true, "b has its own participant id");
});

test("RPC: ping, echo, unknown method, concurrent calls", async () => {
  const c = await guest();
  assert.equal(new TextDecoder().decode(await c.callRpc("ping")), "pong");
  const payload = Uint8Array.from([0, 1, 2, 255]);
  assert.deepEqual(await c.callRpc("echo", payload), payload);
  await assert.rejects(c.callRpc("no.such.method"), (e) => e instanceof sdk.RpcError && typeof e.requestId === "bigint" && e.serverMessage.length > 0);
  const many = await Promise.all(Array.from({ length: 12 }, (_, i) => c.callRpc("echo", `n${i}`)));
  assert.deepEqual(many.map((b) => new TextDecoder().decode(b)), Array.from({ length: 12 }, (_, i) => `n${i}`));
});

test("actors and snapshots: avatars move for each other and the demo NPC patrols", async () => {
  const a = await guest();
  const b = await guest();
  await a.joinOrCreateRoom("demo-js");
  await b.joinOrCreateRoom("demo-js");
  const helloA = await a.enableTransformSync();
  await b.enableTransformSync();
  assert.equal(helloA.quatMode, 10);
  const at = (x, y) => ({ position: [x, y, 0], rotation: [0, 0, 0, 1], velocity: [0, 0, 0] });
  const idA = await a.announceActor(0, at(0, 0));
  const idB = await b.announceActor(0, at(100, 100));
  assert.notEqual(idA, idB);
  a.send(150, "demo-js"); // DEMO_HELLO: the default game spawns the patrolling NPC

  const deadline = Date.now() + 15_000;
  let x = 0;
  let npc = null;
  const npcPositions = [];
  let seenA = null;
  while (Date.now() < deadline) {
    x += 20;
    a.sendActorState(at(x, 0));
    await new Promise((r) => setTimeout(r, 50));
    const view = b.actorView;
    npc = [...view.actors.values()].find((act) => act.owner === 0n) ?? null;
    const state = view.latest();
    if (npc && state?.has(npc.objectId)) npcPositions.push(state.get(npc.objectId).position.slice());
    if (state?.has(idA)) seenA = state.get(idA).position[0];
    const moved = new Set(npcPositions.map((p) => p.join(","))).size;
    if (npc && moved >= 3 && seenA !== null && seenA >= 200) break;
  }
  assert.ok(npc, "b saw a server-owned NPC spawn");
  assert.ok(new Set(npcPositions.map((p) => p.join(","))).size >= 3, `the NPC moves: ${JSON.stringify(npcPositions.slice(-3))}`);
  assert.ok(seenA !== null && seenA >= 200, `b sees a's avatar move (x=${seenA})`);
  assert.ok(b.actorView.snapshotsApplied > 5);
  const rendered = b.actorView.render();
  assert.ok(rendered.has(idA), "a's avatar is rendered by interpolation");
  assert.ok([...a.actorView.actors.values()].some((act) => act.objectId === idB), "a knows b's avatar");
});

test("notifications: list and mark read through the wrappers; guests are refused", async () => {
  const { execFile } = await import("node:child_process");
  const { promisify } = await import("node:util");
  const { pair } = await register();
  await promisify(execFile)(node.bin, [
    "notification", "send", pair.user_id, "--code", "7", "--subject", "Reward", "--content", '{"coins":100}', "--config", node.configPath,
  ]);
  const c = await connect();
  await c.handshakeToken(pair.token);
  const listed = await c.listNotifications({ limit: 10 });
  assert.equal(listed.notifications.length, 1);
  const n = listed.notifications[0];
  assert.equal(n.subject, "Reward");
  assert.equal(n.read_at_unix_ms, null);
  assert.deepEqual((await c.markNotificationsRead([n.id])).read_ids, [n.id]);
  assert.deepEqual((await c.markNotificationsRead([n.id])).read_ids, [], "idempotent");
  const g = await guest();
  await assert.rejects(g.listNotifications(), (e) => e instanceof sdk.RpcError && e.serverMessage === "authentication required");
});
