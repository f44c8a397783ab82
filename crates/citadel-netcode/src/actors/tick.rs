//! One simulation step and, on send ticks, every client's snapshot
//! (§3.3-3.5, §5).
//!
//! Phases, in order: (1) patrols walk; (2) every world steps (integrating
//! only server-simulated objects); (3) the per-tick recording point:
//! rewind history of hit-eligible objects is written here (`fire.rs`), after the step
//! and before the latch, so a ring entry at tick T is what the frame of T
//! shows; (4) on a send tick with at least one client: each world is
//! latched once into a quantized [`Frame`] and, with AOI on, indexed once
//! ([`FrameIndex`]); every client's sender reads the frames of its place
//! and of the global world, its interest transitions go out as ROLE
//! frames first, then its snapshot.

use citadel_wire::tsync::TransformCodec;

use super::{ActorServer, Audience, Message, Output, PlaceKey, Tick, WorldKey};
use crate::frame::Frame;
use crate::interest::FrameIndex;
use crate::world::World;

/// One world's latched frame and, with AOI on, its broad-phase index;
/// built once per send tick and read by every client of that world.
#[derive(Debug, Default)]
struct Latched {
    frame: Frame,
    index: Option<FrameIndex>,
}

impl Latched {
    fn of(world: &World, codec: &TransformCodec, cell: Option<f32>) -> Latched {
        let frame = Frame::latch(world, codec);
        let index = cell.map(|c| FrameIndex::build(&frame.objects, c));
        Latched { frame, index }
    }

    fn empty(cell: Option<f32>) -> Latched {
        Latched {
            frame: Frame::default(),
            index: cell.map(|c| FrameIndex::build(&[], c)),
        }
    }
}

impl<P: PlaceKey> ActorServer<P> {
    /// Whether a tick sends snapshots: every `sim_hz / send_rate_hz` ticks.
    pub fn is_send_tick(&self, tick: Tick) -> bool {
        let hello = &self.config.hello;
        let interval = u64::from((hello.sim_rate_hz / hello.send_rate_hz.max(1)).max(1));
        tick.0.is_multiple_of(interval)
    }

    /// One simulation step, `now` being the tick it completes; on send
    /// ticks every client's snapshot is queued.
    pub fn handle_tick(&mut self, now: Tick) {
        self.advance(now);
        let dt = 1.0 / f32::from(self.config.hello.sim_rate_hz.max(1));
        self.step_patrols(dt);
        for world in self.worlds.values_mut() {
            world.handle_sim_tick();
        }
        self.record_history(now);
        if self.is_send_tick(now) && !self.clients.is_empty() {
            self.queue_snapshots();
        }
    }

    /// Tick phase 4: latch and index each world once, then poll every
    /// client's sender against the frames it may see.
    fn queue_snapshots(&mut self) {
        let cell = self.config.interest.map(|i| i.cell_size);
        let codec = self.codec;
        let send_rate = self.config.hello.send_rate_hz;
        let ActorServer {
            worlds,
            clients,
            presences,
            outputs,
            ..
        } = self;
        let latched: std::collections::HashMap<WorldKey<P>, Latched> = worlds
            .iter()
            .map(|(key, world)| (*key, Latched::of(world, &codec, cell)))
            .collect();
        let empty = Latched::empty(cell);
        let global = latched.get(&WorldKey::Global).unwrap_or(&empty);
        for (&pid, client) in clients.iter_mut() {
            let place = latched
                .get(&WorldKey::Place(client.place))
                .unwrap_or(&empty);
            let viewer = presences
                .get(&pid)
                .and_then(|p| worlds.get(&WorldKey::Place(p.place))?.get(p.object_id))
                .map(|o| o.transform.position);
            let frames = [&place.frame, &global.frame];
            let indexes = match (&place.index, &global.index) {
                (Some(a), Some(b)) => Some([a, b]),
                _ => None,
            };
            let Some(out) = client.sender.poll_snapshot(
                &frames,
                indexes.as_ref().map(|x| &x[..]),
                viewer,
                send_rate,
            ) else {
                continue;
            };
            for role in out.roles {
                outputs.push_back(Output {
                    to: Audience::One(pid),
                    message: Message::Role(role),
                });
            }
            if !out.body.is_empty() {
                outputs.push_back(Output {
                    to: Audience::One(pid),
                    message: Message::Snapshot(out.body),
                });
            }
        }
    }
}
