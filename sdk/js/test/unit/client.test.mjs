// CitadelClient failure modes against a scripted in-process WebSocket:
// RPC timeout, closed connection, malformed envelope, wait timeouts.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as sdk from "../../dist/index.js";

/** A WebSocket double: opens at once, records sends, lets the test answer. */
function fakeSocket({ open = true } = {}) {
  const sockets = [];
  class FakeWs {
    constructor(url) {
      this.url = url;
      this.readyState = 0;
      this.sent = [];
      this.binaryType = "blob";
      sockets.push(this);
      setTimeout(() => {
        if (open) {
          this.readyState = 1;
          this.onopen?.({});
        } else {
          this.readyState = 3;
          this.onclose?.({ code: 1006, reason: "" });
        }
      }, 0);
    }
    send(data) {
      this.sent.push(new sdk.FrameDecoder().push(data)[0]);
    }
    close(code = 1000, reason = "") {
      if (this.readyState === 3) return;
      this.readyState = 3;
      setTimeout(() => this.onclose?.({ code, reason }), 0);
    }
    serverSend(bytes) {
      this.onmessage?.({ data: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) });
    }
  }
  return { FakeWs, sockets };
}

test("an RPC without a response rejects with RpcTimeoutError", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  await assert.rejects(c.callRpc("slow", "x", { timeoutMs: 30 }), (e) => e instanceof sdk.RpcTimeoutError && e.code === "rpc_timeout" && e.requestId === 1n);
  const req = sdk.decodeRpcRequest(sockets[0].sent[0].body);
  assert.equal(req.method, "slow");
  assert.equal(req.requestId, 1n, "request ids start at 1");
  c.close();
});

test("responses are correlated by request id, in any order", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  const any = [];
  c.onAny((env) => any.push(env.kind));
  const p1 = c.callRpc("a");
  const p2 = c.callRpc("b");
  const ws = sockets[0];
  ws.serverSend(new sdk.Envelope(4, sdk.encodeRpcResponse(2n, 1, sdk.encodeUtf8("boom"))).encodeFrame());
  ws.serverSend(new sdk.Envelope(4, sdk.encodeRpcResponse(1n, 0, sdk.encodeUtf8("ok"))).encodeFrame());
  assert.equal(new TextDecoder().decode(await p1), "ok");
  await assert.rejects(p2, (e) => e instanceof sdk.RpcError && e.requestId === 2n && e.serverMessage === "boom");
  assert.deepEqual(any, [], "correlated responses do not reach onAny");
  c.close();
});

test("closing rejects pending calls with ConnectionClosedError and resolves `closed`", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  const pending = c.callRpc("x", undefined, { timeoutMs: 5000 });
  const wait = c.waitForKind(99, 5000);
  sockets[0].close(4000, "server going away");
  await assert.rejects(pending, (e) => e instanceof sdk.ConnectionClosedError && e.closeCode === 4000);
  await assert.rejects(wait, sdk.ConnectionClosedError);
  const info = await c.whenClosed;
  assert.equal(info.code, 4000);
  assert.equal(c.isOpen, false);
  assert.throws(() => c.send(100, "x"), sdk.ConnectionClosedError);
});

test("a malformed frame closes the connection with MalformedEnvelopeError", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  const pending = c.callRpc("x");
  sockets[0].serverSend(Uint8Array.of(0, 0, 0, 1, 0));
  await assert.rejects(pending, (e) => e instanceof sdk.MalformedEnvelopeError && e.code === "malformed_envelope");
  const info = await c.whenClosed;
  assert.ok(info.error instanceof sdk.MalformedEnvelopeError);
  assert.equal(c.isOpen, false);
});

test("a short RPC response is malformed, not a hang", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  const pending = c.callRpc("x");
  sockets[0].serverSend(new sdk.Envelope(4, Uint8Array.of(0, 0, 1)).encodeFrame());
  await assert.rejects(pending, sdk.MalformedEnvelopeError);
});

test("connect failures and waits are bounded", async () => {
  const { FakeWs } = fakeSocket({ open: false });
  await assert.rejects(sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs }), sdk.ConnectionClosedError);
  class Never {
    constructor() {
      this.readyState = 0;
    }
    close() {}
  }
  await assert.rejects(sdk.CitadelClient.connect("ws://fake/", { WebSocket: Never, timeoutMs: 20 }), (e) => e instanceof sdk.TimeoutError && e.code === "timeout");
  const ok = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: ok.FakeWs });
  await assert.rejects(c.waitForKind(23, 20), sdk.TimeoutError);
  await assert.rejects(c.joinOrCreateRoom("r", { timeoutMs: 20 }), sdk.TimeoutError);
  const rej = c.joinOrCreateRoom("r");
  const w = new sdk.ByteWriter().u16(21).u16(4).bytes(sdk.encodeUtf8("full")).finish();
  ok.sockets[0].serverSend(new sdk.Envelope(33, w).encodeFrame());
  await assert.rejects(rej, (e) => e instanceof sdk.RoomRejectedError && e.serverReason === "full");
  c.close();
});

test("the guest handshake sends an empty KIND_AUTH and decodes the result", async () => {
  const { FakeWs, sockets } = fakeSocket();
  const c = await sdk.CitadelClient.connect("ws://fake/", { WebSocket: FakeWs });
  const hs = c.handshakeGuest();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(sockets[0].sent[0].kind, sdk.KIND_AUTH);
  assert.equal(sockets[0].sent[0].body.length, 0);
  sockets[0].serverSend(new sdk.Envelope(6, Uint8Array.of(1)).encodeFrame());
  assert.deepEqual(await hs, { status: 1, userId: null, reasonClass: null });
  c.close();
});

test("connectAuto falls back to WebSocket when WebTransport fails before ready", async () => {
  const { FakeWs } = fakeSocket();
  const tried = [];
  class FailingWt {
    constructor(url, opts) {
      tried.push({ url, opts });
      this.ready = Promise.reject(new Error("handshake failed"));
      this.ready.catch(() => {});
      this.closed = new Promise(() => {});
    }
    close() {}
  }
  const lines = [];
  const c = await sdk.CitadelClient.connectAuto(
    { webTransportUrl: "https://127.0.0.1:1/citadel", serverCertificateHashBase64: Buffer.alloc(32, 7).toString("base64"), webSocketUrl: "ws://fake/" },
    { WebSocket: FakeWs, WebTransport: FailingWt, diagnostics: (l) => lines.push(l) },
  );
  assert.equal(c.transportKind, "websocket");
  assert.equal(tried.length, 1);
  assert.equal(tried[0].opts.serverCertificateHashes[0].value.length, 32, "the base64 pin is decoded");
  assert.ok(lines.some((l) => l.includes("falling back")));
  c.close();
  await assert.rejects(sdk.CitadelClient.connectAuto({ webTransportUrl: "https://x/" }, { WebTransport: FailingWt }), sdk.ConnectionClosedError);
});
