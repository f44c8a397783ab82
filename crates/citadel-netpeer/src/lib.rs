//! # citadel-netpeer
//!
//! NetworkPeer replication (kinds 13-15, realtime-behaviour §6) as a
//! sans-IO library: no sockets, no clock, no async runtime. The node passes
//! `now_ms` in and polls addressed bodies out; the same code runs in the
//! node, in simulations over `citadel_netcode::sim::SimLink`, and in the
//! client SDK.
//!
//! ## Server half
//!
//! - [`class`]: what trusted code registers (fields, codecs, bounds, COND and
//!   authority flags, evolution policy) and the compiled schemas with their
//!   BLAKE3-128 identity.
//! - [`server::Authority`]: objects in matches, connections, per-(object,
//!   receiver) baselines with tokens from one global allocator, full then
//!   cumulative deltas against the last acked state, the pending, collection
//!   and ack-timeout re-baselines, full bunches paced per receiver and tick
//!   (`bootstrap_per_tick`), grid relevance, acks (kind 14), the optional
//!   schema table (kind 15).
//! - [`proposal`]: the client → server pipeline with a typed rejection per
//!   rule, the veto hook, corrections and the budgeted rebroadcast.
//! - [`items`]: keyed insert / update / remove of server-owned collection
//!   items.
//! - [`encode`]: bunch encoding split into a per-receiver header and a
//!   values section that can be encoded once and shared (§6.5).
//!
//! ## Client half
//!
//! - [`session::NetworkPeerSession`]: applies bunches onto the named base,
//!   checks a full bunch's identity, rejects a whole bunch on any error,
//!   acks only what it applied, reports "needs full", builds proposals.
//!
//! What it is not: transport, Lua, metrics export or config parsing (the
//! node's `netpeer` driver does those).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod class;
pub mod encode;
pub mod interest;
pub mod items;
pub mod limits;
pub mod out;
mod pacing;
mod pairs;
pub mod proposal;
mod revisions;
pub mod server;
pub mod session;
pub mod value;

pub use class::{
    Authority as FieldAuthority, Class, ClassError, ClassSpec, Cond, Evolution, FieldSpec, TypeTag,
};
pub use limits::{AuthorityConfig, InterestConfig, Limits};
pub use out::Outgoing;
pub use proposal::{Applied, NoVeto, Pending, Proposal, Rejection, VetoHook};
pub use server::{ApiError, Authority, ConnId, Counters};
pub use session::{NetworkPeerSession, Outcome, SessionError, SessionLimits};
pub use value::{Items, Value};
