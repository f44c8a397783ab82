#!/usr/bin/env node
// Cross-check relay-fanout client on the `ws` package: the generator floor
// reference for citadel-load (docs/benchmarks.md, "The generator floor").
//
// What it is: N WebSocket clients in rooms of K, written as a Node game
// client would be (one `ws` socket and one setInterval each, a Buffer per
// send), speaking Citadel framing to Citadel or the raw relay: KIND_AUTH
// (empty: guest) -> AUTH_RESULT, ROOM_CREATE "fanout-<i / K>" ->
// ROOM_JOINED -> ROOM_MAP_READY, then a 16-byte position (send time ns,
// bot, sequence) at R Hz with golden-ratio phases. Per step it measures the
// same figures as citadel-load's relay-fanout: deliveries/s (payloads whose
// send time is in the window, received before the window closes plus the
// grace), p50/p99 one-way latency, drops, its own CPU (process.cpuUsage) and
// the server's (/proc/PID/stat with --server-pid), and both per delivery.
// What it is not: a Colyseus client, or a replacement for citadel-load.
//
// Usage: node client.js --url ws://127.0.0.1:PORT/ [--server-pid PID]
//   [--clients 320,640] [--room-size 8] [--rate 20] [--payload 16]
//   [--warmup 2] [--measure 5] [--grace 1] [--sources 4] [--json OUT]
'use strict';

const WebSocket = require('ws');
const fs = require('fs');
const { execSync } = require('child_process');

const KIND_POSITION = 1, KIND_PEER_POSITION = 2, KIND_AUTH = 5, KIND_AUTH_RESULT = 6;
const KIND_ROOM_CREATE = 21, KIND_ROOM_JOINED = 23, KIND_ROOM_MAP_READY = 25;

function parseArgs(argv) {
  const o = { url: null, serverPid: null, clients: [320], roomSize: 8, rate: 20, payload: 16,
    warmup: 2, measure: 5, grace: 1, sources: 4, json: null, concurrency: 64 };
  for (let i = 2; i < argv.length; i += 2) {
    const k = argv[i], v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${k}`);
    switch (k) {
      case '--url': o.url = v; break;
      case '--server-pid': o.serverPid = Number(v); break;
      case '--clients': o.clients = v.split(',').map(Number); break;
      case '--room-size': o.roomSize = Number(v); break;
      case '--rate': o.rate = Number(v); break;
      case '--payload': o.payload = Math.max(16, Number(v)); break;
      case '--warmup': o.warmup = Number(v); break;
      case '--measure': o.measure = Number(v); break;
      case '--grace': o.grace = Number(v); break;
      case '--sources': o.sources = Number(v); break;
      case '--json': o.json = v; break;
      default: throw new Error(`unknown option ${k}`);
    }
  }
  if (!o.url || !/^ws:\/\/127\.\d+\.\d+\.\d+:\d+\//.test(o.url)) {
    throw new Error('--url ws://127.x.y.z:PORT/ is required (loopback only)');
  }
  return o;
}

function frame(kind, body) {
  const out = Buffer.allocUnsafe(6 + body.length);
  out.writeUInt32BE(2 + body.length, 0);
  out.writeUInt16BE(kind, 4);
  body.copy(out, 6);
  return out;
}

// Log-linear histogram in µs (exact below 64, then 32 per octave: ~3 %).
class Hist {
  constructor() { this.reset(); }
  reset() { this.b = new Float64Array(64 + 40 * 32); this.n = 0; this.max = 0; }
  record(us) {
    let i;
    if (us < 64) i = us;
    else {
      const e = 31 - Math.clz32(us);
      i = Math.min(64 + (e - 6) * 32 + ((us >>> (e - 5)) - 32), this.b.length - 1);
    }
    this.b[i]++; this.n++; if (us > this.max) this.max = us;
  }
  high(i) {
    if (i < 64) return i;
    const e = Math.floor((i - 64) / 32) + 6, m = (i - 64) % 32 + 32;
    return (m + 1) * 2 ** (e - 5) - 1;
  }
  quantileMs(q) {
    if (this.n === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.n));
    let seen = 0;
    for (let i = 0; i < this.b.length; i++) {
      seen += this.b[i];
      if (seen >= rank) return Math.min(this.high(i), this.max) / 1000;
    }
    return this.max / 1000;
  }
}

const clockNs = () => process.hrtime.bigint();
const state = { start: 0n, end: 0n, open: false, sentIn: 0, expected: 0, got: 0, lost: 0 };
const hist = new Hist();
const inWindow = (ns) => state.open && ns >= state.start && ns < state.end;

function procTicks(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch { return null; }
}

class Bot {
  constructor(o, idx) {
    this.o = o; this.idx = idx; this.seq = 0; this.peers = o.roomSize - 1; this.timer = null;
    this.closing = false;
  }
  connect() {
    return new Promise((resolve, reject) => {
      const localAddress = `127.0.0.${1 + (this.idx % this.o.sources)}`;
      const ws = new WebSocket(this.o.url, { perMessageDeflate: false, localAddress });
      this.ws = ws;
      ws.binaryType = 'nodebuffer';
      let phase = 'auth';
      const fail = (e) => { if (phase !== 'live') { phase = 'failed'; reject(e); } };
      ws.on('open', () => {
        ws._socket.setNoDelay(true);
        ws.send(frame(KIND_AUTH, Buffer.alloc(0)));
      });
      ws.on('error', fail);
      ws.on('close', () => {
        if (phase === 'live' && !this.closing) state.lost++;
        fail(new Error(`bot ${this.idx}: closed during the join`));
        if (this.timer) clearInterval(this.timer);
      });
      ws.on('message', (data) => {
        for (let off = 0; off + 6 <= data.length;) {
          const len = data.readUInt32BE(off), kind = data.readUInt16BE(off + 4);
          const body = off + 6, end = off + 4 + len;
          if (len < 2 || end > data.length) { ws.terminate(); return; }
          if (kind === KIND_PEER_POSITION && len >= 2 + 8 + 16) {
            const sent = data.readBigUInt64LE(body + 8);
            if (inWindow(sent)) {
              const now = clockNs();
              state.got++;
              hist.record(Number((now - sent) / 1000n));
            }
          } else if (phase === 'auth' && kind === KIND_AUTH_RESULT) {
            if (data[body] === 2) return fail(new Error('auth rejected'));
            phase = 'join';
            const name = Buffer.from(`fanout-${Math.floor(this.idx / this.o.roomSize)}`);
            const b = Buffer.allocUnsafe(2 + name.length);
            b.writeUInt16BE(name.length, 0); name.copy(b, 2);
            ws.send(frame(KIND_ROOM_CREATE, b));
          } else if (phase === 'join' && kind === KIND_ROOM_JOINED) {
            ws.send(frame(KIND_ROOM_MAP_READY, data.subarray(body, body + 8)));
            phase = 'live';
            resolve();
          }
          off = end;
        }
      });
    });
  }
  start(periodMs) {
    const phase = ((this.idx * 0.61803398875) % 1) * periodMs;
    setTimeout(() => {
      this.send();
      this.timer = setInterval(() => this.send(), periodMs);
    }, phase);
  }
  send() {
    if (this.ws.readyState !== WebSocket.OPEN) return;
    const b = Buffer.alloc(6 + this.o.payload);
    b.writeUInt32BE(2 + this.o.payload, 0);
    b.writeUInt16BE(KIND_POSITION, 4);
    const now = clockNs();
    b.writeBigUInt64LE(now, 6);
    b.writeUInt32LE(this.idx, 14);
    b.writeUInt32LE(this.seq++ >>> 0, 18);
    if (inWindow(now)) { state.sentIn++; state.expected += this.peers; }
    this.ws.send(b);
  }
}

async function connectMany(o, bots, from, to) {
  let next = from;
  const worker = async () => {
    while (next < to) {
      const b = new Bot(o, next++);
      await b.connect();
      bots.push(b);
      b.start(1000 / o.rate);
    }
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, to - from) }, worker));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const o = parseArgs(process.argv);
  const tps = Number(execSync('getconf CLK_TCK').toString().trim()) || 100;
  const bots = [];
  const steps = [];
  for (const n of o.clients) {
    const t0 = Date.now();
    await connectMany(o, bots, bots.length, n);
    const connectS = (Date.now() - t0) / 1000;
    await sleep(o.warmup * 1000);
    hist.reset();
    Object.assign(state, { sentIn: 0, expected: 0, got: 0, lost: 0 });
    const cpu0 = process.cpuUsage(), srv0 = o.serverPid ? procTicks(o.serverPid) : null;
    const w0 = process.hrtime.bigint();
    state.start = clockNs();
    state.end = state.start + BigInt(Math.round(o.measure * 1e9));
    state.open = true;
    await sleep(o.measure * 1000);
    const wall = Number(process.hrtime.bigint() - w0) / 1e9;
    const cpu = process.cpuUsage(cpu0), srv1 = o.serverPid ? procTicks(o.serverPid) : null;
    await sleep(o.grace * 1000);
    state.open = false;
    const dlv = state.got / o.measure;
    const loadCpu = (cpu.user + cpu.system) / 1e6 / wall * 100;
    const srvCpu = srv0 !== null && srv1 !== null ? (srv1 - srv0) / tps / wall * 100 : null;
    const step = {
      clients: n, connect_s: connectS, sends_per_s: state.sentIn / o.measure, deliveries_per_s: dlv,
      p50_ms: hist.quantileMs(0.5), p99_ms: hist.quantileMs(0.99), max_ms: hist.max / 1000,
      drops: Math.max(0, state.expected - state.got), lost_bots: state.lost,
      server_cpu: srvCpu, server_us_per_delivery: srvCpu === null || dlv === 0 ? null : srvCpu * 1e4 / dlv,
      load_cpu: loadCpu, load_us_per_delivery: dlv === 0 ? null : loadCpu * 1e4 / dlv,
    };
    steps.push(step);
    const f = (v, d = 1) => (v === null ? '-' : v.toFixed(d));
    console.log(`${n} clients: ${f(dlv, 0)} deliveries/s, p50 ${f(step.p50_ms, 2)} ms, p99 ${f(step.p99_ms, 2)} ms, ` +
      `drops ${step.drops}, server ${f(srvCpu)} % (${f(step.server_us_per_delivery, 2)} µs/dlv), ` +
      `node ${f(loadCpu)} % (${f(step.load_us_per_delivery, 2)} µs/dlv)`);
  }
  for (const b of bots) { b.closing = true; clearInterval(b.timer); b.ws.close(1000); }
  if (o.json) fs.writeFileSync(o.json, JSON.stringify({ options: o, steps }, null, 2));
  await sleep(500);
  process.exit(0);
}

main().catch((e) => { console.error(`node-client: error: ${e.message}`); process.exit(1); });
