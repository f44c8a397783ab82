/**
 * The /demo page: a canvas arena where every tab is a player. Joins room
 * "demo" (or ?room=), announces an avatar, moves it with arrow keys/WASD,
 * renders everyone (and the default game's patrolling NPC) from
 * interpolated snapshots, and shows transport, RTT, snapshot rate and
 * bytes per second. `window.citadelDemo` exposes the state for tests.
 * Bundled by `npm run demo` into crates/citadel-server/demo/demo.js.
 */
import { CitadelClient, type ActorTransform } from "../src/index.js";

interface DemoConfig {
  webSocketUrl: string | null;
  webTransportEnabled: boolean;
}

const DEMO_HELLO = 150;
const SPEED_CM_S = 400;
const BOUNDS = { minX: -1000, maxX: 1000, minY: -600, maxY: 600 };
const STATE_INTERVAL_MS = 50;

const params = new URLSearchParams(location.search);
const roomName = params.get("room") || "demo";
const transportChoice = params.get("transport") || "auto";
const config = JSON.parse(document.getElementById("citadel-config")!.textContent || "{}") as DemoConfig;
const canvas = document.getElementById("arena") as HTMLCanvasElement;
const ctx2d = canvas.getContext("2d")!;
const overlay = document.getElementById("overlay")!;

const state = {
  status: "connecting",
  error: null as string | null,
  transport: null as string | null,
  roomId: null as string | null,
  localObject: null as number | null,
  local: { x: 0, y: 0 },
  /** Rendered positions of every other actor, by object id. */
  remotes: {} as Record<number, { x: number; y: number; npc: boolean }>,
  rttMs: null as number | null,
  snapshotsPerSecond: 0,
  bytesPerSecond: 0,
};
(window as unknown as { citadelDemo: typeof state }).citadelDemo = state;

const keys = new Set<string>();
addEventListener("keydown", (e) => {
  keys.add(e.key.toLowerCase());
  if (e.key.startsWith("Arrow")) e.preventDefault();
});
addEventListener("keyup", (e) => keys.delete(e.key.toLowerCase()));
addEventListener("blur", () => keys.clear());

function transformAt(x: number, y: number, vx = 0, vy = 0): ActorTransform {
  return { position: [x, y, 0], rotation: [0, 0, 0, 1], velocity: [vx, vy, 0] };
}

async function connect(): Promise<CitadelClient> {
  const ws = config.webSocketUrl ?? `ws://${location.hostname}:7352/`;
  const opts = { timeoutMs: 10_000, diagnostics: (l: string) => console.debug("[citadel]", l) };
  if (transportChoice === "ws") return CitadelClient.connect(ws, opts);
  if (transportChoice === "wt") return CitadelClient.connectAuto({ httpBaseUrl: location.origin }, opts);
  return CitadelClient.connectAuto({ httpBaseUrl: config.webTransportEnabled ? location.origin : undefined, webSocketUrl: ws }, opts);
}

async function main(): Promise<void> {
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

  // RTT: a ping RPC every second.
  setInterval(async () => {
    const t0 = performance.now();
    try {
      await client.callRpc("ping", undefined, { timeoutMs: 5000 });
      state.rttMs = Math.round((performance.now() - t0) * 10) / 10;
    } catch {
      /* shown as stale */
    }
  }, 1000);

  // Rates over the last second.
  let lastSnaps = 0;
  let lastBytes = 0;
  setInterval(() => {
    const view = client.actorView!;
    const bytes = client.bytesSent + client.bytesReceived;
    state.snapshotsPerSecond = view.snapshotsApplied - lastSnaps;
    state.bytesPerSecond = bytes - lastBytes;
    lastSnaps = view.snapshotsApplied;
    lastBytes = bytes;
  }, 1000);

  let lastFrame = performance.now();
  let lastState = 0;
  let wasMoving = false;
  const frame = (now: number): void => {
    const dt = Math.min((now - lastFrame) / 1000, 0.1);
    lastFrame = now;
    let dx = 0;
    let dy = 0;
    if (keys.has("arrowleft") || keys.has("a")) dx -= 1;
    if (keys.has("arrowright") || keys.has("d")) dx += 1;
    if (keys.has("arrowup") || keys.has("w")) dy -= 1;
    if (keys.has("arrowdown") || keys.has("s")) dy += 1;
    const len = Math.hypot(dx, dy) || 1;
    const vx = (dx / len) * SPEED_CM_S;
    const vy = (dy / len) * SPEED_CM_S;
    const moving = dx !== 0 || dy !== 0;
    state.local.x = Math.min(Math.max(state.local.x + vx * dt, BOUNDS.minX), BOUNDS.maxX);
    state.local.y = Math.min(Math.max(state.local.y + vy * dt, BOUNDS.minY), BOUNDS.maxY);
    if (client.isOpen && (moving || wasMoving || now - lastState > 1000) && now - lastState >= STATE_INTERVAL_MS) {
      client.sendActorState(transformAt(state.local.x, state.local.y, moving ? vx : 0, moving ? vy : 0));
      lastState = now;
      wasMoving = moving;
    }
    draw(client);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
}

function toCanvas(x: number, y: number): [number, number] {
  return [((x - BOUNDS.minX) / (BOUNDS.maxX - BOUNDS.minX)) * canvas.width, ((y - BOUNDS.minY) / (BOUNDS.maxY - BOUNDS.minY)) * canvas.height];
}

function dot(x: number, y: number, color: string, label: string): void {
  const [cx, cy] = toCanvas(x, y);
  ctx2d.fillStyle = color;
  ctx2d.beginPath();
  ctx2d.arc(cx, cy, 14, 0, Math.PI * 2);
  ctx2d.fill();
  ctx2d.fillStyle = "#d8dee9";
  ctx2d.font = "12px system-ui";
  ctx2d.fillText(label, cx + 18, cy + 4);
}

function draw(client: CitadelClient): void {
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
  const remotes: typeof state.remotes = {};
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
  dot(state.local.x, state.local.y, "#88c0d0", `you (${state.localObject ?? "…"})`);
  overlay.textContent = [
    `transport  ${state.transport === "webtransport" ? "WebTransport" : state.transport === "websocket" ? "WebSocket" : "…"}`,
    `room       ${roomName} (#${state.roomId ?? "…"})`,
    `RTT        ${state.rttMs === null ? "…" : `${state.rttMs} ms`}`,
    `snapshots  ${state.snapshotsPerSecond}/s`,
    `traffic    ${(state.bytesPerSecond / 1024).toFixed(1)} KiB/s`,
    `players    ${Object.values(remotes).filter((r) => !r.npc).length + 1}`,
    state.error ? `error      ${state.error}` : `status     ${state.status}`,
  ].join("\n");
}

main().catch((e: Error) => {
  state.status = "failed";
  state.error = `${e.name}: ${e.message}`;
  overlay.textContent = `error: ${state.error}`;
});
