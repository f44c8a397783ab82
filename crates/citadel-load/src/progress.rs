//! The progress line printed to stderr while a scenario runs.
//!
//! What it is: on a terminal, one line rewritten in place; otherwise (CI,
//! pipes) every fifth update as its own line, so logs stay short. What it is
//! not: the report (stdout) — progress never goes to stdout.
//!
//! Call order: `Progress::new(quiet)` → `update` about once a second →
//! `finish` before printing the report.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};

/// Progress line state.
#[derive(Debug)]
pub struct Progress {
    quiet: bool,
    tty: bool,
    updates: AtomicU64,
}

impl Progress {
    /// Progress on stderr unless `quiet`.
    pub fn new(quiet: bool) -> Self {
        Progress {
            quiet,
            tty: std::io::stderr().is_terminal(),
            updates: AtomicU64::new(0),
        }
    }

    /// Shows `text` as the current progress.
    pub fn update(&self, text: &str) {
        if self.quiet {
            return;
        }
        let n = self.updates.fetch_add(1, Ordering::Relaxed);
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{text}");
            let _ = err.flush();
        } else if n.is_multiple_of(5) {
            let _ = writeln!(err, "{text}");
        }
    }

    /// Prints a permanent line (step results, warnings).
    pub fn note(&self, text: &str) {
        if self.quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "{text}");
    }

    /// Ends the in-place line.
    pub fn finish(&self) {
        if !self.quiet && self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}
