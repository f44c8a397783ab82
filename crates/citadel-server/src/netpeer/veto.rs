//! The asynchronous veto path: proposals judged by a script on the VM
//! thread (`citadel.netpeer_on_proposal`), without the driver ever waiting
//! for Lua while it holds its lock and without blocking a tokio worker.
//!
//! What it is: per connection, a lane (an unbounded channel with an
//! explicit in-flight bound, `transport.network_peer.veto_max_in_flight`)
//! drained by one task, so a connection's proposals keep their order. For
//! each proposal the task (1) validates it under the lock
//! ([`citadel_netpeer::Authority::validate_proposal`], steps 1-7, nothing
//! applied), (2) hands a [`VetoRequest`] with a deadline
//! (`veto_budget_ms` from now) to the [`VetoCaller`] and awaits the verdict
//! with no lock held, (3) commits under the lock
//! ([`citadel_netpeer::Authority::commit_proposal`], which re-checks the
//! state and drops a proposal that went stale meanwhile).
//!
//! A verdict allows, vetoes, or refuses some fields ([`Verdict::Refuse`]):
//! the core applies the rest and sends the owner the same correction full
//! bunch as for a whole veto (`outcome="partial"`).
//!
//! Trust default: fail closed. A handler that raises, runs out of memory,
//! returns a malformed answer, misses the deadline, a full script queue, a
//! stopped runtime, all veto the whole proposal (the owner gets a
//! correction full bunch), each counted in
//! `citadel_netpeer_veto_total{outcome=…}`. A proposal over the in-flight
//! bound is dropped unvalidated (`outcome="in_flight_full"`).
//!
//! What it is not: the Lua side (`runtime::netpeer_veto` implements
//! [`VetoCaller`]) or a rule of its own (the core decides everything but
//! the verdict). Call order: the runtime installs its caller
//! ([`NetPeerNode::set_veto_caller`]) and says whether a handler is
//! registered ([`NetPeerNode::set_lua_veto_active`]); the connection calls
//! [`NetPeerNode::handle_proposal_from`] for every kind 13; a disconnect
//! drops the lane.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use citadel_netpeer::{ConnId, Pending};
use citadel_wire::netpeer::FieldValue;
use tokio::sync::{mpsc, oneshot};

use super::NetPeerNode;
use crate::config::NetworkPeerConfig;

/// What the script judges: the proposer, the object, and the changed
/// fields by name after every built-in check passed.
#[derive(Debug, Clone)]
pub struct VetoRequest {
    /// The proposer (`ctx.sender`).
    pub participant_id: u64,
    /// Its account, absent for guests.
    pub user_id: Option<String>,
    /// The object.
    pub object_id: u32,
    /// Its class.
    pub class_id: u32,
    /// Field name → proposed (decoded, bounds-checked) value.
    pub fields: Vec<(String, FieldValue)>,
    /// The verdict is ignored (and the proposal vetoed) after this.
    pub deadline: Instant,
}

/// The script's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// `true` or nil: apply.
    Allow,
    /// `false`: veto every proposed field.
    Veto,
    /// `{ veto = { names } }`: refuse these fields, apply the rest. The
    /// positions are indices into [`VetoRequest::fields`]; one out of
    /// range vetoes everything (counted as [`VetoOutcome::Error`]).
    Refuse(Vec<usize>),
    /// The handler raised, returned another shape or ran out of memory.
    Error,
    /// The deadline passed (in the queue or in the handler).
    Timeout,
    /// No script could answer: the queue was full or the runtime stopped
    /// (the driver's own verdict; a [`VetoCaller`] never sends it).
    Unavailable,
}

impl Verdict {
    /// How the verdict is counted and the field ids it vetoes, out of
    /// `proposed` (the proposal's field ids, in [`VetoRequest::fields`]
    /// order). A refusal of every proposed field counts as `Vetoed`, of
    /// none as `Allowed`.
    pub fn refusal(self, proposed: &[u16]) -> (VetoOutcome, Vec<u16>) {
        // Every field vetoed, counted as `outcome`.
        let whole = |outcome| (outcome, proposed.to_vec());
        let positions = match self {
            Verdict::Allow => return (VetoOutcome::Allowed, Vec::new()),
            Verdict::Veto => return whole(VetoOutcome::Vetoed),
            Verdict::Error => return whole(VetoOutcome::Error),
            Verdict::Timeout => return whole(VetoOutcome::Timeout),
            Verdict::Unavailable => return whole(VetoOutcome::Unavailable),
            Verdict::Refuse(positions) => positions,
        };
        let mut refused = vec![false; proposed.len()];
        for at in positions {
            match refused.get_mut(at) {
                Some(slot) => *slot = true,
                None => return whole(VetoOutcome::Error),
            }
        }
        let vetoed: Vec<u16> = proposed
            .iter()
            .zip(&refused)
            .filter(|(_, r)| **r)
            .map(|(f, _)| *f)
            .collect();
        let outcome = match vetoed.len() {
            0 => VetoOutcome::Allowed,
            n if n == proposed.len() => VetoOutcome::Vetoed,
            _ => VetoOutcome::Partial,
        };
        (outcome, vetoed)
    }
}

/// Where verdicts come from (the script runtime).
pub trait VetoCaller: Send + Sync {
    /// Queues `request` for the script thread without blocking; `None`
    /// when the queue is full or the runtime stopped.
    fn submit(&self, request: VetoRequest) -> Option<oneshot::Receiver<Verdict>>;
}

/// How one proposal on the veto path ended (`citadel_netpeer_veto_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VetoOutcome {
    /// The script allowed it.
    Allowed = 0,
    /// The script vetoed it.
    Vetoed,
    /// The script refused some of its fields: the rest applied.
    Partial,
    /// The handler failed: vetoed (fail closed).
    Error,
    /// No verdict before `veto_budget_ms`: vetoed (fail closed).
    Timeout,
    /// The script queue was full or the runtime gone: vetoed (fail closed).
    Unavailable,
    /// Over `veto_max_in_flight`: dropped before validation.
    InFlightFull,
}

impl VetoOutcome {
    /// Every outcome, in counter order.
    pub const ALL: [VetoOutcome; 7] = [
        VetoOutcome::Allowed,
        VetoOutcome::Vetoed,
        VetoOutcome::Partial,
        VetoOutcome::Error,
        VetoOutcome::Timeout,
        VetoOutcome::Unavailable,
        VetoOutcome::InFlightFull,
    ];

    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            VetoOutcome::Allowed => "allowed",
            VetoOutcome::Vetoed => "vetoed",
            VetoOutcome::Partial => "partial",
            VetoOutcome::Error => "error",
            VetoOutcome::Timeout => "timeout",
            VetoOutcome::Unavailable => "unavailable",
            VetoOutcome::InFlightFull => "in_flight_full",
        }
    }
}

struct Job {
    user_id: Option<String>,
    body: Bytes,
}

struct Lane {
    tx: mpsc::UnboundedSender<Job>,
    in_flight: Arc<AtomicUsize>,
}

/// The driver's veto-path state (one per node).
pub(super) struct LuaVeto {
    caller: Mutex<Option<Arc<dyn VetoCaller>>>,
    active: AtomicBool,
    lanes: Mutex<HashMap<ConnId, Lane>>,
    /// Proposals waiting in any lane (0: no lane needs a look).
    busy: Arc<AtomicUsize>,
    budget: Duration,
    max_in_flight: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl LuaVeto {
    pub(super) fn new(config: &NetworkPeerConfig) -> Self {
        LuaVeto {
            caller: Mutex::new(None),
            active: AtomicBool::new(false),
            lanes: Mutex::new(HashMap::new()),
            busy: Arc::new(AtomicUsize::new(0)),
            budget: Duration::from_millis(config.veto_budget_ms.max(1)),
            max_in_flight: config.veto_max_in_flight.max(1),
        }
    }

    /// The caller, when a handler is registered.
    fn live_caller(&self) -> Option<Arc<dyn VetoCaller>> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.caller).clone()
    }

    /// Whether `conn`'s proposals take the lane: a handler is live, or
    /// earlier proposals still wait there (order is kept). Without a
    /// handler and with every lane idle this is two atomic loads.
    fn routes(&self, conn: ConnId) -> bool {
        if self.active.load(Ordering::Acquire) {
            return lock(&self.caller).is_some();
        }
        self.busy.load(Ordering::Acquire) > 0
            && lock(&self.lanes)
                .get(&conn)
                .is_some_and(|l| l.in_flight.load(Ordering::Acquire) > 0)
    }

    pub(super) fn drop_lane(&self, conn: ConnId) {
        lock(&self.lanes).remove(&conn);
    }
}

impl NetPeerNode {
    /// Installs the script runtime's verdict source (`None` removes it).
    pub fn set_veto_caller(&self, caller: Option<Arc<dyn VetoCaller>>) {
        *lock(&self.lua_veto.caller) = caller;
    }

    /// Whether the current script registered `netpeer_on_proposal`.
    pub fn set_lua_veto_active(&self, active: bool) {
        self.lua_veto.active.store(active, Ordering::Release);
    }

    /// Kind 13 from a connection. Without a Lua handler this is
    /// [`NetPeerNode::handle_proposal`] (the synchronous path, unchanged);
    /// with one, the proposal joins the connection's veto lane.
    pub fn handle_proposal_from(
        self: &Arc<Self>,
        participant_id: u64,
        user_id: Option<&str>,
        body: Bytes,
    ) {
        let veto = &self.lua_veto;
        if !veto.routes(participant_id) {
            let _ = self.handle_proposal(participant_id, &body);
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No executor to wait on: judge it as an unavailable verdict.
            self.count_veto(VetoOutcome::Unavailable);
            self.drive(|d, now| {
                if let Ok(p) = d.core.validate_proposal(participant_id, &body, now) {
                    let all = p.field_ids();
                    let _ = d.core.commit_proposal(p, &all, now);
                }
            });
            return;
        };
        let mut lanes = lock(&veto.lanes);
        let lane = lanes.entry(participant_id).or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            let in_flight = Arc::new(AtomicUsize::new(0));
            runtime.spawn(run_lane(
                Arc::downgrade(self),
                participant_id,
                rx,
                [in_flight.clone(), veto.busy.clone()],
            ));
            Lane { tx, in_flight }
        });
        if lane.in_flight.load(Ordering::Acquire) >= veto.max_in_flight {
            drop(lanes);
            self.count_veto(VetoOutcome::InFlightFull);
            return;
        }
        let counts = [&lane.in_flight, &veto.busy];
        for c in counts {
            c.fetch_add(1, Ordering::AcqRel);
        }
        let job = Job {
            user_id: user_id.map(str::to_owned),
            body,
        };
        if lane.tx.send(job).is_err() {
            for c in counts {
                c.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    fn count_veto(&self, outcome: VetoOutcome) {
        self.metrics.netpeer.count_veto(outcome);
    }

    /// Validate, await the verdict with no lock held, commit.
    async fn judge(&self, participant_id: u64, job: Job) {
        let validated = self.drive(|d, now| {
            let pending = d.core.validate_proposal(participant_id, &job.body, now)?;
            // Only the proposed fields' names, in proposal order.
            let p = pending.proposal();
            let fields = d.core.class(p.class_id).map(|c| c.fields());
            let names: Vec<String> = p
                .fields
                .iter()
                .map(|(f, _)| {
                    fields
                        .and_then(|fs| fs.get(usize::from(*f)))
                        .map(|spec| spec.name.clone())
                        .unwrap_or_default()
                })
                .collect();
            Ok::<_, citadel_netpeer::Rejection>((pending, names))
        });
        let Ok((pending, names)) = validated else {
            return;
        };
        let vetoed = match self.lua_veto.live_caller() {
            // The handler went away while this waited: today's path.
            None => Vec::new(),
            Some(caller) => {
                let verdict = self.verdict(caller, &pending, names, job.user_id).await;
                let (outcome, vetoed) = verdict.refusal(&pending.field_ids());
                self.count_veto(outcome);
                vetoed
            }
        };
        let _ = self.drive(|d, now| {
            // A Rust hook (`set_veto`) still has its say.
            let mut vetoed = vetoed;
            if let Some(hook) = d.veto.as_mut() {
                vetoed.extend(pending.judge(hook.as_mut()));
            }
            d.core.commit_proposal(pending, &vetoed, now)
        });
    }

    async fn verdict(
        &self,
        caller: Arc<dyn VetoCaller>,
        pending: &Pending,
        // One per proposed field, in proposal order.
        names: Vec<String>,
        user_id: Option<String>,
    ) -> Verdict {
        let p = pending.proposal();
        let deadline = Instant::now() + self.lua_veto.budget;
        let request = VetoRequest {
            participant_id: p.conn,
            user_id,
            object_id: p.object_id,
            class_id: p.class_id,
            fields: names
                .into_iter()
                .zip(p.fields.iter())
                .map(|(name, (_, v))| (name, v.clone()))
                .collect(),
            deadline,
        };
        let Some(rx) = caller.submit(request) else {
            return Verdict::Unavailable;
        };
        match tokio::time::timeout_at(deadline.into(), rx).await {
            Ok(Ok(verdict)) => verdict,
            Err(_) => Verdict::Timeout,
            Ok(Err(_)) => Verdict::Unavailable,
        }
    }
}

/// One connection's lane: judges its proposals one at a time, in order.
async fn run_lane(
    node: Weak<NetPeerNode>,
    participant_id: u64,
    mut rx: mpsc::UnboundedReceiver<Job>,
    counts: [Arc<AtomicUsize>; 2],
) {
    // Ends once the lane is dropped (disconnect) and drained; a job left
    // after the node is gone is dropped unjudged.
    while let Some(job) = rx.recv().await {
        if let Some(node) = node.upgrade() {
            node.judge(participant_id, job).await;
        }
        for c in &counts {
            c.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests;
