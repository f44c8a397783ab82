//! Delivery: the one place that picks the recipients of an outbound frame
//! and pushes it into their connections' lanes.
//!
//! What it is: the [`Router`] trait (to one participant, to every live
//! session of an account, to a place except the sender, to everyone) and
//! [`LocalRouter`], its single-node implementation over this node's
//! connections and the realm's published member lists. Every producer of
//! outbound traffic (relay, Lua `broadcast`/`send`, the realm's room
//! replies, the transform hub, and the services) goes through it. A frame
//! is encoded once by the caller ([`frame`], [`tagged_frame`]) and the same
//! `Bytes` is shared by every recipient.
//!
//! What it is not: it never blocks and never awaits (a lane push is a short
//! mutex), it does not decide membership (the realm does), and it does not
//! write sockets (each connection's writer does). A connection's replies to
//! its own requests (AUTH_RESULT, RPC responses) stay on its own lanes.
//!
//! Call order: [`Router::attach`] when a connection is accepted → any
//! number of deliveries → [`Router::detach`] when it ends. A multi-node
//! router wraps [`LocalRouter`] behind the same trait and forwards what is
//! not local.

mod local;

pub use local::LocalRouter;

impl Fanout {
    fn count(pushed: impl Iterator<Item = bool>) -> Fanout {
        pushed.fold(Fanout::default(), |mut f, ok| {
            if ok {
                f.queued += 1;
            } else {
                f.refused += 1;
            }
            f
        })
    }
}

use bytes::Bytes;
use citadel_wire::Envelope;

use crate::gateway::outbound::Outbound;
use crate::place::Place;

/// Which of a connection's two lanes a frame goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Must arrive, in order; a full lane closes the slow connection.
    Reliable,
    /// A later frame supersedes it; a full lane drops the oldest.
    Unreliable,
    /// Reliable and in order, but offered: past half of the reliable lane
    /// the frame is dropped (reported as not queued, and counted) and the
    /// connection stays open. For producers that can recover a drop
    /// themselves (chat: `resync_required` and history).
    Offered,
}

/// Whom a connection belongs to, as delivery sees it.
#[derive(Debug, Clone)]
pub struct Recipient {
    /// The participant id (unique on this node).
    pub participant_id: u64,
    /// The account of an authenticated connection; `None` for guests.
    pub user_id: Option<String>,
    /// The connection's lanes.
    pub outbound: Outbound,
}

/// What a delivery to several connections did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fanout {
    /// Lanes the frame was queued on.
    pub queued: usize,
    /// Recipients whose lane refused it (closing, or full: a full reliable
    /// lane closes its slow connection).
    pub refused: usize,
}

/// Picks recipients and queues one shared frame for each. Implementations
/// never block; the return values count the lanes the frame was queued on
/// (a closing connection does not count).
pub trait Router: Send + Sync + std::fmt::Debug {
    /// Makes a newly accepted connection reachable.
    fn attach(&self, recipient: Recipient);

    /// Forgets a connection (disconnect); idempotent.
    fn detach(&self, participant_id: u64);

    /// To one participant. False if it is unknown or closing.
    fn to_participant(&self, participant_id: u64, lane: Lane, frame: Bytes) -> bool;

    /// Several framed envelopes, concatenated in order in `packed`
    /// (`envelopes` of them), to one participant's reliable lane. Returns
    /// how many were queued (0 if it is unknown or closing). Same outcome
    /// as one [`Router::to_participant`] per envelope; implementations may
    /// queue the whole burst as one entry (one lookup, one lock, one
    /// wake-up, no per-envelope queue work).
    fn packed_to_participant(&self, participant_id: u64, packed: Bytes, envelopes: usize) -> usize {
        let _ = envelopes;
        split_frames(packed)
            .map(|f| self.to_participant(participant_id, Lane::Reliable, f))
            .filter(|queued| *queued)
            .count()
    }

    /// How many more envelopes one participant's reliable lane can take,
    /// if this router can tell (`None`: unknown or unbounded). Producers
    /// that can wait without loss (NetworkPeer deltas) size their next
    /// burst by it instead of overflowing the lane.
    fn reliable_room(&self, participant_id: u64) -> Option<usize> {
        let _ = participant_id;
        None
    }

    /// To every live connection of one account.
    fn to_account(&self, user_id: &str, lane: Lane, frame: Bytes) -> Fanout;

    /// To every member of `place`, except `except` (the sender).
    fn to_place(&self, place: Place, except: Option<u64>, lane: Lane, frame: Bytes) -> usize;

    /// To every connected participant.
    fn to_everyone(&self, lane: Lane, frame: Bytes) -> usize;
}

/// Queues `frame` on one connection's `lane`. The only lane push outside a
/// connection's replies to itself; used by router implementations.
pub fn push(outbound: &Outbound, lane: Lane, frame: Bytes) -> bool {
    match lane {
        Lane::Reliable => outbound.send_reliable(frame),
        Lane::Unreliable => outbound.send_unreliable(frame),
        Lane::Offered => outbound.offer_reliable(frame),
    }
}

/// The framed envelopes of a packed burst, one by one (each a view into
/// `packed`). Stops at a truncated or malformed frame, which a burst built
/// from framed envelopes never has.
pub fn split_frames(mut packed: Bytes) -> impl Iterator<Item = Bytes> {
    std::iter::from_fn(move || {
        let total = citadel_wire::framed_len(&packed)?;
        (total <= packed.len()).then(|| packed.split_to(total))
    })
}

/// The framed form of `envelope`, encoded once for every recipient.
pub fn frame(envelope: &Envelope) -> Bytes {
    envelope.encode_framed()
}

/// A framed envelope of `kind` whose body is
/// [`citadel_wire::protocol::tag_with_sender`]`(sender, payload)`: how
/// relayed frames carry their origin. Encoded once, in one buffer, by the
/// wire crate.
pub fn tagged_frame(kind: u16, sender: u64, payload: &[u8]) -> Bytes {
    citadel_wire::protocol::framed_with_sender(kind, sender, payload)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use citadel_wire::decode_framed;

    #[test]
    fn tagged_frame_is_the_framed_envelope_of_tag_with_sender() {
        let tagged = citadel_wire::protocol::tag_with_sender(7, b"xy");
        assert_eq!(tagged_frame(2, 7, b"xy"), frame(&Envelope::new(2, tagged)));
    }

    #[test]
    fn tagged_frame_is_a_framed_envelope_with_the_sender_first() {
        let frame = tagged_frame(200, 0x0102_0304_0506_0708, b"hi");
        let mut buf = BytesMut::from(&frame[..]);
        let envelope = decode_framed(&mut buf).unwrap().unwrap();
        assert_eq!(envelope.kind, 200);
        assert_eq!(&envelope.body[..8], &0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(&envelope.body[8..], b"hi");
        assert!(buf.is_empty());
    }

    #[test]
    fn a_packed_burst_splits_back_into_its_frames() {
        let frames: Vec<Bytes> = [(13, &b"abc"[..]), (15, b""), (13, b"x")]
            .iter()
            .map(|(kind, body)| frame(&Envelope::new(*kind, Bytes::copy_from_slice(body))))
            .collect();
        let packed = Bytes::from(frames.concat());
        assert_eq!(split_frames(packed.clone()).collect::<Vec<_>>(), frames);
        // A truncated tail is not a frame.
        let cut = packed.slice(..packed.len() - 1);
        assert_eq!(split_frames(cut).count(), 2);
        assert_eq!(split_frames(Bytes::from_static(&[0, 0])).count(), 0);
        assert_eq!(split_frames(Bytes::new()).count(), 0);
    }
}
