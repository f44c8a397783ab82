//! Kind 9 judged by a script's `citadel.on_input`: the hub's side of the
//! two-phase input path (citadel-netcode `actors/movement.rs`).
//!
//! What it is: [`TransformHub::handle_input_judged`] stages the bundle
//! under the hub lock, releases the lock, awaits the script's verdicts
//! ([`Runtime::on_input`], bounded by `runtime.on_input_budget_ms` and
//! `runtime.on_input_wait_ms`), then applies them under the lock again;
//! any failure applies the built-in integration for the whole bundle and
//! counts one `input_hook_fallback_*` service event. The connection awaits
//! it before reading its next envelope, so a connection has at most one
//! hook call in flight and its bundles apply in order; nothing queues per
//! connection (a full VM queue is a `queue_full` fallback).
//!
//! What it is not: no Lua here, and the lock is never held across the
//! wait. Without an `on_input` handler the connection calls
//! [`TransformHub::handle_input`] (one lock, no staging).
//! Call order: per bundle, one `handle_input_judged` (one hook call per
//! owned object the bundle moved, in bundle order).

use std::sync::Arc;

use citadel_wire::tsync::InputBundle;

use super::TransformHub;
use crate::metrics::ServiceEvent;
use crate::runtime::{Caller, Runtime};

impl TransformHub {
    /// Kind 9 with `on_input` registered: stage, judge, apply (see the
    /// module docs).
    pub async fn handle_input_judged(
        &self,
        runtime: &Runtime,
        caller: Caller,
        bundle: &InputBundle,
    ) {
        let pid = caller.participant_id;
        let (outcome, batches) = self.drive(|core, now| core.handle_input_staged(pid, bundle, now));
        self.count_input(&outcome);
        for batch in batches {
            self.judge_batch(runtime, caller.clone(), batch).await;
        }
    }

    /// One owned object's released frames: judged, then applied.
    async fn judge_batch(
        &self,
        runtime: &Runtime,
        caller: Caller,
        batch: citadel_netcode::actors::MovementBatch,
    ) {
        let batch = Arc::new(batch);
        let verdicts = match runtime.on_input(caller, batch.clone()).await {
            Ok(verdicts) => Some(verdicts),
            Err(failure) => {
                self.metrics.service_event(failure.event());
                None
            }
        };
        let moved = self.drive(|core, now| core.handle_movement(&batch, verdicts.as_deref(), now));
        self.count_input(&moved.input);
        if moved.stale {
            self.metrics.service_event(ServiceEvent::InputHookStale);
            return;
        }
        if !moved.fallback {
            self.metrics.service_event(ServiceEvent::InputHookCalls);
        }
        self.count_service(ServiceEvent::InputHookVetoed, moved.vetoed);
        self.count_service(ServiceEvent::InputHookCorrected, moved.corrected);
    }
}
