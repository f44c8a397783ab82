//! The veto path with a scripted [`VetoCaller`] the test answers by hand:
//! the synchronous path without a handler, per-connection order, the
//! in-flight bound, each fail-closed outcome, a partial refusal (the rest
//! applies, the owner is corrected), and a commit made stale by a change
//! while the verdict was pending.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use citadel_netpeer::{ClassSpec, FieldSpec, Rejection, Value};
use citadel_wire::netpeer::{BunchBase, DeltaBunch, FieldCodec, FieldValue};
use tokio::sync::oneshot;

use super::{Verdict, VetoCaller, VetoOutcome, VetoRequest};
use crate::config::NetworkPeerConfig;
use crate::metrics::Metrics;
use crate::netpeer::NetPeerNode;
use crate::place::Place;
use crate::router::{Fanout, Lane, Recipient, Router};

const OWNER: u64 = 1;
const AMMO: u16 = 0;
const FUEL: u16 = 1;

/// Counts frames per participant.
#[derive(Debug, Default)]
struct Counting(Mutex<Vec<u64>>);

impl Router for Counting {
    fn attach(&self, _: Recipient) {}
    fn detach(&self, _: u64) {}
    fn to_participant(&self, participant_id: u64, _: Lane, _: Bytes) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(participant_id);
        true
    }
    fn to_account(&self, _: &str, _: Lane, _: Bytes) -> Fanout {
        Fanout::default()
    }
    fn to_place(&self, _: Place, _: Option<u64>, _: Lane, _: Bytes) -> usize {
        0
    }
    fn to_everyone(&self, _: Lane, _: Bytes) -> usize {
        0
    }
}

/// Holds every request until the test answers it.
#[derive(Default)]
struct Held {
    waiting: Mutex<Vec<(VetoRequest, oneshot::Sender<Verdict>)>>,
    refuse: bool,
}

impl VetoCaller for Held {
    fn submit(&self, request: VetoRequest) -> Option<oneshot::Receiver<Verdict>> {
        if self.refuse {
            return None;
        }
        let (tx, rx) = oneshot::channel();
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((request, tx));
        Some(rx)
    }
}

impl Held {
    /// Waits for the next request and answers it.
    async fn answer(&self, verdict: Verdict) -> VetoRequest {
        for _ in 0..500 {
            let next = {
                let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
                (!w.is_empty()).then(|| w.remove(0))
            };
            if let Some((request, tx)) = next {
                let _ = tx.send(verdict);
                return request;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("no veto request arrived");
    }
}

struct Rig {
    node: Arc<NetPeerNode>,
    metrics: Arc<Metrics>,
    router: Arc<Counting>,
    object: u32,
    next_result: u64,
}

fn rig(tweak: impl FnOnce(&mut NetworkPeerConfig)) -> Rig {
    let mut config = NetworkPeerConfig {
        enabled: true,
        veto_budget_ms: 1_000,
        ..NetworkPeerConfig::default()
    };
    tweak(&mut config);
    let metrics = Arc::new(Metrics::default());
    let router = Arc::new(Counting::default());
    let node = match NetPeerNode::new(&config, metrics.clone(), router.clone()) {
        Ok(n) => Arc::new(n),
        Err(e) => panic!("config: {e}"),
    };
    let spec = ClassSpec {
        class_id: 3,
        layout_version: 1,
        fields: vec![
            FieldSpec::new("ammo", FieldCodec::IntRange { min: 0, max: 100 }).client_owned(),
            FieldSpec::new("fuel", FieldCodec::IntRange { min: 0, max: 100 }).client_owned(),
        ],
        evolution: Default::default(),
        position_field: None,
    };
    assert!(node.register_class(spec).is_ok());
    node.handle_connect(OWNER, false);
    let object = node.spawn(3, 0, Some(OWNER), false).unwrap_or(0);
    node.handle_tick();
    Rig {
        node,
        metrics,
        router,
        object,
        next_result: 1,
    }
}

/// A rig whose lane is live: a registered handler answered by [`Held`].
fn judged_rig(tweak: impl FnOnce(&mut NetworkPeerConfig)) -> (Rig, Arc<Held>) {
    let r = rig(tweak);
    let held = Arc::new(Held::default());
    r.node.set_veto_caller(Some(held.clone()));
    r.node.set_lua_veto_active(true);
    (r, held)
}

impl Rig {
    /// A full proposal of `ammo` (full bunches need no earlier binding).
    fn propose(&mut self, ammo: i64) {
        self.propose_values(vec![(AMMO, FieldValue::Int(ammo))]);
    }

    /// A full proposal of `values`.
    fn propose_values(&mut self, values: Vec<(u16, FieldValue)>) {
        let result_id = self.next_result;
        self.next_result += 1;
        let body = self.node.inspect(|core| {
            let schema = core.class(3).map(|c| c.current().clone());
            DeltaBunch {
                object_id: self.object,
                result_id,
                base: BunchBase::Full,
                values,
            }
            .encode(&schema.unwrap_or_else(|| panic!("class")))
            .unwrap_or_default()
        });
        self.node
            .handle_proposal_from(OWNER, Some("u1"), Bytes::from(body));
    }

    fn ammo(&self) -> Option<i64> {
        self.int(AMMO)
    }

    fn int(&self, field: u16) -> Option<i64> {
        match self
            .node
            .object(self.object)?
            .values
            .get(usize::from(field))?
        {
            Value::Plain(FieldValue::Int(v)) => Some(*v),
            _ => None,
        }
    }

    fn veto(&self, o: VetoOutcome) -> u64 {
        self.metrics.netpeer.veto(o)
    }

    fn frames(&self) -> usize {
        self.router
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    async fn settle(&self, what: &str, done: impl Fn(&Rig) -> bool) {
        for _ in 0..500 {
            if done(self) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        panic!("{what}");
    }
}

#[tokio::test]
async fn without_a_handler_the_proposal_applies_synchronously() {
    let mut r = rig(|_| {});
    let held = Arc::new(Held::default());
    r.node.set_veto_caller(Some(held.clone()));
    // A caller but no registered handler: today's path, applied before
    // handle_proposal_from returns, the caller never asked.
    r.propose(5);
    assert_eq!(r.ammo(), Some(5));
    assert!(held.waiting.lock().map(|w| w.is_empty()).unwrap_or(false));
    assert_eq!(r.metrics.netpeer.event("proposals_applied"), 1);
    for o in VetoOutcome::ALL {
        assert_eq!(r.veto(o), 0, "{o:?}");
    }
}

#[tokio::test]
async fn lane_keeps_order_bounds_in_flight_and_corrects_a_veto() {
    let (mut r, held) = judged_rig(|c| c.veto_max_in_flight = 2);
    for ammo in [10, 20, 30, 40] {
        r.propose(ammo);
    }
    // Two wait in the lane; the other two trip the bound before validation.
    assert_eq!(r.veto(VetoOutcome::InFlightFull), 2);
    assert_eq!(
        r.ammo(),
        Some(0),
        "nothing applied while the verdict is pending"
    );
    let first = held.answer(Verdict::Allow).await;
    assert_eq!(first.participant_id, OWNER);
    assert_eq!(first.user_id.as_deref(), Some("u1"));
    assert_eq!((first.object_id, first.class_id), (r.object, 3));
    assert_eq!(first.fields, vec![("ammo".to_owned(), FieldValue::Int(10))]);
    r.settle("first applied", |r| r.ammo() == Some(10)).await;
    let frames = r.frames();
    let second = held.answer(Verdict::Veto).await;
    assert_eq!(
        second.fields,
        vec![("ammo".to_owned(), FieldValue::Int(20))]
    );
    r.settle("vetoed", |r| r.veto(VetoOutcome::Vetoed) == 1)
        .await;
    r.settle("correction sent", |r| r.frames() > frames).await;
    assert_eq!(r.ammo(), Some(10), "a vetoed proposal changes nothing");
    assert_eq!(r.metrics.netpeer.event("full_correction"), 1);
    assert_eq!(r.veto(VetoOutcome::Allowed), 1);
    // The lane is free again.
    r.propose(50);
    held.answer(Verdict::Allow).await;
    r.settle("third applied", |r| r.ammo() == Some(50)).await;
}

#[tokio::test]
async fn failures_veto_and_a_state_change_makes_the_commit_stale() {
    let (mut r, held) = judged_rig(|c| c.veto_budget_ms = 30);
    for (verdict, outcome) in [
        (Verdict::Error, VetoOutcome::Error),
        (Verdict::Timeout, VetoOutcome::Timeout),
    ] {
        r.propose(7);
        held.answer(verdict).await;
        r.settle("counted", |r| r.veto(outcome) == 1).await;
    }
    // No answer within the budget.
    r.propose(8);
    r.settle("timed out", |r| r.veto(VetoOutcome::Timeout) == 2)
        .await;
    held.waiting.lock().map(|mut w| w.clear()).unwrap_or(());
    assert_eq!(r.ammo(), Some(0));
    assert_eq!(r.metrics.netpeer.event("full_correction"), 3);
    // The owner changes while the verdict is pending: dropped as stale.
    let (mut r, held) = judged_rig(|_| {});
    r.propose(9);
    r.settle("request queued", |_| {
        held.waiting.lock().map(|w| w.len()).unwrap_or(0) == 1
    })
    .await;
    assert!(r.node.set_owner(r.object, None).is_ok());
    held.answer(Verdict::Allow).await;
    r.settle("stale", |r| {
        r.metrics.netpeer.rejected(Rejection::Stale) == 1
    })
    .await;
    assert_eq!(r.ammo(), Some(0));
    // A full script queue vetoes at once.
    let mut r = rig(|_| {});
    r.node.set_veto_caller(Some(Arc::new(Held {
        refuse: true,
        ..Held::default()
    })));
    r.node.set_lua_veto_active(true);
    r.propose(4);
    r.settle("unavailable", |r| r.veto(VetoOutcome::Unavailable) == 1)
        .await;
    assert_eq!(r.ammo(), Some(0));
}

#[test]
fn a_verdict_resolves_to_an_outcome_and_the_vetoed_ids() {
    let proposed = [2, 5, 9];
    let cases = [
        (Verdict::Allow, VetoOutcome::Allowed, vec![]),
        (Verdict::Veto, VetoOutcome::Vetoed, vec![2, 5, 9]),
        (Verdict::Refuse(vec![]), VetoOutcome::Allowed, vec![]),
        (Verdict::Refuse(vec![1]), VetoOutcome::Partial, vec![5]),
        // In proposal order, each once.
        (
            Verdict::Refuse(vec![2, 0, 2]),
            VetoOutcome::Partial,
            vec![2, 9],
        ),
        (
            Verdict::Refuse(vec![0, 1, 2]),
            VetoOutcome::Vetoed,
            vec![2, 5, 9],
        ),
        // A position past the proposal fails closed.
        (
            Verdict::Refuse(vec![0, 3]),
            VetoOutcome::Error,
            vec![2, 5, 9],
        ),
        (Verdict::Error, VetoOutcome::Error, vec![2, 5, 9]),
        (Verdict::Timeout, VetoOutcome::Timeout, vec![2, 5, 9]),
        (
            Verdict::Unavailable,
            VetoOutcome::Unavailable,
            vec![2, 5, 9],
        ),
    ];
    for (verdict, outcome, vetoed) in cases {
        let what = format!("{verdict:?}");
        assert_eq!(verdict.refusal(&proposed), (outcome, vetoed), "{what}");
    }
}

#[tokio::test]
async fn a_partial_refusal_applies_the_rest_and_corrects_the_owner() {
    let (mut r, held) = judged_rig(|_| {});
    r.propose_values(vec![
        (AMMO, FieldValue::Int(30)),
        (FUEL, FieldValue::Int(40)),
    ]);
    let frames = r.frames();
    // Refuse fuel (position 1 of the request).
    let request = held.answer(Verdict::Refuse(vec![1])).await;
    assert_eq!(
        request.fields,
        vec![
            ("ammo".to_owned(), FieldValue::Int(30)),
            ("fuel".to_owned(), FieldValue::Int(40)),
        ]
    );
    r.settle("partly applied", |r| r.ammo() == Some(30)).await;
    assert_eq!(r.int(FUEL), Some(0), "the refused field is unchanged");
    assert_eq!(r.veto(VetoOutcome::Partial), 1);
    assert_eq!(r.metrics.netpeer.event("full_correction"), 1);
    assert_eq!(r.metrics.netpeer.event("proposals_applied"), 1);
    r.settle("correction sent", |r| r.frames() > frames).await;
    // A position past the proposal vetoes everything, counted as an error.
    r.propose_values(vec![
        (AMMO, FieldValue::Int(31)),
        (FUEL, FieldValue::Int(41)),
    ]);
    held.answer(Verdict::Refuse(vec![0, 2])).await;
    r.settle("error counted", |r| r.veto(VetoOutcome::Error) == 1)
        .await;
    r.settle("corrected again", |r| {
        r.metrics.netpeer.event("full_correction") == 2
    })
    .await;
    assert_eq!((r.ammo(), r.int(FUEL)), (Some(30), Some(0)));
    // Refusing every proposed field is a whole veto.
    r.propose_values(vec![(FUEL, FieldValue::Int(42))]);
    held.answer(Verdict::Refuse(vec![0])).await;
    r.settle("vetoed", |r| r.veto(VetoOutcome::Vetoed) == 1)
        .await;
    assert_eq!(r.int(FUEL), Some(0));
    assert_eq!(r.veto(VetoOutcome::Partial), 1);
}
