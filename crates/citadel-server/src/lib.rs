//! # citadel-server
//!
//! The Citadel node: realtime over WebSocket, QUIC and WebTransport
//! (handshake, rooms, relay, RPC routing, backpressure), networked actors
//! and transform sync, the embedded Lua runtime, accounts, notifications,
//! friends and groups over SQLite or PostgreSQL, the HTTP endpoints,
//! configuration and graceful shutdown. The `citadel` binary
//! (`src/main.rs`) is a thin CLI over [`node::NodeBuilder`].
//!
//! ## Layout
//!
//! | Module | Role |
//! | --- | --- |
//! | [`config`] | TOML + `CITADEL_*` env + CLI flags; one file per section, each validating itself |
//! | [`transport`] | WebSocket / QUIC / WebTransport framing ↔ envelopes, writer tasks, TLS |
//! | [`gateway`] | handshake phases, dispatch, outbound lanes, rate limit |
//! | [`place`] | `Place` (default dimension or a room) and `RoomId` |
//! | [`router`] | delivery: the one path from any producer into connections' lanes |
//! | [`realm`] | rooms, the default dimension, room policy |
//! | [`actors`] | transform sync: the driver of citadel-netcode's actor protocol (lock, tick clock, metrics, routing) |
//! | [`rpc`] | method registry with reserved built-in namespaces |
//! | [`runtime`] | embedded Lua: hooks, host functions, budgets, hot reload |
//! | [`services`] | accounts, sessions and tokens, revocation, notifications, friends, groups |
//! | [`store`] | durable state: one trait per domain, one sqlx implementation (SQLite / PostgreSQL) |
//! | [`http`] | `/health`, `/status`, `/metrics`, `/v1`; its accept loop and connection bounds |
//! | [`conn_limits`] | per-address connection caps, accept backoff on descriptor exhaustion |
//! | [`fdlimit`] | `RLIMIT_NOFILE` raised at start and checked against the caps |
//! | [`metrics`] | counters, drop and close reasons |
//! | [`banner`] | the startup banner (listener URLs, descriptor notes) |
//! | [`util`] | `BoxFuture`, the return type of the object-safe async seams |
//! | [`node`] | wiring, listeners, shutdown |
//!
//! What it is not (yet): the validated owner-input path of transform sync
//! (input frames are acknowledged and counted, not applied), NetworkPeer
//! replication (kinds 13-15), and chat (its RPC namespace is reserved).

#![forbid(unsafe_code)]

pub mod actors;
pub mod banner;
pub mod config;
pub mod conn_limits;
pub mod fdlimit;
pub mod gateway;
pub mod http;
pub mod metrics;
pub mod netpeer;
pub mod node;
pub mod place;
pub mod realm;
pub mod router;
pub mod rpc;
pub mod runtime;
pub mod services;
pub mod store;
pub mod transport;
pub mod util;

pub use config::Config;
pub use node::{NodeBuilder, RunningNode};
