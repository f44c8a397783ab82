//! The file-descriptor budget: at start the soft `RLIMIT_NOFILE` is raised
//! to the hard limit, and the result is compared with what the configured
//! caps can open (every realtime connection, every HTTP connection, plus a
//! reserve for the store, the listeners and the runtime).
//!
//! Call order: [`prepare`] once, before the node starts (the `citadel`
//! binary does it; an embedder may call it too) → [`FdReport::banner_lines`]
//! for the banner. A shortfall is logged at `warn` with the numbers and the
//! fix; the node still starts (its accept loops back off on EMFILE, see
//! [`crate::conn_limits::AcceptBackoff`]). What it is not: it never lowers
//! a limit and never caps connections itself.

use crate::config::Config;

/// Descriptors kept for everything that is not a client connection: the
/// listeners, the runtime's epoll and event descriptors, log and script
/// files, the TLS files, SQLite's files. The store's pool comes on top.
pub const RESERVE_DESCRIPTORS: u64 = 128;

/// What the configured caps can open at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdBudget {
    /// `transport.limits.max_connections` (a WebSocket connection holds one
    /// descriptor; QUIC and WebTransport share their UDP socket, but the
    /// cap covers every transport, so all are counted).
    pub realtime: u64,
    /// `http.max_connections`.
    pub http: u64,
    /// `database.max_connections` + [`RESERVE_DESCRIPTORS`].
    pub reserve: u64,
}

impl FdBudget {
    /// The budget of `config`.
    pub fn of(config: &Config) -> Self {
        FdBudget {
            realtime: config.transport.limits.max_connections as u64,
            http: config.http.max_connections as u64,
            reserve: u64::from(config.database.max_connections) + RESERVE_DESCRIPTORS,
        }
    }

    /// Descriptors needed in total.
    pub fn total(&self) -> u64 {
        self.realtime + self.http + self.reserve
    }
}

/// The descriptor limit after [`prepare`] and how it compares with the
/// budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdReport {
    /// The soft limit now in force (`None`: unlimited).
    pub soft: Option<u64>,
    /// The hard limit (`None`: unlimited).
    pub hard: Option<u64>,
    /// The soft limit before it was raised (`None`: not raised).
    pub raised_from: Option<u64>,
    /// Why raising failed, if it did.
    pub raise_error: Option<String>,
    /// What the configuration can open.
    pub budget: FdBudget,
}

impl FdReport {
    /// The shortfall message, when the limit cannot cover the budget.
    pub fn shortfall(&self) -> Option<String> {
        let soft = self.soft?;
        let b = &self.budget;
        if soft >= b.total() {
            return None;
        }
        Some(format!(
            "file descriptor limit {soft} is below what the caps can open: \
             transport.limits.max_connections {} + http.max_connections {} + {} for the store \
             and the runtime = {}; raise the hard limit (systemd LimitNOFILE={}, Docker \
             --ulimit nofile={}, or `ulimit -Hn {}` before starting) or lower the caps",
            b.realtime,
            b.http,
            b.reserve,
            b.total(),
            b.total(),
            b.total(),
            b.total(),
        ))
    }

    /// Lines for the startup banner: the limit, and the shortfall if any.
    pub fn banner_lines(&self) -> Vec<String> {
        let limit = self
            .soft
            .map_or_else(|| "unlimited".to_owned(), |s| s.to_string());
        let mut lines = vec![format!(
            "Files     limit {limit}, caps need {}",
            self.budget.total()
        )];
        if self.shortfall().is_some() {
            lines.push(format!(
                "WARNING   too few file descriptors; raise to {} (docs/operations.md)",
                self.budget.total()
            ));
        }
        lines
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and reports the
/// result against `config`'s budget; logs the raise at `info` and a
/// shortfall at `warn`.
pub fn prepare(config: &Config) -> FdReport {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let before = getrlimit(Resource::Nofile);
    let mut report = FdReport {
        soft: before.current,
        hard: before.maximum,
        raised_from: None,
        raise_error: None,
        budget: FdBudget::of(config),
    };
    if before.current != before.maximum {
        let wanted = Rlimit {
            current: before.maximum,
            maximum: before.maximum,
        };
        match setrlimit(Resource::Nofile, wanted) {
            Ok(()) => {
                report.raised_from = before.current;
                report.soft = getrlimit(Resource::Nofile).current;
            }
            Err(err) => report.raise_error = Some(err.to_string()),
        }
    }
    if let (Some(from), Some(to)) = (report.raised_from, report.soft) {
        tracing::info!(
            from,
            to,
            "raised the file descriptor limit to the hard limit"
        );
    }
    if let Some(err) = &report.raise_error {
        tracing::warn!(error = %err, "cannot raise the file descriptor limit");
    }
    if let Some(message) = report.shortfall() {
        tracing::warn!("{message}");
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(soft: Option<u64>) -> FdReport {
        FdReport {
            soft,
            hard: soft,
            raised_from: None,
            raise_error: None,
            budget: FdBudget::of(&Config::default()),
        }
    }

    #[test]
    fn default_budget_adds_the_caps_and_the_reserve() {
        let b = FdBudget::of(&Config::default());
        assert_eq!(b.realtime, 10_000);
        assert_eq!(b.http, 4_096);
        assert_eq!(b.reserve, 10 + RESERVE_DESCRIPTORS);
        assert_eq!(b.total(), 10_000 + 4_096 + 138);
    }

    #[test]
    fn shortfall_names_numbers_and_fix() {
        let short = report(Some(1024));
        let message = short.shortfall().expect("1024 is too few");
        assert!(message.contains("limit 1024"), "{message}");
        assert!(message.contains("= 14234"), "{message}");
        assert!(message.contains("LimitNOFILE=14234"), "{message}");
        assert!(short.banner_lines().iter().any(|l| l.contains("WARNING")));
        assert!(report(Some(1 << 20)).shortfall().is_none());
        assert!(report(None).shortfall().is_none());
        assert_eq!(report(None).banner_lines().len(), 1);
    }

    #[test]
    fn prepare_never_lowers_the_limit() {
        use rustix::process::{Resource, getrlimit};
        let before = getrlimit(Resource::Nofile);
        let report = prepare(&Config::default());
        let after = getrlimit(Resource::Nofile);
        assert_eq!(after.maximum, before.maximum);
        assert_eq!(report.soft, after.current);
        if report.raise_error.is_none() {
            assert_eq!(after.current, after.maximum, "soft raised to hard");
        }
    }
}
