/**
 * JSON service kinds 26-28 (services.md §3.5, §4.2, §5.5): matchmaker
 * handoff, durable notification, chat event. Kinds 26 and 27 tolerate
 * unknown fields (forward compatibility); kind 28 is a closed version-1
 * schema. Decoders throw WireError("json"); `decodeChatEvent` returns null.
 */
import { decodeUtf8, encodeUtf8 } from "../bytes.js";
import { WireError } from "../errors.js";
import { parseJson, stringifyJson, type JsonValue } from "../json.js";

type Obj = { [key: string]: JsonValue };
type Check = (v: JsonValue) => boolean;
type Spec = [name: string, check: Check, required: boolean][];

const isU64: Check = (v) =>
  (typeof v === "number" && Number.isInteger(v) && v >= 0) || (typeof v === "bigint" && v >= 0n && v < 1n << 64n);
const isI64: Check = (v) =>
  (typeof v === "number" && Number.isInteger(v)) || (typeof v === "bigint" && v >= -(1n << 63n) && v < 1n << 63n);
const isStr: Check = (v) => typeof v === "string";
const isBool: Check = (v) => typeof v === "boolean";
const isObj = (v: JsonValue): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v);

function bad(message: string): never {
  throw new WireError("json", message);
}

function check(obj: JsonValue, spec: Spec, closed: boolean, what: string): Obj {
  if (!isObj(obj)) bad(`${what} is not an object`);
  const names = new Set(spec.map((s) => s[0]));
  if (closed) for (const k of Object.keys(obj)) if (!names.has(k)) bad(`unknown field ${what}.${k}`);
  for (const [name, pred, required] of spec) {
    if (!(name in obj)) {
      if (required) bad(`missing field ${what}.${name}`);
      continue;
    }
    if (!pred(obj[name])) bad(`wrong type for ${what}.${name}`);
  }
  return obj;
}

function parseBody(body: Uint8Array): JsonValue {
  try {
    return parseJson(decodeUtf8(body));
  } catch (e) {
    return bad(e instanceof Error ? e.message : "invalid JSON");
  }
}

function toBody(obj: unknown): Uint8Array {
  return encodeUtf8(stringifyJson(obj));
}

const asBig = (v: JsonValue): bigint => BigInt(v as number | bigint);

export interface MatchmakerMatched {
  ticket_id: string;
  match_id: number | bigint;
  join_token: string;
  expires_at: number | bigint;
  [extra: string]: JsonValue;
}

const K26: Spec = [
  ["ticket_id", isStr, true],
  ["match_id", isU64, true],
  ["join_token", isStr, true],
  ["expires_at", isU64, true],
];

/** Kind 26. */
export function decodeMatchmakerMatched(body: Uint8Array): MatchmakerMatched {
  return check(parseBody(body), K26, false, "matched") as MatchmakerMatched;
}

export function encodeMatchmakerMatched(m: MatchmakerMatched): Uint8Array {
  return toBody(m);
}

export interface Notification {
  id: string;
  code: number | bigint;
  subject: string;
  content: JsonValue;
  sender: string;
  created_at_unix_ms: number | bigint;
  read_at_unix_ms: number | bigint | null;
  [extra: string]: JsonValue;
}

const K27: Spec = [
  ["id", isStr, true],
  ["code", isI64, true],
  ["subject", isStr, true],
  ["content", () => true, true],
  ["sender", isStr, true],
  ["created_at_unix_ms", isU64, true],
  ["read_at_unix_ms", (v) => v === null || isU64(v), true],
];

/** Kind 27. */
export function decodeNotification(body: Uint8Array): Notification {
  return check(parseBody(body), K27, false, "notification") as Notification;
}

export function encodeNotification(n: Notification): Uint8Array {
  return toBody(n);
}

export interface ChatPresence {
  presence_id: string;
  user_id: string;
}

export interface ChatMessage {
  id: number | bigint;
  sender: string;
  content: string;
  created_at_unix_ms: number | bigint;
  updated_at_unix_ms: number | bigint;
  revision: number | bigint;
  last_event_id: number | bigint;
  deleted: boolean;
}

export type ChatEvent =
  | { version: 1; type: "presence.join"; channel_id: string; channel_type: "direct" | "group" | "room"; presence: ChatPresence }
  | { version: 1; type: "presence.leave" | "access.revoked"; channel_id: string; presence: ChatPresence }
  | { version: 1; type: "typing"; channel_id: string; presence: ChatPresence; typing: boolean; expires_at: number | bigint }
  | { version: 1; type: "message.create" | "message.update" | "message.remove"; channel_id: string; event_id: number | bigint; message: ChatMessage }
  | { version: 1; type: "resync_required"; channel_id: string; watermark_event_id: number | bigint; scopes?: string[] };

const PRESENCE: Spec = [
  ["presence_id", isStr, true],
  ["user_id", isStr, true],
];
const MESSAGE: Spec = [
  ["id", isU64, true],
  ["sender", isStr, true],
  ["content", isStr, true],
  ["created_at_unix_ms", isU64, true],
  ["updated_at_unix_ms", isU64, true],
  ["revision", isU64, true],
  ["last_event_id", isU64, true],
  ["deleted", isBool, true],
];
const isPresence: Check = (v) => !!check(v, PRESENCE, true, "presence");
const isMessage: Check = (v) => !!check(v, MESSAGE, true, "message");
const COMMON: Spec = [
  ["version", isU64, true],
  ["type", isStr, true],
  ["channel_id", isStr, true],
];
const TYPES: Record<string, Spec> = {
  "presence.join": [
    ["channel_type", (v) => v === "direct" || v === "group" || v === "room", true],
    ["presence", isPresence, true],
  ],
  "presence.leave": [["presence", isPresence, true]],
  typing: [
    ["presence", isPresence, true],
    ["typing", isBool, true],
    ["expires_at", isU64, true],
  ],
  "message.create": [
    ["event_id", isU64, true],
    ["message", isMessage, true],
  ],
  "message.update": [
    ["event_id", isU64, true],
    ["message", isMessage, true],
  ],
  "message.remove": [
    ["event_id", isU64, true],
    ["message", isMessage, true],
  ],
  "access.revoked": [["presence", isPresence, true]],
  resync_required: [
    ["watermark_event_id", isU64, true],
    ["scopes", (v) => Array.isArray(v) && v.every((s) => typeof s === "string"), false],
  ],
};

/** Kind 28, strict: throws WireError("json"). */
export function decodeChatEventStrict(body: Uint8Array): ChatEvent {
  const obj = check(parseBody(body), COMMON, false, "chat event");
  if (obj.version !== 1) bad(`unknown version ${String(obj.version)}`);
  const type = obj.type as string;
  if (!Object.prototype.hasOwnProperty.call(TYPES, type)) bad(`unknown type ${type}`);
  check(obj, [...COMMON, ...TYPES[type]], true, "chat event");
  if (type.startsWith("message.")) {
    const m = obj.message as Obj;
    if (asBig(obj.event_id) === 0n) bad("event_id 0");
    if (asBig(m.id) === 0n || asBig(m.revision) === 0n || asBig(m.last_event_id) === 0n) bad("zero id, revision or last_event_id");
    if (asBig(m.updated_at_unix_ms) < asBig(m.created_at_unix_ms)) bad("updated before created");
    if (asBig(m.last_event_id) !== asBig(obj.event_id)) bad("message.last_event_id differs from event_id");
    if (type === "message.remove") {
      if (m.deleted !== true || m.content !== "") bad("message.remove must carry a tombstone");
    } else if (m.deleted) bad(`${type} with a deleted message`);
  }
  return obj as unknown as ChatEvent;
}

/** Kind 28: the event, or null when malformed (sdk-surface.md §2.3). */
export function decodeChatEvent(body: Uint8Array): ChatEvent | null {
  try {
    return decodeChatEventStrict(body);
  } catch {
    return null;
  }
}

export function encodeChatEvent(e: ChatEvent): Uint8Array {
  return toBody(e);
}
