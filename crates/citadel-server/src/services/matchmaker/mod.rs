//! The ticket matchmaker (seed 000 kind 26, `services.md` §3): players
//! submit tickets (properties and a query), the node forms the smallest
//! valid mutually compatible cohort as soon as a ticket arrives, creates a
//! closed room for it and hands every member a one-time join token.
//!
//! Modules: [`query`] (the query language: text → AST, evaluation),
//! [`index`] and [`queue`] (the queue and cohort formation, pure data),
//! [`service`] ([`Matchmaker`]: locking, handoffs, expiry, presence),
//! [`label`] (the matched room's label and its hook seam), [`rpc`] (the
//! `matchmaker.*` methods) and [`config`]. Call order: see [`service`].
//! What it is not: cluster-wide (the formation claim is a seam,
//! [`service::FormationClaim`], for `cluster.md` §4.1).

pub mod config;
pub mod index;
pub mod label;
pub mod query;
pub mod queue;
pub mod rpc;
pub mod service;

pub use config::MatchmakerConfig;
pub use service::Matchmaker;

/// Runs [`Matchmaker::tick`] every `matchmaker.tick_ms` until shutdown.
pub async fn run_tick(
    mm: std::sync::Arc<Matchmaker>,
    shutdown: tokio_util::sync::CancellationToken,
) {
    let period = std::time::Duration::from_millis(mm.config().tick_ms);
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = ticker.tick() => mm.tick(service::now_ms()),
        }
    }
}
