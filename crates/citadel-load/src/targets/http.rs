//! A minimal HTTP/1.1 POST client for Colyseus matchmaking.
//!
//! What it is: [`post_json`] writes one request with `Connection: close`
//! over a TCP stream bound to a chosen loopback source address and reads
//! the whole response (at most [`MAX_RESPONSE_BYTES`]), de-chunking if
//! needed. What it is not: a general HTTP client (no TLS, redirects,
//! keep-alive or compression).
//!
//! Call order: `post_json(source, addr, path, body)` → `(status, body)`.

use std::net::{Ipv4Addr, SocketAddr};

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::citadel::tcp_from;

/// Largest response accepted.
pub const MAX_RESPONSE_BYTES: u64 = 256 * 1024;

/// POSTs `body` (JSON) to `path` and returns the status and body.
pub async fn post_json(
    source: Ipv4Addr,
    addr: SocketAddr,
    path: &str,
    body: &str,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut stream = tcp_from(source, addr).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .context("http write")?;
    let mut raw = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE_BYTES)
        .read_to_end(&mut raw)
        .await
        .context("http read")?;
    parse_response(&raw)
}

/// Splits a full HTTP/1.1 response into status and (de-chunked) body.
pub fn parse_response(raw: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("http response without a header end")?;
    let head = std::str::from_utf8(&raw[..split]).context("http header not UTF-8")?;
    let body = &raw[split + 4..];
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("http status line")?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok((status, body))
}

fn dechunk(mut data: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("bad chunk header")?;
        let size_text = std::str::from_utf8(&data[..line_end]).context("bad chunk size")?;
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("bad chunk size")?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        let chunk = data.get(..size).context("truncated chunk")?;
        out.extend_from_slice(chunk);
        data = data.get(size + 2..).context("truncated chunk end")?;
    }
    bail!("too many chunks")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).ok(), Some((200, b"{}".to_vec())));
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).ok(), Some((200, b"abcde".to_vec())));
        assert!(parse_response(b"garbage").is_err());
        assert!(
            parse_response(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err()
        );
    }
}
