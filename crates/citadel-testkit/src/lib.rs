//! # citadel-testkit
//!
//! What every Citadel crate's tests and benchmarks share, with no
//! dependency of its own, so any crate (even `citadel-wire`) can take it as a
//! dev-dependency without its library gaining one.
//!
//! What it is not: part of any shipped binary or library, or a source of
//! randomness for anything but tests (it is predictable on purpose).
//!
//! - [`TestRng`]: the one deterministic generator tests draw from.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod rng;

pub use rng::TestRng;
