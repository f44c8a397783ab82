/**
 * Protocol constants: kinds 1-43 (realtime-wire.md §2), status and reason
 * bytes, sizes and ranges. What it is not: codecs (codecs/).
 */
export const KIND_POSITION = 1;
export const KIND_PEER_POSITION = 2;
export const KIND_RPC_REQUEST = 3;
export const KIND_RPC_RESPONSE = 4;
export const KIND_AUTH = 5;
export const KIND_AUTH_RESULT = 6;
export const KIND_TSYNC_HELLO = 7;
export const KIND_TSYNC_SNAPSHOT = 8;
export const KIND_TSYNC_INPUT = 9;
export const KIND_TSYNC_ACK = 10;
export const KIND_TSYNC_ROLE = 11;
export const KIND_TSYNC_REWIND = 12;
export const KIND_REP_DELTA = 13;
export const KIND_REP_ACK = 14;
export const KIND_REP_SCHEMA = 15;
export const KIND_NA_PRESENCE = 16;
export const KIND_NA_SPAWN = 17;
export const KIND_NA_SPAWN_BATCH = 18;
export const KIND_NA_DESPAWN = 19;
export const KIND_NA_STATE = 20;
export const KIND_ROOM_CREATE = 21;
export const KIND_ROOM_JOIN = 22;
export const KIND_ROOM_JOINED = 23;
export const KIND_ROOM_LEAVE = 24;
export const KIND_ROOM_MAP_READY = 25;
export const KIND_MATCHMAKER_MATCHED = 26;
export const KIND_NOTIFICATION = 27;
export const KIND_CHAT_EVENT = 28;
export const KIND_TSYNC_V2_HELLO = 29;
export const KIND_TSYNC_V2_SNAPSHOT = 30;
export const KIND_TSYNC_V2_INPUT = 31;
export const KIND_MATCH_CLOSED = 32;
export const KIND_ROOM_REJECT = 33;

export const TSYNC_KIND_MIN = 7;
export const TSYNC_KIND_MAX = 12;
export const REP_KIND_MIN = 13;
export const REP_KIND_MAX = 15;
export const NA_KIND_MIN = 16;
export const NA_KIND_MAX = 20;
export const ROOM_KIND_MIN = 21;
export const ROOM_KIND_MAX = 25;
/** Kinds below this are reserved for the platform. */
export const APP_KIND_MIN = 100;

export const AUTH_STATUS_AUTHENTICATED = 0;
export const AUTH_STATUS_GUEST = 1;
export const AUTH_STATUS_REJECTED = 2;
export const AUTH_REASON_AUTH_FAILED = 0;
export const AUTH_REASON_AUTH_REQUIRED = 1;
export const AUTH_REASON_PROTOCOL = 2;
export const RPC_STATUS_OK = 0;
export const RPC_STATUS_ERROR = 1;

export const RPC_REQUEST_ID_BYTES = 8;
export const RPC_METHOD_LEN_BYTES = 2;
export const SENDER_ID_BYTES = 8;
export const POSITION_BYTES = 8;
export const LENGTH_PREFIX_BYTES = 4;
export const KIND_BYTES = 2;
/** Largest framed `len` (kind + body) accepted before allocating. */
export const MAX_FRAME_BODY_BYTES = 8 * 1024 * 1024;
/** Version of this SDK's wire surface. */
export const EXPECTED_ABI_VERSION = 1;
/** Default wait for connect, handshake, waitForKind and RPC. */
export const DEFAULT_TIMEOUT_MS = 10_000;
