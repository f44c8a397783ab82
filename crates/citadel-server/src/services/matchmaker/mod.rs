//! The ticket matchmaker (seed 000 kind 26, `services.md` §3).
//!
//! Modules: [`query`] (the query language), [`index`] and [`queue`] (the
//! queue and cohort formation, pure data).
pub mod index;
pub mod query;
pub mod queue;
