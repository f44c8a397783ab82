//! The revocation poller: every `transport.auth.revocation_poll_ms` it asks
//! the store which of this node's live sessions are no longer valid
//! (revoked by a logout on any node, or their account disabled) and closes
//! those connections. Local logouts also close at once (see `http::auth`).

use std::sync::Arc;
use std::time::Duration;

use crate::node::NodeShared;
use crate::services::accounts::now_ms;

/// Runs until shutdown.
pub async fn run_poller(shared: Arc<NodeShared>) {
    let period = Duration::from_millis(shared.config.transport.auth.revocation_poll_ms);
    // The first check comes one period after start (no session is live
    // before that), not at once as a plain `interval` would fire.
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            _ = ticker.tick() => {}
        }
        let live = shared.live.session_ids();
        if live.is_empty() {
            continue;
        }
        match shared
            .accounts
            .store()
            .invalid_sessions(live, now_ms())
            .await
        {
            Ok(invalid) => {
                for session_id in invalid {
                    let closed = shared.live.close_session(&session_id);
                    if closed > 0 {
                        tracing::info!(session = %session_id, connections = closed, "closed connections of a revoked session");
                    }
                }
            }
            Err(err) => tracing::warn!(error = %err, "revocation check failed"),
        }
    }
}
