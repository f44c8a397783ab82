/**
 * ActorView: the client half of networked actors and transform sync,
 * transport independent (mirrors citadel-client's actors.rs). Feed it every
 * received envelope; send what it asks for (HELLO, presence, state, acks);
 * render() gives every actor's interpolated transform.
 *
 * Call order: send helloEnvelope() (kind 7) → after Negotiated, send
 * announce() (kind 16) → handleEnvelope() for each envelope, then send
 * pollAck() → stateEnvelope() at a steady rate for the local actor. The
 * server sends the owner's own spawn right before the batch of existing
 * actors; spawns are held after announcing until that batch arrives.
 */
import {
  KIND_NA_DESPAWN,
  KIND_NA_PRESENCE,
  KIND_NA_SPAWN,
  KIND_NA_SPAWN_BATCH,
  KIND_NA_STATE,
  KIND_TSYNC_ACK,
  KIND_TSYNC_HELLO,
  KIND_TSYNC_ROLE,
  KIND_TSYNC_SNAPSHOT,
} from "./constants.js";
import { Envelope } from "./envelope.js";
import {
  decodeActorDespawn,
  decodeActorSpawn,
  decodeActorSpawnBatch,
  encodeActorPresence,
  encodeActorState,
  type ActorSpawn,
  type ActorTransform,
} from "./codecs/actors.js";
import { decodeTsyncHello, decodeTsyncRole, encodeTsyncAck, TransformCodec, type TsyncHello, type TsyncRole } from "./codecs/tsync.js";
import { Interpolator, SnapshotReceiver, type AppliedSnapshot, type Rendered, type ViewState } from "./snapshots.js";

export interface Actor {
  objectId: number;
  archetypeId: number;
  /** 0n = server-owned (NPC). */
  owner: bigint;
  isLocal: boolean;
  spawn: ActorTransform;
}

export type ActorEvent =
  | { type: "negotiated"; hello: TsyncHello }
  | { type: "spawned"; actor: Actor }
  | { type: "despawned"; objectId: number }
  | { type: "role"; role: TsyncRole }
  | { type: "snapshot"; applied: AppliedSnapshot };

export const IDENTITY_TRANSFORM: ActorTransform = { position: [0, 0, 0], rotation: [0, 0, 0, 1], velocity: [0, 0, 0] };

export class ActorView {
  hello: TsyncHello | null = null;
  private receiver: SnapshotReceiver | null = null;
  private interp = new Interpolator(60);
  readonly actors = new Map<number, Actor>();
  localObject: number | null = null;
  newestTick = 0;
  private pendingAck: Envelope | null = null;
  private expectingOwn = false;
  private held: ActorSpawn[] = [];
  /** Snapshots applied (for rate displays). */
  snapshotsApplied = 0;

  static helloEnvelope(): Envelope {
    return new Envelope(KIND_TSYNC_HELLO);
  }

  /** The presence announcement; the next spawn before the batch is ours. */
  announce(archetypeId: number, transform: ActorTransform = IDENTITY_TRANSFORM): Envelope {
    this.expectingOwn = this.localObject === null;
    return new Envelope(KIND_NA_PRESENCE, encodeActorPresence({ archetypeId, transform }));
  }

  static stateEnvelope(objectId: number, transform: ActorTransform): Envelope {
    return new Envelope(KIND_NA_STATE, encodeActorState({ objectId, transform }));
  }

  latest(): ViewState | null {
    return this.receiver?.latest() ?? null;
  }

  /** Every object's transform rendered in the past by the adaptive delay. */
  render(): Map<number, Rendered> {
    return this.interp.sample(this.interp.renderTick(this.newestTick));
  }

  /** The TSYNC_ACK to send after the last applied snapshot. */
  pollAck(): Envelope | null {
    const a = this.pendingAck;
    this.pendingAck = null;
    return a;
  }

  handleEnvelope(env: Envelope): ActorEvent[] {
    const events: ActorEvent[] = [];
    try {
      switch (env.kind) {
        case KIND_TSYNC_HELLO: {
          const hello = decodeTsyncHello(env.body);
          const codec = new TransformCodec(hello);
          this.receiver = new SnapshotReceiver(codec);
          this.interp = new Interpolator(hello.simRateHz);
          this.hello = hello;
          events.push({ type: "negotiated", hello });
          break;
        }
        case KIND_TSYNC_SNAPSHOT: {
          if (!this.receiver) break;
          const applied = this.receiver.handleSnapshot(env.body);
          if (typeof applied === "string") break;
          this.newestTick = applied.serverTick;
          this.snapshotsApplied++;
          this.interp.handleApplied(applied);
          const ack = this.receiver.pollAck();
          if (ack) this.pendingAck = new Envelope(KIND_TSYNC_ACK, encodeTsyncAck(ack));
          events.push({ type: "snapshot", applied });
          break;
        }
        case KIND_NA_SPAWN: {
          const spawn = decodeActorSpawn(env.body);
          if (this.expectingOwn) this.held.push(spawn);
          else events.push(this.spawned(spawn, false));
          break;
        }
        case KIND_NA_SPAWN_BATCH: {
          const batch = decodeActorSpawnBatch(env.body);
          if (this.expectingOwn) {
            this.expectingOwn = false;
            const held = this.held.splice(0);
            held.forEach((s, i) => {
              const own = i === held.length - 1;
              if (own) this.localObject = s.objectId;
              events.push(this.spawned(s, own));
            });
          }
          for (const s of batch) events.push(this.spawned(s, false));
          break;
        }
        case KIND_NA_DESPAWN: {
          const id = decodeActorDespawn(env.body);
          if (this.actors.delete(id)) events.push({ type: "despawned", objectId: id });
          if (this.localObject === id) this.localObject = null;
          break;
        }
        case KIND_TSYNC_ROLE:
          events.push({ type: "role", role: decodeTsyncRole(env.body) });
          break;
      }
    } catch {
      /* a malformed actor envelope is ignored, as in the Rust client */
    }
    return events;
  }

  private spawned(s: ActorSpawn, own: boolean): ActorEvent {
    const actor: Actor = {
      objectId: s.objectId,
      archetypeId: s.archetypeId,
      owner: s.owner,
      isLocal: own || this.localObject === s.objectId,
      spawn: s.transform,
    };
    this.actors.set(s.objectId, actor);
    return { type: "spawned", actor };
  }
}
