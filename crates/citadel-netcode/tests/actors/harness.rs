//! A stage for the actor server: the real [`ActorServer`] and one simulated
//! client per participant in one thread, over [`SimLink`]s with explicit
//! time. Every output is encoded to the bytes a connection would carry
//! (framed envelopes); reliable messages travel a loss-free, in-order
//! link, snapshots and acknowledgements a lossy one. Time is the tick
//! count: tick `n` is `n / sim_hz` seconds.

use std::collections::{BTreeMap, BTreeSet};

use bytes::BytesMut;
use citadel_netcode::actors::{ActorConfig, ActorServer, Delivery, NpcSpawn, Refusal, Tick};
use citadel_netcode::receiver::{Applied, SnapshotReceiver};
use citadel_netcode::sim::{LinkConfig, SimLink};
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::protocol::{
    KIND_NA_DESPAWN, KIND_NA_SPAWN, KIND_NA_SPAWN_BATCH, KIND_TSYNC_ACK, KIND_TSYNC_HELLO,
    KIND_TSYNC_REWIND, KIND_TSYNC_ROLE, KIND_TSYNC_SNAPSHOT,
};
use citadel_wire::tsync::{HelloParams, Rewind, RoleChange, Snapshot, TransformCodec, TsyncAck};
use citadel_wire::{Envelope, WireBody, decode_framed};

/// The places of these tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Zone {
    Lobby,
    Arena,
}

/// A config with the default HELLO (60 Hz simulation, 20 Hz snapshots).
pub fn config() -> ActorConfig {
    ActorConfig {
        hello: HelloParams::default(),
        budget: 0,
        interest: None,
        predicted_archetypes: Vec::new(),
        input_max_speed: citadel_netcode::input::DEFAULT_MAX_SPEED,
        input_max_dt: citadel_netcode::input::DEFAULT_MAX_DT,
        rewind_history_ticks: 0,
        rewind: citadel_netcode::rewind::RewindParams::default(),
    }
}

/// A perfect link with a one-way delay.
pub fn clean(latency_ms: f64) -> LinkConfig {
    LinkConfig {
        latency_ms,
        jitter_ms: 0.0,
        loss: 0.0,
        duplicate: 0.0,
    }
}

pub fn at(x: f32, y: f32) -> NaTransform {
    NaTransform {
        position: [x, y, 0.0],
        ..NaTransform::IDENTITY
    }
}

/// What one simulated client received and holds.
pub struct Peer {
    reliable: SimLink,
    datagrams: SimLink,
    up: SimLink,
    codec: TransformCodec,
    /// Every envelope received, in arrival order.
    pub log: Vec<Envelope>,
    /// Snapshot reconstruction (acks go back over `up`).
    pub receiver: SnapshotReceiver,
    /// Actors spawned (17/18) and not despawned (19).
    pub known: BTreeSet<u32>,
    /// `server_tick` of every applied snapshot, in order.
    pub ticks: Vec<u32>,
    /// Applied snapshots not yet taken by [`Peer::take_applied`].
    applied: Vec<Applied>,
}

impl Peer {
    fn new(link: LinkConfig, reliable_ms: f64, seed: u64) -> Peer {
        let codec = HelloParams::default()
            .codec()
            .expect("the default codec is valid");
        Peer {
            reliable: SimLink::new(clean(reliable_ms), seed),
            datagrams: SimLink::new(link, seed.wrapping_mul(31)),
            up: SimLink::new(link, seed.wrapping_mul(77)),
            codec,
            log: Vec::new(),
            receiver: SnapshotReceiver::new(codec),
            known: BTreeSet::new(),
            ticks: Vec::new(),
            applied: Vec::new(),
        }
    }

    /// The snapshots applied since the last call, in order.
    pub fn take_applied(&mut self) -> Vec<Applied> {
        std::mem::take(&mut self.applied)
    }

    fn receive(&mut self, now_ms: f64, packet: &[u8]) {
        let mut buf = BytesMut::from(packet);
        let envelope = match decode_framed(&mut buf) {
            Ok(Some(envelope)) if buf.is_empty() => envelope,
            other => panic!("a packet is exactly one framed envelope: {other:?}"),
        };
        match envelope.kind {
            KIND_TSYNC_SNAPSHOT => {
                if let Ok(applied) = self.receiver.handle_snapshot(&envelope.body) {
                    self.ticks.push(applied.server_tick);
                    self.applied.push(applied);
                    if let Some(ack) = self.receiver.poll_ack() {
                        self.up
                            .send(now_ms, ack.to_envelope().encode_framed().to_vec());
                    }
                }
            }
            KIND_NA_SPAWN => {
                let spawn = NaSpawn::decode(&envelope.body).expect("spawn decodes");
                self.known.insert(spawn.object_id);
            }
            KIND_NA_SPAWN_BATCH => {
                let batch = NaSpawnBatch::decode(&envelope.body).expect("batch decodes");
                self.known.extend(batch.spawns.iter().map(|s| s.object_id));
            }
            KIND_NA_DESPAWN => {
                let despawn = NaDespawn::decode(&envelope.body).expect("despawn decodes");
                self.known.remove(&despawn.object_id);
            }
            KIND_TSYNC_HELLO => {
                HelloParams::decode(&envelope.body).expect("hello decodes");
            }
            KIND_TSYNC_ROLE => {
                RoleChange::decode(&envelope.body).expect("role decodes");
            }
            KIND_TSYNC_REWIND => {
                Rewind::decode(&envelope.body).expect("fire result decodes");
            }
            kind => panic!("unexpected kind {kind}"),
        }
        self.log.push(envelope);
    }

    /// The reliable envelopes (everything but snapshots) received since
    /// the log was last taken, and empties it.
    pub fn take_reliable(&mut self) -> Vec<Envelope> {
        std::mem::take(&mut self.log)
            .into_iter()
            .filter(|e| e.kind != KIND_TSYNC_SNAPSHOT)
            .collect()
    }

    /// The kinds of [`Peer::take_reliable`].
    pub fn take_kinds(&mut self) -> Vec<u16> {
        self.take_reliable().iter().map(|e| e.kind).collect()
    }

    /// Everything received since the log was last taken.
    pub fn take_log(&mut self) -> Vec<Envelope> {
        std::mem::take(&mut self.log)
    }

    /// ROLE frames in the log, in order.
    pub fn roles(&self) -> Vec<RoleChange> {
        self.log
            .iter()
            .filter(|e| e.kind == KIND_TSYNC_ROLE)
            .map(|e| RoleChange::decode(&e.body).expect("role decodes"))
            .collect()
    }

    /// Fire results (kind 12) in the log, in order.
    pub fn rewinds(&self) -> Vec<Rewind> {
        self.log
            .iter()
            .filter(|e| e.kind == KIND_TSYNC_REWIND)
            .map(|e| Rewind::decode(&e.body).expect("fire result decodes"))
            .collect()
    }

    /// Snapshots in the log, decoded.
    pub fn snapshots(&self) -> Vec<Snapshot> {
        self.log
            .iter()
            .filter(|e| e.kind == KIND_TSYNC_SNAPSHOT)
            .map(|e| Snapshot::decode(&e.body, &self.codec).expect("snapshot decodes"))
            .collect()
    }

    /// Where the reconstructed snapshot state holds `object_id`.
    pub fn position(&self, object_id: u32) -> Option<[f32; 3]> {
        self.receiver
            .latest()
            .and_then(|s| s.get(&object_id))
            .map(|v| v.position)
    }
}

/// The server, its clients and the clock.
pub struct Stage {
    pub server: ActorServer<Zone>,
    pub now: Tick,
    link: LinkConfig,
    reliable_ms: f64,
    peers: BTreeMap<u64, Peer>,
}

impl Stage {
    /// A stage whose snapshots and acks cross `link`, and whose reliable
    /// messages take `link.latency_ms` without loss.
    pub fn new(config: ActorConfig, link: LinkConfig) -> Stage {
        Stage {
            server: ActorServer::new(config).expect("valid config"),
            now: Tick(0),
            link,
            reliable_ms: link.latency_ms,
            peers: BTreeMap::new(),
        }
    }

    /// [`Stage::new`] with these participants opted in, in order.
    pub fn with_clients(config: ActorConfig, link: LinkConfig, clients: &[(u64, Zone)]) -> Stage {
        let mut stage = Stage::new(config, link);
        for &(participant_id, zone) in clients {
            stage.hello(participant_id, zone);
        }
        stage
    }

    /// The stage's time in milliseconds.
    pub fn ms(&self) -> f64 {
        let hz = f64::from(self.server.config().hello.sim_rate_hz);
        self.now.0 as f64 * 1_000.0 / hz
    }

    pub fn peer(&mut self, participant_id: u64) -> &mut Peer {
        self.peers
            .get_mut(&participant_id)
            .expect("a participant that sent HELLO")
    }

    /// Hands every queued output to its recipients' links.
    pub fn route(&mut self) {
        let now_ms = self.ms();
        while let Some(output) = self.server.poll_output() {
            let delivery = output.message.delivery();
            let bytes = output.message.to_envelope().encode_framed();
            for pid in output.to.participants() {
                let peer = self
                    .peers
                    .get_mut(pid)
                    .unwrap_or_else(|| panic!("output to unknown participant {pid}"));
                match delivery {
                    Delivery::Reliable => peer.reliable.send(now_ms, bytes.to_vec()),
                    Delivery::Unreliable => peer.datagrams.send(now_ms, bytes.to_vec()),
                }
            }
        }
    }

    /// Delivers what has arrived by now, both ways.
    fn deliver(&mut self) {
        let now_ms = self.ms();
        let mut acks = Vec::new();
        for (pid, peer) in &mut self.peers {
            for packet in peer.reliable.poll(now_ms) {
                peer.receive(now_ms, &packet);
            }
            for packet in peer.datagrams.poll(now_ms) {
                peer.receive(now_ms, &packet);
            }
            for packet in peer.up.poll(now_ms) {
                let mut buf = BytesMut::from(&packet[..]);
                let Ok(Some(envelope)) = decode_framed(&mut buf) else {
                    panic!("acks are framed envelopes");
                };
                assert_eq!(envelope.kind, KIND_TSYNC_ACK);
                acks.push((*pid, TsyncAck::decode(&envelope.body).expect("ack decodes")));
            }
        }
        for (pid, ack) in acks {
            self.server
                .handle_ack(pid, &ack, self.now)
                .expect("an opted-in client's ack");
        }
        self.route();
    }

    /// One simulation step, then every arrival up to the new time.
    pub fn step(&mut self) {
        self.now = self.now.next();
        self.server.handle_tick(self.now);
        self.route();
        self.deliver();
    }

    /// `ticks` steps.
    pub fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step();
        }
    }

    /// Steps until reliable messages sent now have arrived.
    pub fn settle(&mut self) {
        let hz = f64::from(self.server.config().hello.sim_rate_hz);
        let ticks = (self.reliable_ms * hz / 1_000.0).ceil() as u64 + 1;
        self.run(ticks);
    }

    /// Kind 7 from `participant_id` in `zone` (a new client on first use).
    pub fn hello(&mut self, participant_id: u64, zone: Zone) {
        let (link, reliable_ms) = (self.link, self.reliable_ms);
        self.peers
            .entry(participant_id)
            .or_insert_with(|| Peer::new(link, reliable_ms, participant_id * 1_000 + 7));
        self.server.handle_hello(participant_id, zone, self.now);
        self.route();
    }

    /// One input to the server at the current tick, then its outputs routed.
    pub fn apply<R>(&mut self, input: impl FnOnce(&mut ActorServer<Zone>, Tick) -> R) -> R {
        let result = input(&mut self.server, self.now);
        self.route();
        result
    }

    /// Kind 9 from `participant_id` (no piggybacked ack) at the current tick.
    pub fn input(
        &mut self,
        participant_id: u64,
        frames: Vec<citadel_wire::tsync::InputFrame>,
    ) -> citadel_netcode::actors::InputOutcome {
        let bundle = citadel_wire::tsync::InputBundle {
            acked_snapshot_id: 0,
            last_seen_snapshot_id: 0,
            frames,
        };
        self.apply(|server, now| server.handle_input(participant_id, &bundle, now))
    }

    /// A server-owned actor from game logic.
    pub fn npc(&mut self, spawn: NpcSpawn<Zone>) -> Option<u32> {
        self.apply(|server, now| server.handle_npc_spawn(spawn, now))
    }

    /// Kind 16.
    pub fn presence(
        &mut self,
        participant_id: u64,
        archetype: u16,
        transform: NaTransform,
    ) -> Result<u32, Refusal> {
        let presence = NaPresence {
            archetype_id: archetype,
            transform,
        };
        self.apply(|server, now| server.handle_presence(participant_id, &presence, now))
    }

    /// Kind 20.
    pub fn state(
        &mut self,
        participant_id: u64,
        object_id: u32,
        transform: NaTransform,
    ) -> Result<(), Refusal> {
        let state = NaState {
            object_id,
            transform,
        };
        self.apply(|server, now| server.handle_state(participant_id, &state, now))
    }

    /// The participant changed place.
    pub fn place_change(&mut self, participant_id: u64, zone: Zone) {
        self.apply(|server, now| server.handle_place_change(participant_id, zone, now));
    }

    /// The participant left; its client is gone with it.
    pub fn disconnect(&mut self, participant_id: u64) {
        self.server.handle_disconnect(participant_id, self.now);
        self.peers.remove(&participant_id);
        self.route();
    }
}
