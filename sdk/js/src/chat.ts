/**
 * Chat cursor (services.md §5.5): a pure state machine per channel that
 * dedupes durable events by event id, detects gaps, follows
 * resync_required, revocation and reconnects, and tells the app what to do
 * with each event. What it is not: I/O — CitadelClient.reconcileChat pages
 * history and acknowledges; the cursor only records the outcome.
 *
 * Call order: new ChatEventCursor(channelId, joinWatermark) → observe(ev)
 * per event → on reconcile: historyApplied(w) → acknowledged(w); on
 * disconnect: disconnected() → rejoined(joinResult).
 */
import type { ChatEvent } from "./codecs/services.js";
import { CitadelError } from "./errors.js";

export type ChatCursorState = "live" | "rejoin_required" | "reconcile_required" | "ack_required" | "revoked";

export type ChatEventDisposition =
  /** A durable event the app should apply now. */
  | "apply"
  /** Already applied (same or older event id). */
  | "duplicate"
  /** Events were missed: reconcile from history before applying more. */
  | "reconcile_gap"
  /** The server asked for a resync. */
  | "resync_required"
  /** A typing indicator (see expireTyping). */
  | "typing"
  /** The subscription is gone until a fresh join. */
  | "access_revoked"
  /** Presence join/leave: not durable, nothing to dedupe. */
  | "ephemeral";

export class ChatEventError extends CitadelError {
  constructor(message: string) {
    super("chat_cursor", message);
    this.name = "ChatEventError";
  }
}

const big = (v: number | bigint): bigint => BigInt(v);

export class ChatEventCursor {
  private _state: ChatCursorState = "live";
  private _watermark: bigint | null;
  private _required: bigint | null = null;
  private pendingAck: bigint | null = null;
  /** presence_id -> expires_at (ms) of an active typing indicator. */
  private readonly typing = new Map<string, number>();

  constructor(
    readonly channelId: string,
    watermark?: number | bigint | null,
  ) {
    this._watermark = watermark === undefined || watermark === null ? null : big(watermark);
  }

  get state(): ChatCursorState {
    return this._state;
  }
  /** Highest durable event id applied (null: none yet). */
  get watermark(): bigint | null {
    return this._watermark;
  }
  /** The event id a reconcile must reach (null when none is needed). */
  get requiredWatermark(): bigint | null {
    return this._required;
  }
  /** Presence ids currently typing. */
  get typingPresences(): string[] {
    return [...this.typing.keys()];
  }

  private needReconcile(target: bigint): void {
    this._required = this._required === null || target > this._required ? target : this._required;
    if (this._state !== "rejoin_required") this._state = "reconcile_required";
  }

  observe(ev: ChatEvent): ChatEventDisposition {
    if (ev.channel_id !== this.channelId) throw new ChatEventError(`event for channel ${ev.channel_id} given to the cursor of ${this.channelId}`);
    if (this._state === "revoked") return "access_revoked";
    switch (ev.type) {
      case "presence.join":
      case "presence.leave":
        if (ev.type === "presence.leave") this.typing.delete(ev.presence.presence_id);
        return "ephemeral";
      case "typing":
        if (ev.typing) this.typing.set(ev.presence.presence_id, Number(ev.expires_at));
        else this.typing.delete(ev.presence.presence_id);
        return "typing";
      case "access.revoked":
        this._state = "revoked";
        this.typing.clear();
        return "access_revoked";
      case "resync_required":
        this.needReconcile(big(ev.watermark_event_id));
        return "resync_required";
      default: {
        const id = big(ev.event_id);
        if (this._watermark !== null && id <= this._watermark) return "duplicate";
        if (this._state !== "live") {
          this.needReconcile(id);
          return "reconcile_gap";
        }
        if (this._watermark !== null && id > this._watermark + 1n) {
          this.needReconcile(id);
          return "reconcile_gap";
        }
        this._watermark = id;
        return "apply";
      }
    }
  }

  /** Clears typing indicators whose expires_at <= now; returns their presence ids. */
  expireTyping(nowMs: number): string[] {
    const out: string[] = [];
    for (const [p, at] of this.typing) {
      if (at <= nowMs) {
        this.typing.delete(p);
        out.push(p);
      }
    }
    return out;
  }

  /** The connection dropped: live events may have been lost. */
  disconnected(): void {
    this.typing.clear();
    if (this._state !== "revoked") this._state = "rejoin_required";
  }

  /** A chat.join on the new connection succeeded (never advances the watermark). */
  rejoined(join: { channel_id: string; watermark_event_id: number | bigint }): void {
    if (join.channel_id !== this.channelId) throw new ChatEventError("join result is for another channel");
    const w = big(join.watermark_event_id);
    this._state = "live";
    if (this._watermark === null) {
      this._watermark = w;
      this._required = null;
      return;
    }
    if (w > this._watermark || (this._required !== null && this._required > this._watermark)) this.needReconcile(w > (this._required ?? 0n) ? w : this._required!);
  }

  /** The app applied a history snapshot whose watermark is `w`. */
  historyApplied(watermarkEventId: number | bigint): void {
    if (this._state === "revoked") throw new ChatEventError("history applied after access was revoked");
    const w = big(watermarkEventId);
    if (this._watermark === null || w > this._watermark) this._watermark = w;
    this.pendingAck = w;
    if (this._required !== null && this._watermark < this._required) {
      this._state = "reconcile_required";
      return;
    }
    this._required = null;
    this._state = "ack_required";
  }

  /** The server accepted the acknowledgement of `w`. */
  acknowledged(watermarkEventId: number | bigint): void {
    const w = big(watermarkEventId);
    if (this._state !== "ack_required" || this.pendingAck === null || w < this.pendingAck) {
      throw new ChatEventError("acknowledgement without a matching applied history");
    }
    this.pendingAck = null;
    this._state = "live";
  }
}
