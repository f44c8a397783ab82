//! The driver alone, over the real `LocalRouter` and connection lanes (no
//! socket): outputs land on the lane their message names, one encoding is
//! shared by every recipient, and refusals are counted as their metric.
//! The protocol rules themselves are tested in citadel-netcode.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use citadel_wire::actor::{NaPresence, NaState, NaTransform};
use citadel_wire::decode_framed;
use citadel_wire::protocol::{
    KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_HELLO, KIND_TSYNC_SNAPSHOT,
};
use citadel_wire::tsync::{InputBundle, InputFrame, TsyncAck};

use super::{TransformHub, test_hub};
use crate::gateway::outbound::{LaneLimits, Outbound};
use crate::metrics::{DropReason, Metrics};
use crate::place::Place;
use crate::realm::Places;
use crate::router::{LocalRouter, Recipient, Router};

struct Node {
    hub: TransformHub,
    router: Arc<LocalRouter>,
    metrics: Arc<Metrics>,
}

fn node() -> Node {
    let metrics = Arc::new(Metrics::default());
    let router = Arc::new(LocalRouter::new(Arc::new(Places::default())));
    let hub = test_hub(metrics.clone(), router.clone());
    Node {
        hub,
        router,
        metrics,
    }
}

impl Node {
    /// A connected participant that sent HELLO; its lanes emptied.
    fn opted_in(&self, participant_id: u64) -> Outbound {
        let limits = LaneLimits {
            reliable_capacity: 64,
            unreliable_capacity: 64,
            max_bytes: 1 << 20,
        };
        let outbound = Outbound::new(limits, self.metrics.clone());
        self.router.attach(Recipient {
            participant_id,
            user_id: None,
            outbound: outbound.clone(),
        });
        self.hub.handle_hello(participant_id, Place::Default);
        let (reliable, _) = outbound.drain();
        assert_eq!(kinds(&reliable), vec![KIND_TSYNC_HELLO]);
        outbound
    }
}

fn kinds(frames: &[Bytes]) -> Vec<u16> {
    frames
        .iter()
        .map(|f| {
            let mut buf = BytesMut::from(&f[..]);
            match decode_framed(&mut buf) {
                Ok(Some(envelope)) => envelope.kind,
                other => panic!("not one framed envelope: {other:?}"),
            }
        })
        .collect()
}

fn presence(x: f32) -> NaPresence {
    NaPresence {
        archetype_id: 0,
        transform: NaTransform {
            position: [x, 0.0, 0.0],
            ..NaTransform::IDENTITY
        },
    }
}

#[test]
fn reliable_messages_in_order_and_one_encoding_shared_by_the_peers() {
    let node = node();
    let (a, b, c) = (node.opted_in(1), node.opted_in(2), node.opted_in(3));
    node.hub.handle_presence(1, &presence(0.0));
    let (reliable, unreliable) = a.drain();
    assert_eq!(kinds(&reliable), vec![KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH]);
    assert!(unreliable.is_empty());
    let (to_b, _) = b.drain();
    let (to_c, _) = c.drain();
    assert_eq!(kinds(&to_b), vec![KIND_NA_SPAWN]);
    assert_eq!(to_b, to_c);
    assert_eq!(
        to_b[0].as_ptr(),
        to_c[0].as_ptr(),
        "the peers share one encoded frame"
    );
}

#[test]
fn snapshots_go_on_the_unreliable_lane_every_send_interval() {
    let node = node();
    let a = node.opted_in(1);
    node.hub.handle_presence(1, &presence(10.0));
    a.drain();
    // 60 Hz simulation, 20 Hz snapshots: one snapshot per three ticks.
    for _ in 0..6 {
        node.hub.handle_tick();
    }
    let (reliable, unreliable) = a.drain();
    assert!(reliable.is_empty());
    assert_eq!(
        kinds(&unreliable),
        vec![KIND_TSYNC_SNAPSHOT, KIND_TSYNC_SNAPSHOT]
    );
}

#[test]
fn refusals_are_counted_as_their_drop_reason() {
    let node = node();
    let _a = node.opted_in(1);
    let _b = node.opted_in(2);
    node.hub.handle_presence(1, &presence(0.0));
    let forged = NaState {
        object_id: 1,
        transform: NaTransform::IDENTITY,
    };
    assert!(!node.hub.handle_state(2, &forged));
    assert!(node.hub.handle_state(1, &forged));
    assert_eq!(node.metrics.drops(DropReason::ActorStateRefused), 1);
    node.hub.handle_ack(
        9,
        &TsyncAck {
            acked_snapshot_id: 1,
            history: 0,
        },
    );
    assert_eq!(node.metrics.drops(DropReason::NotOptedIn), 1);
    let mut bad = presence(0.0);
    bad.transform.position[0] = f32::NAN;
    node.hub.handle_presence(2, &bad);
    assert_eq!(node.metrics.drops(DropReason::MalformedBody), 1);
    let bundle = InputBundle {
        acked_snapshot_id: 0,
        last_seen_snapshot_id: 0,
        frames: vec![InputFrame::default(); 3],
    };
    node.hub.handle_input(1, &bundle);
    // Frames for object 0, which participant 1 does not own.
    assert_eq!(node.metrics.drops(DropReason::ActorInputRefused), 3);
    assert_eq!((node.hub.actor_count(), node.hub.client_count()), (1, 2));
}
