//! Multi-object owner prediction in [`ActorView`] against the real actor
//! server over simulated links with explicit time: a client predicts its
//! avatar and an object game logic handed it at once, drives both with one
//! bundle per step and reconciles each against its own `last_input_seq`
//! with zero correction on a clean link; handing one away (to another
//! client or to the server) stops only that object's prediction.
//!
//! The driver is a minimal node: every envelope crosses a [`SimLink`] as
//! framed bytes (reliable traffic and input on clean links, snapshots on
//! their own), the server dispatches by kind, time is the tick count.

use std::collections::BTreeMap;

use bytes::BytesMut;
use citadel_client::actors::{ActorEvent, ActorView};
use citadel_netcode::actors::{ActorConfig, ActorServer, InputRefusal, NpcSpawn, Tick, WorldKey};
use citadel_netcode::predict::Correction;
use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_wire::actor::{NaPresence, NaTransform};
use citadel_wire::protocol::{
    KIND_NA_PRESENCE, KIND_TSYNC_ACK, KIND_TSYNC_HELLO, KIND_TSYNC_INPUT,
};
use citadel_wire::tsync::{HelloParams, InputBundle, TsyncAck};
use citadel_wire::{Envelope, decode_framed};

const PREDICTED: u16 = 7;
const DT: f32 = 1.0 / 60.0;
const PLACE: u8 = 1;

fn link() -> LinkConfig {
    LinkConfig {
        latency_ms: 40.0,
        jitter_ms: 0.0,
        loss: 0.0,
        duplicate: 0.0,
    }
}

fn frame(envelope: &Envelope) -> Vec<u8> {
    envelope.encode_framed().to_vec()
}

fn unframe(packet: &[u8]) -> Envelope {
    let mut buf = BytesMut::from(packet);
    decode_framed(&mut buf)
        .expect("framed")
        .expect("one whole envelope")
}

/// One client: its view, both directions of its connection, what it saw.
struct Client {
    view: ActorView,
    down: SimLink,
    up: SimLink,
    events: Vec<ActorEvent>,
}

impl Client {
    fn corrections(&self, object_id: u32) -> Vec<Correction> {
        self.events
            .iter()
            .filter_map(|e| match e {
                ActorEvent::Corrected(c) if c.object_id == object_id => Some(*c),
                _ => None,
            })
            .collect()
    }

    fn send(&mut self, now_ms: f64, envelope: Option<Envelope>) {
        if let Some(envelope) = envelope {
            self.up.send(now_ms, frame(&envelope));
        }
    }
}

/// The server, its clients and the clock.
struct Net {
    server: ActorServer<u8>,
    now: Tick,
    clients: BTreeMap<u64, Client>,
    /// Input frames the server refused for anything but a redundant
    /// resend (stale or duplicate).
    refused: usize,
}

impl Net {
    fn new() -> Net {
        let config = ActorConfig {
            hello: HelloParams::default(),
            budget: 0,
            interest: None,
            predicted_archetypes: vec![PREDICTED],
            input_max_speed: citadel_netcode::input::DEFAULT_MAX_SPEED,
            input_max_dt: citadel_netcode::input::DEFAULT_MAX_DT,
            rewind_history_ticks: 0,
            rewind: citadel_netcode::rewind::RewindParams::default(),
        };
        Net {
            server: ActorServer::new(config).expect("valid config"),
            now: Tick(0),
            clients: BTreeMap::new(),
            refused: 0,
        }
    }

    fn ms(&self) -> f64 {
        self.now.0 as f64 * 1_000.0 / 60.0
    }

    fn client(&mut self, pid: u64) -> &mut Client {
        self.clients.get_mut(&pid).expect("a joined client")
    }

    /// A client that opted in and announced a predicted avatar at `x`;
    /// returns once it predicts it.
    fn join(&mut self, pid: u64, x: f32) -> u32 {
        let now_ms = self.ms();
        let mut client = Client {
            view: ActorView::new(),
            down: SimLink::new(link(), pid * 31 + 1),
            up: SimLink::new(link(), pid * 31 + 2),
            events: Vec::new(),
        };
        client
            .up
            .send(now_ms, frame(&citadel_client::actors::hello()));
        self.clients.insert(pid, client);
        self.run_until(|n| {
            n.client(pid)
                .events
                .iter()
                .any(|e| matches!(e, ActorEvent::Negotiated(_)))
        });
        let transform = NaTransform {
            position: [x, 0.0, 0.0],
            ..NaTransform::IDENTITY
        };
        let now_ms = self.ms();
        let c = self.client(pid);
        let announce = c.view.announce(PREDICTED, transform);
        c.up.send(now_ms, frame(&announce));
        self.run_until(|n| {
            let v = &n.client(pid).view;
            v.local_object().is_some_and(|id| v.is_predicted(id))
        });
        self.client(pid).view.local_object().expect("own avatar")
    }

    /// A server-owned object at `position` in the clients' place.
    fn object(&mut self, position: [f32; 3]) -> u32 {
        let spawn = NpcSpawn {
            archetype: 3,
            position,
            world: WorldKey::Place(PLACE),
            patrol: None,
        };
        let id = self
            .server
            .handle_npc_spawn(spawn, self.now)
            .expect("spawned");
        self.route();
        id
    }

    /// Game logic gives `object_id` to `owner` (0 = the server).
    fn set_owner(&mut self, object_id: u32, owner: u64) {
        self.server
            .handle_set_owner(object_id, owner, self.now)
            .expect("a live object and a present owner");
        self.route();
    }

    fn route(&mut self) {
        let now_ms = self.ms();
        while let Some(out) = self.server.poll_output() {
            let bytes = frame(&out.message.to_envelope());
            for pid in out.to.participants() {
                self.client(*pid).down.send(now_ms, bytes.clone());
            }
        }
    }

    /// One tick: what arrived is handled on both sides, then the server
    /// simulates and sends.
    fn step(&mut self) {
        self.now = self.now.next();
        let (now, now_ms) = (self.now, self.ms());
        let pids: Vec<u64> = self.clients.keys().copied().collect();
        for pid in pids {
            let c = self.client(pid);
            let up = c.up.poll(now_ms);
            for packet in c.down.poll(now_ms) {
                let events = c.view.handle_envelope(&unframe(&packet));
                c.events.extend(events);
                if let Some(ack) = c.view.poll_ack() {
                    c.up.send(now_ms, frame(&ack));
                }
            }
            for packet in up {
                self.dispatch(pid, &unframe(&packet), now);
            }
        }
        self.server.handle_tick(now);
        self.route();
    }

    fn dispatch(&mut self, pid: u64, envelope: &Envelope, now: Tick) {
        let body = &envelope.body;
        match envelope.kind {
            KIND_TSYNC_HELLO => self.server.handle_hello(pid, PLACE, now),
            KIND_NA_PRESENCE => {
                let presence = NaPresence::decode(body).expect("presence decodes");
                self.server
                    .handle_presence(pid, &presence, now)
                    .expect("presence accepted");
            }
            KIND_TSYNC_INPUT => {
                let bundle = InputBundle::decode(body).expect("bundle decodes");
                let out = self.server.handle_input(pid, &bundle, now);
                self.refused += out
                    .refusals()
                    .filter(|(r, _)| !matches!(r, InputRefusal::Stale | InputRefusal::Duplicate))
                    .map(|(_, n)| n)
                    .sum::<usize>();
            }
            KIND_TSYNC_ACK => {
                let ack = TsyncAck::decode(body).expect("ack decodes");
                self.server.handle_ack(pid, &ack, now).expect("opted in");
            }
            kind => panic!("unexpected kind {kind} up"),
        }
        self.route();
    }

    fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step();
        }
    }

    fn run_until(&mut self, mut done: impl FnMut(&mut Net) -> bool) {
        for _ in 0..600 {
            if done(self) {
                return;
            }
            self.step();
        }
        panic!("not reached in 10 simulated seconds");
    }

    /// One local step of `pid`: each `(object, velocity)` predicted, one
    /// bundle sent for all of them.
    fn drive(&mut self, pid: u64, moves: &[(u32, [f32; 3])]) {
        let now_ms = self.ms();
        let c = self.client(pid);
        for &(object_id, velocity) in moves {
            assert!(c.view.handle_input(object_id, DT, velocity, None));
        }
        let bundle = c.view.poll_input();
        c.send(now_ms, bundle);
    }

    /// Where the server holds `object_id` (from an observer-free source:
    /// the owner's newest snapshot).
    fn seen(&mut self, pid: u64, object_id: u32) -> [f32; 3] {
        self.client(pid)
            .view
            .latest()
            .and_then(|s| s.get(&object_id))
            .map(|v| v.position)
            .expect("in the snapshot")
    }
}

fn near(a: [f32; 3], b: [f32; 3]) -> bool {
    (0..3).all(|i| (a[i] - b[i]).abs() <= 0.125)
}

#[test]
fn two_owned_objects_are_predicted_at_once_and_each_reconciles_with_zero_correction() {
    let mut net = Net::new();
    let avatar = net.join(1, 0.0);
    let cart = net.object([0.0, 800.0, 0.0]);
    net.set_owner(cart, 1);
    net.run_until(|n| n.client(1).view.is_predicted(cart));
    assert_eq!(
        net.client(1).view.predicted_objects().collect::<Vec<_>>(),
        vec![avatar, cart]
    );
    for step in 0..240 {
        net.drive(
            1,
            &[(avatar, [600.0, 0.0, 0.0]), (cart, [0.0, -300.0, 0.0])],
        );
        if step == 0 {
            let bundle = net.client(1).view.poll_input().unwrap();
            let bundle = InputBundle::decode(&bundle.body).unwrap();
            let objects: Vec<u32> = bundle.frames.iter().map(|f| f.object_id).collect();
            assert_eq!(objects, vec![avatar, cart], "one bundle, both objects");
        }
        net.step();
    }
    // The last bundles land and their snapshots come back.
    net.run(20);
    let view = &net.client(1).view;
    for id in [avatar, cart] {
        let p = view.prediction(id).unwrap();
        assert_eq!((p.acked(), p.unacked()), (240, 0), "object {id}");
    }
    for id in [avatar, cart] {
        let corrections = net.client(1).corrections(id);
        assert!(
            corrections.len() >= 50,
            "{} acks of {id}",
            corrections.len()
        );
        assert!(
            corrections
                .iter()
                .all(|c| c.error == 0.0 && c.magnitude == 0.0),
            "zero correction for {id} at every acknowledged sequence"
        );
        let predicted = net.client(1).view.prediction(id).unwrap().position();
        let server = net.seen(1, id);
        assert!(near(predicted, server), "{id}: {predicted:?} vs {server:?}");
    }
    assert_eq!(
        net.refused, 0,
        "every frame for an owned object, in its epoch"
    );
    assert!(near(net.seen(1, avatar), [2_400.0, 0.0, 0.0]));
    assert!(near(net.seen(1, cart), [0.0, -400.0, 0.0]));
    let drawn = net.client(1).view.predicted_position(cart).unwrap();
    assert!(near(drawn, [0.0, -400.0, 0.0]), "{drawn:?}");
}

#[test]
fn handing_one_object_away_stops_only_its_prediction() {
    let mut net = Net::new();
    let avatar = net.join(1, 0.0);
    let other = net.join(2, 3_000.0);
    let cart = net.object([0.0, 800.0, 0.0]);
    net.set_owner(cart, 1);
    net.run_until(|n| n.client(1).view.is_predicted(cart));
    for _ in 0..60 {
        net.drive(1, &[(avatar, [600.0, 0.0, 0.0]), (cart, [0.0, 300.0, 0.0])]);
        net.step();
    }
    // The cart stands still long enough for every snapshot to show it
    // there (the new owner starts predicting from its newest snapshot).
    for _ in 0..10 {
        net.drive(1, &[(avatar, [600.0, 0.0, 0.0])]);
        net.step();
    }
    // Game logic gives the cart to client 2 while 1's avatar keeps moving.
    net.set_owner(cart, 2);
    net.run_until(|n| !n.client(1).view.is_predicted(cart));
    assert!(
        net.client(1).view.is_predicted(avatar),
        "the avatar is kept"
    );
    let acked = net.client(1).view.prediction(avatar).unwrap().acked();
    assert!(acked > 0, "not restarted: {acked}");
    assert!(
        !net.client(1)
            .view
            .handle_input(cart, DT, [1.0, 0.0, 0.0], None)
    );
    net.run_until(|n| n.client(2).view.is_predicted(cart));
    let mut both = vec![cart, other];
    both.sort_unstable();
    assert_eq!(
        net.client(2).view.predicted_objects().collect::<Vec<_>>(),
        both
    );
    let handed_at = net.seen(2, cart);
    for _ in 0..60 {
        net.drive(1, &[(avatar, [600.0, 0.0, 0.0])]);
        net.drive(2, &[(cart, [-300.0, 0.0, 0.0])]);
        net.step();
    }
    net.run(20);
    let p = net.client(1).view.prediction(avatar).unwrap();
    assert_eq!(
        (p.acked(), p.unacked()),
        (130, 0),
        "the avatar's sequence ran on"
    );
    let q = net.client(2).view.prediction(cart).unwrap();
    assert_eq!(
        (q.epoch(), q.acked()),
        (2, 60),
        "a new epoch from sequence 1"
    );
    for (pid, id) in [(1, avatar), (2, cart)] {
        assert!(
            net.client(pid)
                .corrections(id)
                .iter()
                .all(|c| c.magnitude == 0.0),
            "{pid} never corrected {id}"
        );
        let predicted = net.client(pid).view.prediction(id).unwrap().position();
        assert!(near(predicted, net.seen(pid, id)), "{pid}/{id}");
    }
    let cart_now = net.seen(1, cart);
    assert!(
        near(cart_now, [handed_at[0] - 300.0, handed_at[1], 0.0]),
        "only 2's input moved it after the handoff: {cart_now:?} from {handed_at:?}"
    );
    // Back to the server, then gone: 2 keeps predicting its own avatar.
    net.set_owner(cart, 0);
    net.run_until(|n| !n.client(2).view.is_predicted(cart));
    assert!(net.client(2).view.is_predicted(other));
    net.set_owner(cart, 1);
    net.run_until(|n| n.client(1).view.is_predicted(cart));
    assert!(net.server.handle_npc_despawn(cart, net.now));
    net.route();
    net.run_until(|n| !n.client(1).view.is_predicted(cart));
    assert_eq!(
        net.client(1).view.predicted_objects().collect::<Vec<_>>(),
        vec![avatar]
    );
}
