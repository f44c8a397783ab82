//! The `citadel` binary in tests: [`citadel`] builds a command for it,
//! [`serve`] one that serves a config file quietly, and [`spawn`] starts a
//! command and reads the startup banner (the listener addresses).
//!
//! Not a node harness: in-process nodes come from `common::start`. Call
//! order: build the command (or wrap it, e.g. under `sh -c "ulimit …"`),
//! then `spawn`, then talk to the addresses in the returned [`Banner`].

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A command running the `citadel` binary built for these tests.
pub fn citadel() -> Command {
    Command::new(env!("CARGO_BIN_EXE_citadel"))
}

/// `citadel serve --config <config>` logging only warnings, stderr dropped.
pub fn serve(config: &Path) -> Command {
    let mut command = citadel();
    command
        .args(["serve", "--config"])
        .arg(config)
        .env("CITADEL_LOG_LEVEL", "warn")
        .stderr(Stdio::null());
    command
}

/// What the startup banner says.
#[derive(Debug, Clone)]
pub struct Banner {
    /// The whole banner, from its first line to its closing `╰…╯` line.
    pub text: String,
    /// The HTTP listener (`host:port` of the health URL).
    pub http: SocketAddr,
    /// The WebSocket URL (`ws://host:port/`), `None` when disabled.
    pub ws: Option<String>,
}

impl Banner {
    /// The WebSocket URL; panics when the banner names none.
    pub fn ws_url(&self) -> &str {
        self.ws.as_deref().expect("no websocket URL in the banner")
    }
}

/// Starts `command` with stdout piped and blocks until the banner's closing
/// line has been read; the rest of stdout is drained by a thread so the
/// child never blocks on a full pipe. Panics if stdout ends first.
pub fn spawn(mut command: Command) -> (Child, Banner) {
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("stdout ended before the banner closed: {text}");
        }
        text.push_str(&line);
        if line.starts_with('╰') {
            break;
        }
    }
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let pos = text.find("http://").expect("HTTP in the banner");
    let http = text[pos + 7..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .expect("HTTP address in the banner");
    let ws = text.find("ws://").map(|pos| {
        let host = text[pos + 5..].split('/').next().unwrap();
        format!("ws://{host}/")
    });
    (child, Banner { text, http, ws })
}
