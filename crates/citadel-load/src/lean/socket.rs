//! [`LeanSocket`]: one bot's TCP connection, shared (`Arc`) by its reader
//! task and the send wheel, written without waiting.
//!
//! What it is: non-blocking writes of whole WebSocket frames (`try_write`;
//! whatever the kernel does not take at once is kept, in order, up to
//! [`MAX_BACKLOG_BYTES`], and goes out before the next frame), the masking
//! key source, and the reads the dialers and the reader task use
//! (`readable` + `try_read` into the caller's buffer, so nothing is
//! zero-filled per read). What it is not: a queue (a bot whose backlog
//! passes the bound is lost, as a real client with a stuck socket would
//! be).
//!
//! Call order: [`LeanSocket::connect`] → [`LeanSocket::send`] /
//! [`LeanSocket::read`] from any task → drop.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::TcpStream;

use super::ws::encode_frame;

/// Most bytes a bot keeps that the kernel did not take yet.
pub const MAX_BACKLOG_BYTES: usize = 64 * 1024;

/// One bot's socket.
#[derive(Debug)]
pub struct LeanSocket {
    stream: TcpStream,
    backlog: Mutex<Vec<u8>>,
    mask: AtomicU64,
}

impl LeanSocket {
    /// Connects from `source` with `TCP_NODELAY` (like `citadel-client`).
    pub async fn connect(source: Ipv4Addr, to: SocketAddr, seed: u64) -> anyhow::Result<Self> {
        let stream = crate::targets::citadel::tcp_from(source, to).await?;
        Ok(LeanSocket {
            stream,
            backlog: Mutex::new(Vec::new()),
            // never zero: xorshift would stay at zero
            mask: AtomicU64::new(seed | 1),
        })
    }

    /// A fresh masking key (xorshift64: RFC 6455 asks for unpredictable
    /// keys against cache poisoning by intermediaries; on loopback, with no
    /// intermediary, a fast generator is enough).
    fn next_mask(&self) -> [u8; 4] {
        let mut x = self.mask.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.mask.store(x, Ordering::Relaxed);
        let bytes = x.to_le_bytes();
        [bytes[0], bytes[1], bytes[2], bytes[3]]
    }

    /// Encodes one masked frame of `opcode` over `parts` into `scratch`
    /// (cleared first; reuse it) and writes it without waiting.
    pub fn send(&self, scratch: &mut Vec<u8>, opcode: u8, parts: &[&[u8]]) -> io::Result<()> {
        scratch.clear();
        encode_frame(scratch, opcode, self.next_mask(), parts);
        self.write(scratch)
    }

    /// Writes `bytes` after any backlog, without waiting.
    pub fn write(&self, bytes: &[u8]) -> io::Result<()> {
        let mut backlog = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
        if !backlog.is_empty() {
            self.flush_locked(&mut backlog)?;
        }
        let mut rest = bytes;
        if backlog.is_empty() {
            match self.stream.try_write(bytes) {
                Ok(n) => rest = &bytes[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        if !rest.is_empty() {
            if backlog.len() + rest.len() > MAX_BACKLOG_BYTES {
                return Err(io::Error::other(format!(
                    "send backlog over {MAX_BACKLOG_BYTES} bytes"
                )));
            }
            backlog.extend_from_slice(rest);
        }
        Ok(())
    }

    fn flush_locked(&self, backlog: &mut Vec<u8>) -> io::Result<()> {
        match self.stream.try_write(backlog) {
            Ok(n) => {
                backlog.drain(..n);
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Writes `bytes` and waits until the kernel took all of them (the
    /// handshake's requests; not used on the hot path).
    pub async fn write_all(&self, bytes: &[u8]) -> io::Result<()> {
        self.write(bytes)?;
        loop {
            {
                let mut backlog = self.backlog.lock().unwrap_or_else(|p| p.into_inner());
                if backlog.is_empty() {
                    return Ok(());
                }
                self.flush_locked(&mut backlog)?;
                if backlog.is_empty() {
                    return Ok(());
                }
            }
            self.stream.writable().await?;
        }
    }

    /// Reads what is there into `buf` (waiting for readiness); 0 at the end
    /// of the stream. Cancel-safe.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.try_read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stream.readable().await?;
                }
                other => return other,
            }
        }
    }
}
