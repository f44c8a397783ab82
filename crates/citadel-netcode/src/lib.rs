//! # citadel-netcode
//!
//! Server-authoritative transform sync as a sans-IO library: no sockets, no
//! clocks, no async runtime. Callers pass ticks and time in and poll bytes
//! out; the same code runs in the node and in single-threaded simulations.
//!
//! ## Server half
//!
//! - [`world::World`]: objects with id, archetype, owner, epochs, role,
//!   transform, velocity; a fixed simulation step integrates only
//!   server-simulated objects (owner-driven ones move by their owner).
//! - [`frame::Frame`]: the immutable, quantized state of one world after a
//!   tick, latched once and shared by every recipient (encode once).
//! - [`sender::SnapshotSender`]: one per client. Builds kind-8 snapshots
//!   against the newest acknowledged baseline: removed ids, full entries for
//!   objects new to the client, field deltas otherwise, unchanged objects
//!   omitted; a priority accumulator fills each datagram up to 1 200 bytes
//!   so nobody starves; ack handling per the 32-bit window; interest (AOI)
//!   with hysteresis and RelevancyEnter/Exit roles.
//! - [`actors::ActorServer`]: the node's whole transform-sync protocol on
//!   top of those: opt-in, acks, presences with roles and epochs, the
//!   ownership check of relay state, NPCs and patrols, place scoping, the
//!   tick and every client's snapshot. `handle_*(…, now)` inputs, typed
//!   [`actors::Output`]s addressed to participants from `poll_output`.
//! - [`input::InputQueue`]: the in-order owner input queue of one predicted
//!   object (§3.7): typed refusals, release of the contiguous run, the dt,
//!   speed and bounds clamps, epoch reset; the actor server drives one per
//!   owner-predicted object.
//! - [`rewind`]: lag-compensated hit validation (§3.8): per-object history
//!   rings, lag profiles from the measured round trip, the clamped rewind
//!   tick and the ray-vs-sphere test. The actor server records the rings
//!   of hit-eligible objects every tick and answers fire with kind 12.
//!
//! ## Client half
//!
//! - [`receiver::SnapshotReceiver`]: reconstruction (base + removed +
//!   updates), monotonic and base guards, the 64-entry ring, acks.
//! - [`predict::Predictor`]: owner prediction and reconciliation (§4.3):
//!   immediate local integration with the server's clamps, redundant input
//!   bundles, replay of unacknowledged inputs on each authoritative state,
//!   a decaying visual correction and its magnitude per snapshot.
//! - [`predictions::Predictions`]: one predictor per object the client
//!   owns (avatar, handed-off vehicles, at most
//!   [`predictions::MAX_PREDICTED`]), started and stopped by ROLE frames,
//!   one bundle per step for all of them, reconciled per object.
//! - [`interp::Interpolator`]: per-object sample buffers and rendering in the
//!   past with Hermite/linear position, slerp rotation, bounded
//!   extrapolation, adaptive delay.
//!
//! ## Testing
//!
//! [`sim::SimLink`] is a deterministic lossy link (latency, jitter, loss,
//! duplication, reordering) for single-threaded server+clients scenarios.
//!
//! What it is not: no transport, no rooms registry, no Lua, no locks; the
//! node wires those around it (its `TransformHub` is a thin driver of
//! [`actors::ActorServer`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod actors;
pub mod frame;
pub mod input;
pub mod interest;
pub mod interp;
pub mod predict;
pub mod predictions;
pub mod receiver;
pub mod rewind;
pub mod sender;
pub mod sim;
pub mod world;

/// Largest datagram payload a snapshot may use, kind included (bytes).
pub const MAX_SNAPSHOT_DATAGRAM: usize = 1_200;
