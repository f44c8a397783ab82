/**
 * Snapshot reconstruction and interpolation, the same rules as the Rust
 * client (citadel-netcode receiver.rs and interp.rs): state[id] =
 * state[base] − removed + updates, delta entries only when the base holds
 * the same gen_epoch, a ring of 64 baselines, an ack window (§3.8); then
 * per-object sample buffers rendered in the past by an adaptive delay
 * (Hermite position with velocity tangents, slerp rotation, at most 0.25 s
 * of extrapolation). What it is not: I/O — ActorView (actors.ts) feeds it.
 */
import { decodeSnapshot, type TransformCodec, type TsyncAck } from "./codecs/tsync.js";
import type { Quat, Vec3 } from "./quant.js";

export const RING_CAPACITY = 64;
export const SAMPLES_PER_OBJECT = 32;
const MAX_EXTRAPOLATION_S = 0.25;

export interface ObjectView {
  genEpoch: number;
  position: Vec3;
  rotation: Quat;
  velocity: Vec3 | null;
}

export type ViewState = Map<number, ObjectView>;

export interface AppliedSnapshot {
  snapshotId: number;
  serverTick: number;
  sendRateHz: number;
  state: ViewState;
  /** Ids skipped since the previous applied snapshot. */
  gap: number;
}

export type SnapshotDiscard = "malformed" | "stale" | "unknown_base";

/** The §3.8 acknowledgement window. */
export class AckWindow {
  latest = 0;
  history = 0;
  ack(id: number): void {
    if (id === 0) return;
    if (this.latest === 0) {
      this.latest = id;
      this.history = 0;
      return;
    }
    if (id > this.latest) {
      const d = id - this.latest;
      this.history = d < 32 ? ((this.history << d) | (1 << (d - 1))) >>> 0 : d === 32 ? 0x80000000 : 0;
      this.latest = id;
    } else if (id < this.latest) {
      const back = this.latest - id;
      if (back <= 32) this.history = (this.history | (1 << (back - 1))) >>> 0;
    }
  }
}

export class SnapshotReceiver {
  private ring: Array<[number, ViewState]> = [];
  private lastApplied: number | null = null;
  private window = new AckWindow();
  private ackPending = false;
  private ownerSeq = new Map<number, number>();

  constructor(readonly codec: TransformCodec) {}

  latest(): ViewState | null {
    return this.ring.length ? this.ring[this.ring.length - 1][1] : null;
  }

  ownerAck(objectId: number): number | undefined {
    return this.ownerSeq.get(objectId);
  }

  /** Applies one kind-8 body; returns the applied state or why it was discarded. */
  handleSnapshot(body: Uint8Array): AppliedSnapshot | SnapshotDiscard {
    let snap;
    try {
      snap = decodeSnapshot(body, this.codec);
    } catch {
      return "malformed";
    }
    if (this.lastApplied !== null && snap.snapshotId <= this.lastApplied) return "stale";
    let state: ViewState;
    if (snap.baseSnapshotId === 0) state = new Map();
    else {
      const base = this.ring.find(([id]) => id === snap.baseSnapshotId);
      if (!base) return "unknown_base";
      state = new Map([...base[1]].map(([id, v]) => [id, { ...v }]));
    }
    for (const id of snap.removed) state.delete(id);
    for (const u of snap.updates) {
      const view = state.get(u.objectId);
      if (view && view.genEpoch === u.genEpoch) {
        if (u.position) view.position = u.position;
        if (u.rotation) view.rotation = u.rotation;
        if (u.velocity) view.velocity = u.velocity;
      } else if (u.position && u.rotation) {
        state.set(u.objectId, { genEpoch: u.genEpoch, position: u.position, rotation: u.rotation, velocity: u.velocity });
      } else {
        continue; // a full entry must carry position and rotation
      }
      if (u.lastInputSeq !== null) this.ownerSeq.set(u.objectId, Math.max(this.ownerSeq.get(u.objectId) ?? 0, u.lastInputSeq));
    }
    const gap = this.lastApplied === null ? 0 : Math.max(0, snap.snapshotId - this.lastApplied - 1);
    this.lastApplied = snap.snapshotId;
    this.ring.push([snap.snapshotId, state]);
    while (this.ring.length > RING_CAPACITY) this.ring.shift();
    this.window.ack(snap.snapshotId);
    this.ackPending = true;
    return { snapshotId: snap.snapshotId, serverTick: snap.serverTick, sendRateHz: snap.sendRateHz, state, gap };
  }

  /** The acknowledgement to send, once per applied batch. */
  pollAck(): TsyncAck | null {
    if (!this.ackPending) return null;
    this.ackPending = false;
    return { ackedSnapshotId: this.window.latest, history: this.window.history };
  }
}

interface Sample {
  tick: number;
  position: Vec3;
  rotation: Quat;
  velocity: Vec3 | null;
}

export interface Rendered {
  position: Vec3;
  rotation: Quat;
}

export class Interpolator {
  private readonly simRateHz: number;
  private sendRateHz = 20;
  private multiplier = 2.5;
  private buffers = new Map<number, Sample[]>();

  constructor(simRateHz = 60) {
    this.simRateHz = Math.max(1, simRateHz);
  }

  handleApplied(applied: AppliedSnapshot): void {
    if (applied.sendRateHz > 0) this.sendRateHz = applied.sendRateHz;
    this.multiplier = applied.gap > 0 ? Math.min(this.multiplier + 0.5 * applied.gap, 2.5) : Math.max(this.multiplier - 0.02, 1.5);
    for (const id of [...this.buffers.keys()]) if (!applied.state.has(id)) this.buffers.delete(id);
    for (const [id, view] of applied.state) {
      let buf = this.buffers.get(id);
      if (!buf) this.buffers.set(id, (buf = []));
      if (buf.length && buf[buf.length - 1].tick >= applied.serverTick) continue;
      buf.push({ tick: applied.serverTick, position: view.position, rotation: view.rotation, velocity: view.velocity });
      while (buf.length > SAMPLES_PER_OBJECT) buf.shift();
    }
  }

  /** Render delay in ticks. */
  delayTicks(): number {
    const interval = 1 / this.sendRateHz;
    const delay = Math.min(Math.max(this.multiplier * interval, 1.5 * interval), 0.4);
    return delay * this.simRateHz;
  }

  renderTick(newestTick: number): number {
    return newestTick - this.delayTicks();
  }

  sample(tick: number): Map<number, Rendered> {
    const out = new Map<number, Rendered>();
    for (const [id, buf] of this.buffers) {
      const r = this.sampleOne(buf, tick);
      if (r) out.set(id, r);
    }
    return out;
  }

  private sampleOne(buf: Sample[], tick: number): Rendered | null {
    if (!buf.length) return null;
    const first = buf[0];
    const last = buf[buf.length - 1];
    if (tick <= first.tick) return { position: first.position, rotation: first.rotation };
    if (tick >= last.tick) {
      const ahead = Math.min((tick - last.tick) / this.simRateHz, MAX_EXTRAPOLATION_S);
      const v = last.velocity ?? [0, 0, 0];
      return { position: [0, 1, 2].map((i) => Math.fround(last.position[i] + v[i] * ahead)) as Vec3, rotation: last.rotation };
    }
    for (let k = 0; k + 1 < buf.length; k++) {
      const a = buf[k];
      const b = buf[k + 1];
      if (a.tick <= tick && tick <= b.tick) {
        const spanTicks = Math.max(b.tick - a.tick, 1);
        const t = (tick - a.tick) / spanTicks;
        const spanS = spanTicks / this.simRateHz;
        const position =
          a.velocity && b.velocity
            ? hermite(a.position, b.position, a.velocity, b.velocity, t, spanS)
            : ([0, 1, 2].map((i) => Math.fround(a.position[i] + (b.position[i] - a.position[i]) * t)) as Vec3);
        return { position, rotation: slerp(a.rotation, b.rotation, t) };
      }
    }
    return null;
  }
}

export function hermite(p0: Vec3, p1: Vec3, v0: Vec3, v1: Vec3, t: number, spanS: number): Vec3 {
  const t2 = t * t;
  const t3 = t2 * t;
  const h00 = 2 * t3 - 3 * t2 + 1;
  const h10 = t3 - 2 * t2 + t;
  const h01 = -2 * t3 + 3 * t2;
  const h11 = t3 - t2;
  return [0, 1, 2].map((i) => Math.fround(h00 * p0[i] + h10 * v0[i] * spanS + h01 * p1[i] + h11 * v1[i] * spanS)) as Vec3;
}

export function slerp(a: Quat, bIn: Quat, t: number): Quat {
  let b = [...bIn];
  let dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
  if (dot < 0) {
    b = b.map((c) => -c);
    dot = -dot;
  }
  let out: number[];
  if (dot > 0.9995) out = [0, 1, 2, 3].map((i) => a[i] + (b[i] - a[i]) * t);
  else {
    const theta = Math.acos(Math.min(Math.max(dot, -1), 1));
    const s = Math.sin(theta);
    const wa = Math.sin((1 - t) * theta) / s;
    const wb = Math.sin(t * theta) / s;
    out = [0, 1, 2, 3].map((i) => a[i] * wa + b[i] * wb);
  }
  const norm = Math.sqrt(out.reduce((acc, c) => acc + c * c, 0));
  if (!Number.isFinite(norm) || norm < 1e-9) return [0, 0, 0, 1];
  return out.map((c) => Math.fround(c / norm)) as Quat;
}
