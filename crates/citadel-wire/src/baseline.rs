//! Baseline tokens: server-issued, strictly increasing, non-zero `u64` ids
//! (0 means "none / full"), and the per-receiver tracker that advances a
//! baseline only to a token that was issued, is still outstanding, and is
//! newer than the current one (realtime-wire §3.9).
//!
//! The tracker keeps at most `capacity` outstanding tokens; issuing past that
//! forgets the oldest, so a receiver that never acknowledges costs bounded
//! memory.

use std::collections::VecDeque;

use crate::ack::AckWindow;

/// Mints strictly increasing non-zero tokens; refuses after `u64::MAX`.
#[derive(Debug, Clone)]
pub struct TokenAllocator {
    next: Option<u64>,
}

impl Default for TokenAllocator {
    fn default() -> Self {
        TokenAllocator { next: Some(1) }
    }
}

impl TokenAllocator {
    /// Starts at 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next token, or `None` once the space is exhausted (never wraps).
    pub fn issue(&mut self) -> Option<u64> {
        let token = self.next?;
        self.next = token.checked_add(1);
        Some(token)
    }
}

/// One receiver's baseline and the tokens sent to it but not yet settled.
#[derive(Debug, Clone)]
pub struct BaselineTracker {
    baseline: u64,
    outstanding: VecDeque<u64>,
    capacity: usize,
}

impl BaselineTracker {
    /// A tracker remembering at most `capacity` outstanding tokens.
    pub fn new(capacity: usize) -> Self {
        BaselineTracker {
            baseline: 0,
            outstanding: VecDeque::with_capacity(capacity.min(1024)),
            capacity: capacity.max(1),
        }
    }

    /// The current baseline (0 = none).
    pub fn baseline(&self) -> u64 {
        self.baseline
    }

    /// Tokens sent and not yet settled, oldest first.
    pub fn outstanding(&self) -> impl Iterator<Item = u64> + '_ {
        self.outstanding.iter().copied()
    }

    /// Records that `token` was sent to this receiver. Tokens must be
    /// increasing; a stale one is ignored.
    pub fn handle_sent(&mut self, token: u64) {
        if token <= self.baseline || self.outstanding.back().is_some_and(|&t| t >= token) {
            return;
        }
        if self.outstanding.len() == self.capacity {
            self.outstanding.pop_front();
        }
        self.outstanding.push_back(token);
    }

    /// Applies an acknowledgement window. The baseline advances to the newest
    /// acknowledged outstanding token that is newer than the current baseline;
    /// everything at or below it is settled. Returns whether it advanced.
    pub fn handle_ack(&mut self, window: &AckWindow) -> bool {
        let newest = self
            .outstanding
            .iter()
            .rev()
            .copied()
            .find(|&t| t > self.baseline && window.contains(t));
        match newest {
            Some(token) => {
                self.baseline = token;
                while self.outstanding.front().is_some_and(|&t| t <= token) {
                    self.outstanding.pop_front();
                }
                true
            }
            None => false,
        }
    }

    /// Forgets everything (a receiver reset, e.g. a repeated HELLO).
    pub fn reset(&mut self) {
        self.baseline = 0;
        self.outstanding.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocator_never_wraps() {
        let mut a = TokenAllocator {
            next: Some(u64::MAX),
        };
        assert_eq!(a.issue(), Some(u64::MAX));
        assert_eq!(a.issue(), None);
        assert_eq!(TokenAllocator::new().issue(), Some(1));
    }

    #[test]
    fn advances_only_to_outstanding_newer_tokens() {
        let mut t = BaselineTracker::new(8);
        for token in 1..=5 {
            t.handle_sent(token);
        }
        let mut w = AckWindow::new();
        w.ack(3);
        assert!(t.handle_ack(&w));
        assert_eq!(t.baseline(), 3);
        assert_eq!(t.outstanding().collect::<Vec<_>>(), vec![4, 5]);
        // A forged or stale ack changes nothing.
        let mut w = AckWindow::new();
        w.ack(2);
        w.ack(99);
        assert!(!t.handle_ack(&w));
        assert_eq!(t.baseline(), 3);
    }

    #[test]
    fn capacity_bounds_memory() {
        let mut t = BaselineTracker::new(4);
        for token in 1..=100 {
            t.handle_sent(token);
        }
        assert_eq!(t.outstanding().collect::<Vec<_>>(), vec![97, 98, 99, 100]);
    }
}
