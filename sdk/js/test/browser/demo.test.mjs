// Headless Chromium (Debian `chromium`, driven by playwright-core with its
// executablePath; no browser download): two pages open /demo over
// WebSocket and then over WebTransport, each sees the other's avatar move
// after simulated key presses, and a screenshot of each run is saved in
// test-output/. Then 500 concurrent RPCs over WebTransport from the page,
// one client-opened unidirectional stream per request (as existing browser
// clients do), all answered.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { startNode } from "../harness.mjs";

const outDir = fileURLToPath(new URL("../../test-output/", import.meta.url));
const executablePath = process.env.CHROMIUM_BIN ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(existsSync);

let node;
let browser;
before(async () => {
  assert.ok(executablePath, "Debian chromium is required (scripts/test-js installs it)");
  mkdirSync(outDir, { recursive: true });
  // Rate limits lifted for the 500-RPC burst (the default burst is 400 messages).
  node = await startNode({ webtransport: true, extra: "[transport.limits]\nmessages_per_second = 100000\nmessage_burst = 100000\n" });
  browser = await chromium.launch({
    executablePath,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-timer-throttling", "--disable-renderer-backgrounding"],
  });
});
after(async () => {
  await browser?.close();
  await node?.stop();
});

const demoState = (page) => page.evaluate(() => JSON.parse(JSON.stringify(window.citadelDemo ?? null)));

async function waitFor(page, predicate, what, ms = 20_000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await demoState(page);
    if (last && predicate(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}; last state ${JSON.stringify(last)}`);
}

async function openPlayer(transport, room) {
  const context = await browser.newContext({ viewport: { width: 1000, height: 640 } });
  const page = await context.newPage();
  const logs = [];
  page.on("console", (m) => logs.push(m.text()));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  await page.goto(`${node.httpUrl}/demo?room=${room}&transport=${transport}`);
  const expected = transport === "wt" ? "webtransport" : "websocket";
  await waitFor(page, (s) => s.status === "playing" || s.status === "failed", `page ready (${logs.join(" | ")})`);
  const s = await demoState(page);
  assert.equal(s.status, "playing", `${s.error} ${logs.join(" | ")}`);
  assert.equal(s.transport, expected);
  return { page, context };
}

async function hold(page, key, ms) {
  await page.keyboard.down(key);
  await new Promise((r) => setTimeout(r, ms));
  await page.keyboard.up(key);
}

for (const transport of ["ws", "wt"]) {
  test(`two pages see each other move over ${transport === "ws" ? "WebSocket" : "WebTransport"}`, async () => {
    const room = `demo-browser-${transport}`;
    const a = await openPlayer(transport, room);
    const b = await openPlayer(transport, room);
    const sa = await demoState(a.page);
    const sb = await demoState(b.page);
    // Each sees the other and the default game's NPC.
    const seenByB = await waitFor(b.page, (s) => s.remotes[sa.localObject] && Object.values(s.remotes).some((r) => r.npc), "b sees a and the NPC");
    await waitFor(a.page, (s) => s.remotes[sb.localObject], "a sees b");
    const startX = seenByB.remotes[sa.localObject].x;
    await hold(a.page, "ArrowRight", 1500);
    const moved = await waitFor(b.page, (s) => s.remotes[sa.localObject] && s.remotes[sa.localObject].x > startX + 300, "a's avatar moves right on b's page");
    assert.ok(moved.remotes[sa.localObject].x > startX + 300);

    const seenByA = await demoState(a.page);
    const startY = seenByA.remotes[sb.localObject].y;
    await hold(b.page, "s", 1500);
    await waitFor(a.page, (s) => s.remotes[sb.localObject] && s.remotes[sb.localObject].y > startY + 300, "b's avatar moves down on a's page");

    const overlay = await a.page.textContent("#overlay");
    assert.match(overlay, transport === "wt" ? /WebTransport/ : /WebSocket/);
    assert.match(overlay, /RTT\s+\d/);
    await a.page.screenshot({ path: `${outDir}/demo-${transport}.png` });
    await a.context.close();
    await b.context.close();
  });
}

test("500 concurrent RPCs over WebTransport, one unidirectional stream each", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${node.httpUrl}/demo?room=demo-rpc&transport=ws`);
  const result = await page.evaluate(async (count) => {
    const info = await (await fetch("/v1/webtransport")).json();
    const hash = Uint8Array.from(atob(info.certificate_hash.base64), (c) => c.charCodeAt(0));
    const wt = new WebTransport(info.url, { serverCertificateHashes: [{ algorithm: "sha-256", value: hash }] });
    await wt.ready;
    const frame = (kind, body) => {
      const out = new Uint8Array(6 + body.length);
      const v = new DataView(out.buffer);
      v.setUint32(0, 2 + body.length);
      v.setUint16(4, kind);
      out.set(body, 6);
      return out;
    };
    const sendOnNewStream = async (bytes) => {
      const s = await wt.createUnidirectionalStream();
      const w = s.getWriter();
      await w.write(bytes);
      await w.close();
    };
    // Responses: server-opened uni streams with framed envelopes.
    const answered = new Map();
    let authStatus = null;
    const reading = (async () => {
      const streams = wt.incomingUnidirectionalStreams.getReader();
      for (;;) {
        const { value: stream, done } = await streams.read();
        if (done) return;
        const reader = stream.getReader();
        let buf = new Uint8Array(0);
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) break;
          const joined = new Uint8Array(buf.length + value.length);
          joined.set(buf);
          joined.set(value, buf.length);
          buf = joined;
        }
        let off = 0;
        while (buf.length - off >= 6) {
          const v = new DataView(buf.buffer, off);
          const len = v.getUint32(0);
          const kind = v.getUint16(4);
          const body = buf.subarray(off + 6, off + 4 + len);
          if (kind === 6) authStatus = body[0];
          if (kind === 4) answered.set(new DataView(body.buffer, body.byteOffset).getBigUint64(0), body[8]);
          off += 4 + len;
        }
      }
    })();
    await sendOnNewStream(frame(5, new Uint8Array(0)));
    const deadline = Date.now() + 10000;
    while (authStatus === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const enc = new TextEncoder();
    const sends = [];
    for (let i = 1; i <= count; i++) {
      const method = enc.encode("echo");
      const body = new Uint8Array(10 + method.length + 4);
      const v = new DataView(body.buffer);
      v.setBigUint64(0, BigInt(i));
      v.setUint16(8, method.length);
      body.set(method, 10);
      v.setUint32(10 + method.length, i);
      sends.push(sendOnNewStream(frame(3, body)));
    }
    let sendError = null;
    await Promise.all(sends).catch((e) => (sendError = String(e)));
    const end = Date.now() + 30000;
    while (answered.size < count && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    const ok = [...answered.values()].filter((s) => s === 0).length;
    wt.close();
    void reading;
    return { authStatus, answered: answered.size, ok, sendError };
  }, 500);
  assert.equal(result.sendError, null, "Chromium opened every stream");
  assert.equal(result.authStatus, 1, "guest accepted");
  assert.equal(result.answered, 500);
  assert.equal(result.ok, 500);
  await context.close();
});
