//! # citadel-testkit
//!
//! What every Citadel crate's tests and benchmarks share, with no
//! dependency of its own, so any crate (even `citadel-wire`) can take it as a
//! dev-dependency without its library gaining one.
//!
//! What it is not: part of any shipped binary, or a source of randomness
//! for anything but tests and simulations (it is predictable on purpose).
//! The one library that links it is citadel-netcode, whose `SimLink` (a
//! seeded lossy link for simulations) draws from it.
//!
//! - [`TestRng`]: the one deterministic generator tests draw from.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod rng;

pub use rng::TestRng;
