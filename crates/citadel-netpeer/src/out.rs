//! The authority's output: addressed, framed envelopes, in order.
//!
//! What it is: the queue behind `Authority::poll_output`. The core frames
//! each distinct bunch once, when it encodes it, and queues a shared
//! reference for each receiver. With packing on ([`OutQueue::set_packing`],
//! what the node's driver uses), consecutive small envelopes of one kind
//! for one receiver are instead copied one after another into a shared
//! buffer and leave as one [`Outgoing`] holding several envelopes: a
//! receiver's share of a tick (some 570 deltas of about 20 bytes at 200
//! receivers of the random-spread bench) becomes one queue entry here and
//! one in the connection's lane. Copying 20 bytes costs less than sharing
//! them by reference per (bunch, receiver): an atomic increment and, after
//! the write, an atomic decrement on a line long gone from the cache, plus
//! a queue entry pushed and popped at every stage. Envelopes of
//! [`SHARE_FROM`] bytes or more are still shared.
//!
//! What it is not: a bound. It holds what one call produced until the
//! driver drains it (`Authority::tick_draining` drains after each
//! receiver); the lane room the driver sets bounds what a tick produces.
//!
//! Call order: [`OutQueue::push`] as envelopes are produced;
//! [`OutQueue::pop`] until `None` (it closes the burst being packed first).

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use citadel_wire::protocol::LENGTH_PREFIX_BYTES;
use citadel_wire::{KIND_BYTES, framed_len};

use crate::server::ConnId;

/// Bytes before an envelope's body in its framed form: the length prefix
/// and the kind.
pub(crate) const FRAME_HEADER: usize = LENGTH_PREFIX_BYTES + KIND_BYTES;

/// Envelopes at least this long are queued as they are (shared with the
/// bunch's other receivers), not copied into a packed burst.
pub const SHARE_FROM: usize = 512;

/// One or more addressed envelopes, already framed.
///
/// Without packing, `frame` is one framed envelope, shared by every
/// receiver of the same bunch. With packing, it may hold `envelopes`
/// framed envelopes of `kind` back to back: a driver hands `frame` to its
/// transport as is either way.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// Recipient.
    pub conn: ConnId,
    /// Envelope kind (13, or 15 for a schema table).
    pub kind: u16,
    /// Framed envelopes: length prefix, kind, body (realtime-wire §1),
    /// `envelopes` times.
    pub frame: Bytes,
    /// How many envelopes `frame` holds (1 without packing).
    pub envelopes: usize,
}

impl Outgoing {
    /// The body of the first envelope (without packing, the only one).
    pub fn body(&self) -> &[u8] {
        self.frame
            .get(FRAME_HEADER..self.first_end())
            .unwrap_or_default()
    }

    /// [`Outgoing::body`] as shared `Bytes` (a view into the frame).
    pub fn body_bytes(&self) -> Bytes {
        let end = self.first_end();
        self.frame.slice(FRAME_HEADER.min(end)..end)
    }

    /// Where the first framed envelope ends.
    fn first_end(&self) -> usize {
        framed_len(&self.frame).map_or(self.frame.len(), |n| n.min(self.frame.len()))
    }
}

/// The burst being packed.
#[derive(Debug)]
struct Packing {
    /// A burst holds at most this many bytes.
    max_bytes: usize,
    buf: BytesMut,
    conn: ConnId,
    kind: u16,
    envelopes: usize,
}

/// The output queue (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    queue: VecDeque<Outgoing>,
    packing: Option<Packing>,
}

impl OutQueue {
    /// Packs consecutive small envelopes for one receiver into bursts of
    /// at most `max_bytes` (`None`: one envelope per [`Outgoing`]).
    pub(crate) fn set_packing(&mut self, max_bytes: Option<usize>) {
        self.close_burst();
        self.packing = max_bytes.map(|max_bytes| Packing {
            max_bytes,
            buf: BytesMut::new(),
            conn: 0,
            kind: 0,
            envelopes: 0,
        });
    }

    /// Queues `frame` (one framed envelope of `kind`) for `conn`.
    pub(crate) fn push(&mut self, conn: ConnId, kind: u16, frame: &Bytes) {
        let Some(p) = self
            .packing
            .as_mut()
            .filter(|p| frame.len() < SHARE_FROM.min(p.max_bytes))
        else {
            self.close_burst();
            self.queue.push_back(Outgoing {
                conn,
                kind,
                frame: frame.clone(),
                envelopes: 1,
            });
            return;
        };
        if p.envelopes > 0
            && (p.conn != conn || p.kind != kind || p.buf.len() + frame.len() > p.max_bytes)
        {
            self.close_burst();
        }
        let Some(p) = self.packing.as_mut() else {
            return;
        };
        if p.buf.capacity() - p.buf.len() < frame.len() {
            // One allocation serves several bursts: each is split off it.
            p.buf.reserve(p.max_bytes);
        }
        p.buf.extend_from_slice(frame);
        p.envelopes += 1;
        p.conn = conn;
        p.kind = kind;
    }

    /// The next output, in order.
    pub(crate) fn pop(&mut self) -> Option<Outgoing> {
        if self.queue.is_empty() {
            self.close_burst();
        }
        self.queue.pop_front()
    }

    /// Queues the burst being packed, if any.
    fn close_burst(&mut self) {
        let Some(p) = self.packing.as_mut().filter(|p| p.envelopes > 0) else {
            return;
        };
        let out = Outgoing {
            conn: p.conn,
            kind: p.kind,
            frame: p.buf.split().freeze(),
            envelopes: std::mem::take(&mut p.envelopes),
        };
        self.queue.push_back(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use citadel_wire::Envelope;

    fn frame(kind: u16, len: usize) -> Bytes {
        Envelope::new(kind, vec![kind as u8; len]).encode_framed()
    }

    fn drain(q: &mut OutQueue) -> Vec<Outgoing> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    /// Splits outputs back into (conn, kind, frame) per envelope.
    fn unpack(outs: &[Outgoing]) -> Vec<(ConnId, u16, Bytes)> {
        let mut all = Vec::new();
        for o in outs {
            let mut rest = o.frame.clone();
            let mut n = 0;
            while let Some(len) = framed_len(&rest) {
                all.push((o.conn, o.kind, rest.split_to(len)));
                n += 1;
            }
            assert!(rest.is_empty());
            assert_eq!(n, o.envelopes);
        }
        all
    }

    #[test]
    fn without_packing_each_envelope_is_its_own_shared_output() {
        let mut q = OutQueue::default();
        let f = frame(13, 10);
        q.push(1, 13, &f);
        q.push(2, 13, &f);
        let outs = drain(&mut q);
        assert_eq!(outs.len(), 2);
        assert!(
            outs.iter()
                .all(|o| o.envelopes == 1 && o.frame.as_ptr() == f.as_ptr())
        );
        assert_eq!(outs[0].body(), &[13u8; 10][..]);
        assert_eq!(&outs[1].body_bytes()[..], &[13u8; 10][..]);
    }

    #[test]
    fn packing_keeps_order_and_cuts_at_receiver_kind_size_and_large_envelopes() {
        let mut q = OutQueue::default();
        q.set_packing(Some(1_000));
        let small = frame(13, 94); // 100 framed bytes
        let large = frame(13, SHARE_FROM);
        let table = frame(15, 4);
        let mut input: Vec<(ConnId, u16, Bytes)> = Vec::new();
        input.extend(std::iter::repeat_n((1, 13, small.clone()), 12)); // 10 + 2
        input.push((1, 15, table.clone()));
        input.push((1, 13, small.clone()));
        input.push((1, 13, large.clone()));
        input.push((1, 13, small.clone()));
        input.push((2, 13, small.clone()));
        for (c, k, f) in &input {
            q.push(*c, *k, f);
        }
        let outs = drain(&mut q);
        let shape: Vec<(ConnId, u16, usize, usize)> = outs
            .iter()
            .map(|o| (o.conn, o.kind, o.envelopes, o.frame.len()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (1, 13, 10, 1_000),
                (1, 13, 2, 200),
                (1, 15, 1, table.len()),
                (1, 13, 1, 100),
                (1, 13, 1, large.len()),
                (1, 13, 1, 100),
                (2, 13, 1, 100),
            ]
        );
        assert_eq!(outs[4].frame.as_ptr(), large.as_ptr(), "shared, not copied");
        assert_eq!(unpack(&outs), input);
        assert_eq!(outs[0].body(), &small[FRAME_HEADER..], "the first body");
        assert!(q.pop().is_none());
    }

    #[test]
    fn a_burst_is_closed_when_drained_and_turning_packing_off_keeps_it() {
        let mut q = OutQueue::default();
        q.set_packing(Some(1_000));
        let f = frame(13, 4);
        q.push(1, 13, &f);
        q.push(1, 13, &f);
        let first = q.pop().map(|o| o.envelopes);
        assert_eq!(first, Some(2));
        q.push(1, 13, &f);
        q.set_packing(None);
        q.push(1, 13, &f);
        let rest: Vec<usize> = drain(&mut q).iter().map(|o| o.envelopes).collect();
        assert_eq!(rest, vec![1, 1]);
    }
}
