//! Admission helpers every listener shares: [`AddressLimit`], a cap on the
//! open connections of one source address with an RAII [`AddressPermit`],
//! and [`AcceptBackoff`], the pause an accept loop takes after a failed
//! `accept` (longer, doubling, when the process is out of descriptors).
//!
//! Call order: one `AddressLimit` per budget (the HTTP listener has its
//! own; WebSocket, QUIC and WebTransport share one) → `try_acquire` on
//! accept, keeping the permit for the connection's life. One
//! `AcceptBackoff` per accept loop → `failed` after an error (sleep the
//! returned pause), `succeeded` after an accept. What it is not: it closes
//! no socket and counts no refusal; the listener does both.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::metrics::{AcceptError, Metrics};

/// Open connections per source address, capped (0 = no cap, nothing
/// tracked). IPv6 addresses count per /64 prefix: one host usually owns a
/// whole /64, so a per-address cap would not hold it.
#[derive(Debug)]
pub struct AddressLimit {
    max: usize,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One connection's share of an [`AddressLimit`]; released on drop.
#[derive(Debug)]
pub struct AddressPermit {
    held: Option<(Arc<AddressLimit>, IpAddr)>,
}

impl AddressLimit {
    /// A cap of `max` connections per address (0 = no cap).
    pub fn new(max: usize) -> Arc<Self> {
        Arc::new(AddressLimit {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A permit for one more connection from `ip`, or `None` when that
    /// address already holds the maximum.
    pub fn try_acquire(self: &Arc<Self>, ip: IpAddr) -> Option<AddressPermit> {
        if self.max == 0 {
            return Some(AddressPermit { held: None });
        }
        let key = address_key(ip);
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let count = open.entry(key).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(AddressPermit {
            held: Some((self.clone(), key)),
        })
    }

    /// Connections open from `ip` (its /64 for IPv6).
    pub fn open_from(&self, ip: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        open.get(&address_key(ip)).copied().unwrap_or(0)
    }

    /// Addresses with at least one open connection (the map's size).
    pub fn addresses(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

impl Drop for AddressPermit {
    fn drop(&mut self) {
        let Some((limit, key)) = self.held.take() else {
            return;
        };
        let mut open = limit.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = open.get_mut(&key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&key);
            }
        }
    }
}

/// The key an address counts under: IPv4 (also IPv4-mapped IPv6) as is,
/// other IPv6 addresses by their /64 prefix.
fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

/// First pause after running out of descriptors; doubles up to the maximum.
const EXHAUSTED_FIRST_PAUSE: Duration = Duration::from_millis(10);
const EXHAUSTED_MAX_PAUSE: Duration = Duration::from_secs(1);
/// Pause after any other accept error (usually one aborted connection).
const OTHER_PAUSE: Duration = Duration::from_millis(10);

/// The pause state of one accept loop.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    pause: Option<Duration>,
}

impl AcceptBackoff {
    /// An accept succeeded: the next exhaustion starts from the first pause.
    pub fn succeeded(&mut self) {
        self.pause = None;
    }

    /// Counts `err` and returns how long the loop should sleep before the
    /// next accept. EMFILE/ENFILE are logged once per episode, not per try.
    pub fn failed(&mut self, err: &io::Error, metrics: &Metrics, listener: &str) -> Duration {
        if !is_descriptor_exhaustion(err) {
            metrics.accept_failed(AcceptError::Other);
            tracing::debug!(listener, error = %err, "accept failed");
            return OTHER_PAUSE;
        }
        metrics.accept_failed(AcceptError::DescriptorsExhausted);
        let pause = match self.pause {
            None => {
                tracing::warn!(
                    listener,
                    error = %err,
                    "out of file descriptors: accepting paused with backoff (see docs/operations.md)"
                );
                EXHAUSTED_FIRST_PAUSE
            }
            Some(previous) => (previous * 2).min(EXHAUSTED_MAX_PAUSE),
        };
        self.pause = Some(pause);
        pause
    }
}

/// EMFILE (the process) or ENFILE (the system) is out of descriptors.
pub fn is_descriptor_exhaustion(err: &io::Error) -> bool {
    let code = err.raw_os_error();
    code == Some(rustix::io::Errno::MFILE.raw_os_error())
        || code == Some(rustix::io::Errno::NFILE.raw_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_per_address_and_release_on_drop() {
        let limit = AddressLimit::new(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = limit.try_acquire(a).expect("first");
        let second = limit.try_acquire(a).expect("second");
        assert!(
            limit.try_acquire(a).is_none(),
            "third from a is over the cap"
        );
        let other = limit.try_acquire(b).expect("b has its own budget");
        assert_eq!(limit.open_from(a), 2);
        drop(first);
        assert_eq!(limit.open_from(a), 1);
        let again = limit.try_acquire(a).expect("a slot was freed");
        drop((second, again, other));
        assert_eq!(limit.addresses(), 0, "empty entries are removed");
    }

    #[test]
    fn zero_means_no_cap_and_no_tracking() {
        let limit = AddressLimit::new(0);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let permits: Vec<_> = (0..1000).map(|_| limit.try_acquire(a).unwrap()).collect();
        assert_eq!(permits.len(), 1000);
        assert_eq!(limit.addresses(), 0);
    }

    #[test]
    fn ipv6_counts_per_64_and_mapped_v4_as_v4() {
        let limit = AddressLimit::new(1);
        let x: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let y: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let z: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        let _hold = limit.try_acquire(x).unwrap();
        assert!(limit.try_acquire(y).is_none(), "same /64");
        assert!(limit.try_acquire(z).is_some(), "another /64");
        let v4: IpAddr = "192.0.2.7".parse().unwrap();
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        let _v4 = limit.try_acquire(v4).unwrap();
        assert!(limit.try_acquire(mapped).is_none());
    }

    #[test]
    fn exhaustion_backs_off_doubling_and_counts() {
        let metrics = Metrics::default();
        let mut backoff = AcceptBackoff::default();
        let emfile = io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        let pauses: Vec<Duration> = (0..10)
            .map(|_| backoff.failed(&emfile, &metrics, "test"))
            .collect();
        assert_eq!(pauses[0], EXHAUSTED_FIRST_PAUSE);
        assert_eq!(pauses[1], EXHAUSTED_FIRST_PAUSE * 2);
        assert_eq!(*pauses.last().unwrap(), EXHAUSTED_MAX_PAUSE);
        assert_eq!(metrics.accept_errors(AcceptError::DescriptorsExhausted), 10);
        backoff.succeeded();
        let enfile = io::Error::from_raw_os_error(rustix::io::Errno::NFILE.raw_os_error());
        assert_eq!(
            backoff.failed(&enfile, &metrics, "test"),
            EXHAUSTED_FIRST_PAUSE
        );
        let other = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(backoff.failed(&other, &metrics, "test"), OTHER_PAUSE);
        assert_eq!(metrics.accept_errors(AcceptError::Other), 1);
    }
}
