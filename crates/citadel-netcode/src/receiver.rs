//! The client half of snapshots: reconstruction and acknowledgement.
//!
//! Call order: [`SnapshotReceiver::handle_snapshot`] for every kind-8 body
//! (any order, duplicates welcome), then [`SnapshotReceiver::poll_ack`] to
//! get the kind-10 body to send. Rules (realtime-behaviour §4.1): a snapshot
//! not newer than the last applied one, or whose base is not held, is
//! discarded; otherwise state = ring[base] − removed + updates (a delta when
//! the same id and `gen_epoch` exist, else a full entry; a full entry
//! without position or rotation is skipped). The ring keeps 64 states.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use citadel_wire::ack::AckWindow;
use citadel_wire::tsync::{Snapshot, TransformCodec, TsyncAck};

/// Reconstructed states kept for use as bases.
pub const RING_CAPACITY: usize = 64;

/// What the client holds for one object.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectView {
    /// Generation epoch.
    pub gen_epoch: u16,
    /// Position (cm).
    pub position: [f32; 3],
    /// Rotation (x y z w).
    pub rotation: [f32; 4],
    /// Velocity (cm/s), if replicated.
    pub velocity: Option<[f32; 3]>,
}

/// Reconstructed set of objects.
pub type ViewState = BTreeMap<u32, ObjectView>;

/// Why a snapshot was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// It did not decode.
    Malformed,
    /// Not newer than the last applied snapshot.
    Stale,
    /// Its base is not held.
    UnknownBase,
}

/// A snapshot that was applied.
#[derive(Debug, Clone)]
pub struct Applied {
    /// Its id.
    pub snapshot_id: u32,
    /// Server tick it carries.
    pub server_tick: u32,
    /// Current send rate.
    pub send_rate_hz: u8,
    /// The reconstructed state.
    pub state: Arc<ViewState>,
    /// Ids skipped since the previous applied snapshot (0 = none).
    pub gap: u32,
    /// The `last_input_seq` this snapshot carried, per owned object
    /// (object id, sequence), for the owner's reconciliation.
    pub input_acks: Vec<(u32, u32)>,
}

/// A client's reconstruction state.
#[derive(Debug, Clone)]
pub struct SnapshotReceiver {
    codec: TransformCodec,
    ring: VecDeque<(u32, Arc<ViewState>)>,
    last_applied: Option<u32>,
    window: AckWindow,
    ack_pending: bool,
    owner_seq: HashMap<u32, u32>,
}

impl SnapshotReceiver {
    /// A receiver for the codec negotiated by HELLO.
    pub fn new(codec: TransformCodec) -> Self {
        SnapshotReceiver {
            codec,
            ring: VecDeque::new(),
            last_applied: None,
            window: AckWindow::new(),
            ack_pending: false,
            owner_seq: HashMap::new(),
        }
    }

    /// Drops every baseline (after a new HELLO).
    pub fn reset(&mut self, codec: TransformCodec) {
        *self = SnapshotReceiver::new(codec);
    }

    /// The newest reconstructed state.
    pub fn latest(&self) -> Option<&Arc<ViewState>> {
        self.ring.back().map(|(_, s)| s)
    }

    /// Highest `last_input_seq` seen per owned object.
    pub fn owner_ack(&self, object_id: u32) -> Option<u32> {
        self.owner_seq.get(&object_id).copied()
    }

    /// Applies one kind-8 body.
    pub fn handle_snapshot(&mut self, body: &[u8]) -> Result<Applied, Discard> {
        let snap = Snapshot::decode(body, &self.codec).map_err(|_| Discard::Malformed)?;
        if self
            .last_applied
            .is_some_and(|last| snap.snapshot_id <= last)
        {
            return Err(Discard::Stale);
        }
        let mut state = if snap.base_snapshot_id == 0 {
            ViewState::new()
        } else {
            let base = self
                .ring
                .iter()
                .find(|(id, _)| *id == snap.base_snapshot_id)
                .ok_or(Discard::UnknownBase)?;
            (*base.1).clone()
        };
        for id in &snap.removed {
            state.remove(id);
        }
        for u in &snap.updates {
            match state.get_mut(&u.object_id) {
                Some(view) if view.gen_epoch == u.gen_epoch => {
                    if let Some(p) = u.position {
                        view.position = p;
                    }
                    if let Some(r) = u.rotation {
                        view.rotation = r;
                    }
                    if let Some(v) = u.velocity {
                        view.velocity = Some(v);
                    }
                }
                _ => {
                    let (Some(position), Some(rotation)) = (u.position, u.rotation) else {
                        continue; // a full entry must carry position and rotation
                    };
                    state.insert(
                        u.object_id,
                        ObjectView {
                            gen_epoch: u.gen_epoch,
                            position,
                            rotation,
                            velocity: u.velocity,
                        },
                    );
                }
            }
            if let Some(seq) = u.last_input_seq {
                let e = self.owner_seq.entry(u.object_id).or_insert(0);
                *e = (*e).max(seq);
            }
        }
        let gap = self.last_applied.map_or(0, |last| {
            snap.snapshot_id.saturating_sub(last).saturating_sub(1)
        });
        self.last_applied = Some(snap.snapshot_id);
        let state = Arc::new(state);
        self.ring.push_back((snap.snapshot_id, state.clone()));
        while self.ring.len() > RING_CAPACITY {
            self.ring.pop_front();
        }
        self.window.ack(u64::from(snap.snapshot_id));
        self.ack_pending = true;
        Ok(Applied {
            snapshot_id: snap.snapshot_id,
            server_tick: snap.server_tick,
            send_rate_hz: snap.send_rate_hz,
            state,
            gap,
            input_acks: snap
                .updates
                .iter()
                .filter_map(|u| u.last_input_seq.map(|seq| (u.object_id, seq)))
                .collect(),
        })
    }

    /// The acknowledgement to send, once per applied batch.
    pub fn poll_ack(&mut self) -> Option<TsyncAck> {
        if !self.ack_pending {
            return None;
        }
        self.ack_pending = false;
        Some(TsyncAck::from_window(&self.window))
    }
}
