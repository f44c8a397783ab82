//! The acknowledgement window shared by TSYNC_ACK (kind 10) and REP_ACK
//! (kind 14): a `latest` id plus 32 bits of history.
//!
//! Bit k of `history` (bit 0 least significant) means id `latest - 1 - k`
//! was also acknowledged. `latest = 0` means nothing acknowledged and then
//! `history` must be 0. This type is pure bookkeeping; it never allocates.

use crate::error::DecodeError;

/// Width of the history bitmap.
pub const ACK_HISTORY_BITS: u32 = 32;

/// A receiver's record of acknowledged ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct AckWindow {
    latest: u64,
    history: u32,
}

impl AckWindow {
    /// An empty window.
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a window from its wire pair; `latest = 0` with a non-zero
    /// history is malformed.
    pub fn from_wire(latest: u64, history: u32) -> Result<Self, DecodeError> {
        if latest == 0 && history != 0 {
            return Err(DecodeError::InvalidValue("history without a latest id"));
        }
        Ok(AckWindow { latest, history })
    }

    /// Newest acknowledged id (0 = none).
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// The history bitmap relative to [`AckWindow::latest`].
    pub fn history(&self) -> u32 {
        self.history
    }

    /// Records an acknowledgement of `id` (0 is ignored).
    pub fn ack(&mut self, id: u64) {
        if id == 0 {
            return;
        }
        if self.latest == 0 {
            self.latest = id;
            self.history = 0;
            return;
        }
        if id > self.latest {
            let d = id - self.latest;
            self.history = if d < 32 {
                (self.history << d) | (1u32 << (d - 1))
            } else if d == 32 {
                1u32 << 31
            } else {
                0
            };
            self.latest = id;
        } else if id < self.latest {
            let back = self.latest - id;
            if back <= 32 {
                self.history |= 1u32 << (back - 1);
            }
        }
    }

    /// Whether `id` is acknowledged by this window.
    pub fn contains(&self, id: u64) -> bool {
        if id == 0 || self.latest == 0 || id > self.latest {
            return false;
        }
        if id == self.latest {
            return true;
        }
        let back = self.latest - id;
        back <= 32 && self.history & (1u32 << (back - 1)) != 0
    }

    /// Every acknowledged id, newest first.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let latest = self.latest;
        let history = self.history;
        (latest != 0).then_some(latest).into_iter().chain(
            (0..32u64)
                .filter(move |&k| history & (1u32 << k) != 0 && latest > k + 1)
                .map(move |k| latest - 1 - k),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(ids: &[u64]) -> AckWindow {
        let mut w = AckWindow::new();
        for &id in ids {
            w.ack(id);
        }
        w
    }

    #[test]
    fn published_cases() {
        assert_eq!((replay(&[10]).latest(), replay(&[10]).history()), (10, 0));
        assert_eq!(replay(&[10, 8]).history(), 2);
        assert_eq!(replay(&[5, 6]).history(), 1);
        assert_eq!(replay(&[1, 32]).history(), 1 << 30);
        assert_eq!(replay(&[1, 33]).history(), 1 << 31);
        assert_eq!(replay(&[1, 34]).history(), 0);
    }

    #[test]
    fn contains_and_iter_agree() {
        let w = replay(&[3, 7, 5]);
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![7, 5, 3]);
        assert!(w.contains(3) && !w.contains(4) && !w.contains(8));
        let w = replay(&[3, 7, 5, 40, 39]);
        assert_eq!(w.iter().collect::<Vec<_>>(), vec![40, 39]);
        assert!(!w.contains(7) && !w.contains(0));
    }

    #[test]
    fn wire_validation() {
        assert!(AckWindow::from_wire(0, 1).is_err());
        assert!(AckWindow::from_wire(0, 0).is_ok());
    }
}
