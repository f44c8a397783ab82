//! One client's snapshot builder: baselines, deltas, priority, datagram
//! budget, acknowledgements, interest transitions.
//!
//! Call order: [`SnapshotSender::poll_snapshot`] at the client's send rate
//! with the frames it may see; feed acknowledgements (kind 10, or the ack
//! inside kind 9) to [`SnapshotSender::handle_ack`]; on a repeated HELLO
//! call [`SnapshotSender::reset`] so the next snapshot is a full baseline.
//!
//! Rules (realtime-behaviour §3.4-3.5): the confirmed base is the newest
//! snapshot the client acknowledged that is still held; entries are full
//! when the base lacks the object (or holds another `gen_epoch`), else only
//! the fields whose quantized value changed; unchanged objects are omitted
//! except the client's own predicted object, which always carries
//! `last_input_seq`. When more changed than fits 1 200 bytes (or the object
//! budget), full entries go first, then the highest accumulated priority
//! (distance and staleness); an object left out keeps accumulating, so none
//! starves. Each ring entry is exactly what the client reconstructs.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use citadel_wire::ack::AckWindow;
use citadel_wire::quat::PackedQuat;
use citadel_wire::tsync::{
    QuantizedUpdate, Role, RoleChange, RoleEvent, SNAPSHOT_HEADER_BITS, SnapshotHeader,
    TransformCodec, encode_quantized,
};

use crate::MAX_SNAPSHOT_DATAGRAM;
use crate::frame::{Frame, FrameObject};
use crate::interest::{FrameIndex, Interest, InterestConfig};

/// Snapshots a client may have outstanding (unacknowledged) at once.
pub const RING_CAPACITY: usize = 64;

/// Per-client limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SenderConfig {
    /// Most object entries per snapshot (0 = only the datagram bounds it).
    pub max_objects: usize,
    /// Datagram size, kind included.
    pub max_datagram: usize,
    /// Area of interest (None = everything in the frames).
    pub interest: Option<InterestConfig>,
}

impl Default for SenderConfig {
    fn default() -> Self {
        SenderConfig {
            max_objects: 0,
            max_datagram: MAX_SNAPSHOT_DATAGRAM,
            interest: None,
        }
    }
}

/// What the client holds for one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    gen_epoch: u16,
    position: [u64; 3],
    rotation: PackedQuat,
    velocity: Option<[u64; 3]>,
}

type State = BTreeMap<u32, Held>;

/// One snapshot to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// Its id.
    pub snapshot_id: u32,
    /// Its base (0 = full).
    pub base_snapshot_id: u32,
    /// Kind-8 body (send as an unreliable datagram).
    pub body: Vec<u8>,
    /// Role transitions to send reliably BEFORE the snapshot.
    pub roles: Vec<RoleChange>,
    /// Object entries included.
    pub updates: usize,
    /// Removals included.
    pub removed: usize,
    /// Changed objects left for a later snapshot.
    pub deferred: usize,
}

/// A client's snapshot state.
#[derive(Debug, Clone)]
pub struct SnapshotSender {
    participant_id: u64,
    codec: TransformCodec,
    config: SenderConfig,
    confirmed: u32,
    confirmed_state: Arc<State>,
    ring: VecDeque<(u32, Arc<State>)>,
    next_id: u32,
    accumulated: HashMap<u32, f32>,
    interest: Option<Interest>,
    /// The highest `server_tick` sent.
    last_tick: u32,
}

struct Candidate {
    update: QuantizedUpdate,
    full: bool,
    priority: f32,
    held: Held,
    bits: usize,
}

impl SnapshotSender {
    /// A sender for `participant_id` using the negotiated codec.
    pub fn new(participant_id: u64, codec: TransformCodec, config: SenderConfig) -> Self {
        SnapshotSender {
            participant_id,
            codec,
            config,
            confirmed: 0,
            confirmed_state: Arc::new(State::new()),
            ring: VecDeque::new(),
            next_id: 1,
            accumulated: HashMap::new(),
            interest: config.interest.map(Interest::new),
            last_tick: 0,
        }
    }

    /// The confirmed base (0 = none).
    pub fn confirmed_base(&self) -> u32 {
        self.confirmed
    }

    /// Snapshots sent and not yet confirmed.
    pub fn outstanding(&self) -> usize {
        self.ring.len()
    }

    /// Forgets every baseline (repeated HELLO): the next snapshot is full.
    pub fn reset(&mut self) {
        self.confirmed = 0;
        self.confirmed_state = Arc::new(State::new());
        self.ring.clear();
        self.accumulated.clear();
        if let Some(i) = &mut self.interest {
            i.reset();
        }
    }

    /// Applies an acknowledgement window: the newest acknowledged snapshot
    /// still held and newer than the confirmed base becomes the base.
    /// Unknown, stale or forged ids change nothing.
    pub fn handle_ack(&mut self, window: &AckWindow) {
        let Some(pos) = self
            .ring
            .iter()
            .rposition(|(id, _)| window.contains(u64::from(*id)))
        else {
            return;
        };
        if let Some((id, state)) = self.ring.get(pos).cloned() {
            self.confirmed = id;
            self.confirmed_state = state;
            self.ring.drain(..=pos);
        }
    }

    fn is_own(&self, o: &FrameObject) -> bool {
        o.owner == self.participant_id && o.owner != 0 && o.role == Role::OwnerPredicted
    }

    /// Builds the next snapshot from the frames this client may see, or
    /// `None` if nothing changed. `viewer` is the client's position for
    /// interest and priority; `indexes` (one per frame, same order) give the
    /// AOI broad phase: with them, a client's cost grows with the objects
    /// near it, not with the frame. A frame without an index is scanned
    /// whole. The snapshot's `server_tick` never goes below one already
    /// sent, even when every frame is empty (tick 0).
    pub fn poll_snapshot(
        &mut self,
        frames: &[&Frame],
        indexes: Option<&[&FrameIndex]>,
        viewer: Option<[f32; 3]>,
        send_rate_hz: u8,
    ) -> Option<Outgoing> {
        let tick = frames
            .iter()
            .map(|f| f.tick)
            .max()
            .unwrap_or(0)
            .max(self.last_tick);
        let participant_id = self.participant_id;
        // 1. Relevance.
        let mut relevant: BTreeMap<u32, &FrameObject> = BTreeMap::new();
        let mut roles = Vec::new();
        match (&mut self.interest, viewer) {
            (Some(interest), Some(at)) => {
                let mut candidates: Vec<&FrameObject> = Vec::new();
                let mut near = Vec::new();
                for (i, f) in frames.iter().enumerate() {
                    match indexes.and_then(|x| x.get(i)) {
                        Some(index) => {
                            near.clear();
                            index.candidates(at, interest.reach(), participant_id, &mut near);
                            candidates.extend(near.iter().filter_map(|&j| f.objects.get(j)));
                        }
                        None => candidates.extend(f.objects.iter()),
                    }
                }
                let pin = move |o: &FrameObject| o.owner == participant_id && o.owner != 0;
                let change = interest.update(&candidates, at, &pin);
                let entered: BTreeSet<u32> = change.entered.into_iter().collect();
                let subscribed = interest.subscribed();
                for o in candidates {
                    if subscribed.contains(&o.id) {
                        relevant.insert(o.id, o);
                    }
                }
                // In id order, whatever order the broad phase found them in.
                for (id, o) in &relevant {
                    if entered.contains(id) {
                        roles.push(role_change(o, participant_id, RoleEvent::RelevancyEnter));
                    }
                }
                for id in change.exited {
                    if let Some(held) = self.confirmed_state.get(&id) {
                        roles.push(RoleChange {
                            object_id: id,
                            role: Role::RemoteInterpolated,
                            owner: 0,
                            ownership_epoch: 0,
                            gen_epoch: held.gen_epoch,
                            event: RoleEvent::RelevancyExit,
                        });
                    }
                }
            }
            _ => {
                for f in frames {
                    for o in &f.objects {
                        relevant.insert(o.id, o);
                    }
                }
            }
        }
        // 2. Removals against the base.
        let base = self.confirmed_state.clone();
        let removed: Vec<u32> = base
            .keys()
            .filter(|id| !relevant.contains_key(id))
            .copied()
            .collect();
        // 3. Candidates.
        let mut candidates = Vec::new();
        let mut cold: Vec<u32> = Vec::new();
        for (&id, o) in &relevant {
            let own = self.is_own(o);
            let seq = own.then_some(o.last_input_seq);
            let now = Held {
                gen_epoch: o.gen_epoch,
                position: o.position_codes,
                rotation: o.rotation,
                velocity: o.velocity_codes,
            };
            let (update, full) = match base.get(&id) {
                Some(held) if held.gen_epoch == o.gen_epoch => {
                    let update = QuantizedUpdate {
                        object_id: id,
                        gen_epoch: o.gen_epoch,
                        position: (held.position != now.position).then_some(now.position),
                        rotation: (held.rotation != now.rotation).then_some(now.rotation),
                        velocity: match (held.velocity, now.velocity) {
                            (Some(a), Some(b)) if a != b => Some(b),
                            (None, Some(b)) => Some(b),
                            _ => None,
                        },
                        last_input_seq: seq,
                    };
                    if update.position.is_none()
                        && update.rotation.is_none()
                        && update.velocity.is_none()
                        && seq.is_none()
                    {
                        cold.push(id);
                        continue;
                    }
                    (update, false)
                }
                _ => (
                    QuantizedUpdate {
                        object_id: id,
                        gen_epoch: o.gen_epoch,
                        position: Some(now.position),
                        rotation: Some(now.rotation),
                        velocity: now.velocity,
                        last_input_seq: seq,
                    },
                    true,
                ),
            };
            let distance = viewer.map_or(0.0, |v| {
                let d = [
                    o.position[0] - v[0],
                    o.position[1] - v[1],
                    o.position[2] - v[2],
                ];
                (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt()
            });
            let gain = if own {
                4.0
            } else {
                1.0 + 1.0 / (1.0 + distance / 1_000.0)
            };
            let acc = self.accumulated.entry(id).or_insert(0.0);
            *acc += gain;
            let bits = update.bit_len(&self.codec);
            candidates.push(Candidate {
                update,
                full,
                priority: *acc,
                held: now,
                bits,
            });
        }
        for id in cold {
            self.accumulated.remove(&id);
        }
        self.accumulated.retain(|id, _| relevant.contains_key(id));
        if candidates.is_empty() && removed.is_empty() {
            return (!roles.is_empty()).then(|| Outgoing {
                snapshot_id: 0,
                base_snapshot_id: self.confirmed,
                body: Vec::new(),
                roles,
                updates: 0,
                removed: 0,
                deferred: 0,
            });
        }
        // 4. Order and fit.
        candidates.sort_by(|a, b| {
            b.full
                .cmp(&a.full)
                .then(b.priority.total_cmp(&a.priority))
                .then(a.update.object_id.cmp(&b.update.object_id))
        });
        let budget_bits = self.config.max_datagram.saturating_sub(2) * 8;
        let mut bits = SNAPSHOT_HEADER_BITS;
        let mut removed_in = Vec::new();
        for id in removed {
            if bits + 32 > budget_bits / 2 {
                break; // leave room for updates; the rest go next time
            }
            bits += 32;
            removed_in.push(id);
        }
        let max_objects = if self.config.max_objects == 0 {
            usize::MAX
        } else {
            self.config.max_objects
        };
        let mut chosen: Vec<Candidate> = Vec::new();
        let mut deferred = 0;
        for c in candidates {
            if chosen.len() < max_objects && bits + c.bits <= budget_bits {
                bits += c.bits;
                chosen.push(c);
            } else {
                deferred += 1;
            }
        }
        if chosen.is_empty() && removed_in.is_empty() {
            return None;
        }
        chosen.sort_by_key(|c| c.update.object_id);
        // 5. Mint, record exactly what the client will hold, encode.
        let snapshot_id = self.next_id;
        self.next_id = self.next_id.checked_add(1).unwrap_or(1);
        let mut state: State = (*base).clone();
        for id in &removed_in {
            state.remove(id);
        }
        for c in &chosen {
            state.insert(c.update.object_id, c.held);
            self.accumulated.insert(c.update.object_id, 0.0);
        }
        let updates: Vec<QuantizedUpdate> = chosen.iter().map(|c| c.update).collect();
        let header = SnapshotHeader {
            server_tick: tick,
            snapshot_id,
            base_snapshot_id: self.confirmed,
            send_rate_hz,
        };
        let body = encode_quantized(header, &removed_in, &updates, &self.codec).ok()?;
        self.last_tick = tick;
        self.ring.push_back((snapshot_id, Arc::new(state)));
        while self.ring.len() > RING_CAPACITY {
            self.ring.pop_front();
        }
        Some(Outgoing {
            snapshot_id,
            base_snapshot_id: self.confirmed,
            body,
            roles,
            updates: updates.len(),
            removed: removed_in.len(),
            deferred,
        })
    }
}

fn role_change(o: &FrameObject, participant_id: u64, event: RoleEvent) -> RoleChange {
    let role = if o.owner == participant_id && o.owner != 0 && o.role == Role::OwnerPredicted {
        Role::OwnerPredicted
    } else if o.owner == 0 {
        Role::ServerSimulated
    } else {
        Role::RemoteInterpolated
    };
    RoleChange {
        object_id: o.id,
        role,
        owner: o.owner,
        ownership_epoch: o.ownership_epoch,
        gen_epoch: o.gen_epoch,
        event,
    }
}
