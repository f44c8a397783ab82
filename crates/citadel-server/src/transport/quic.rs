//! Native QUIC transport (quinn, ALPN `citadel/0`): the endpoint, its
//! accept loop, and [`Session`] for a `quinn::Connection`.
//!
//! Call order: [`transport_config`] + [`endpoint`] (node start) → [`serve`]
//! until shutdown; each accepted connection is driven by
//! [`super::udp_conn::handle_session`]. What it is not: protocol logic (the
//! driver and the gateway own it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;

use crate::config::DatagramTransportConfig;
use crate::transport::TransportDeps;
use crate::transport::link::LinkSettings;
use crate::transport::session::{DatagramQueued, DatagramRefused, Session};
use crate::transport::tls::{ALPN_CITADEL, TlsIdentity};
use crate::transport::udp_conn::handle_session;

/// Per-stream and per-connection receive windows: the most unread client
/// bytes one connection can make the server hold.
const STREAM_RECEIVE_WINDOW: u32 = 1024 * 1024;
const CONNECTION_RECEIVE_WINDOW: u32 = 4 * 1024 * 1024;

/// The bounded transport parameters shared by QUIC and WebTransport.
pub fn transport_config(cfg: &DatagramTransportConfig) -> anyhow::Result<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    let streams = quinn::VarInt::from_u32(cfg.max_client_streams);
    t.max_concurrent_uni_streams(streams)
        .max_concurrent_bidi_streams(streams)
        .stream_receive_window(quinn::VarInt::from_u32(STREAM_RECEIVE_WINDOW))
        .receive_window(quinn::VarInt::from_u32(CONNECTION_RECEIVE_WINDOW))
        .datagram_receive_buffer_size(Some(cfg.datagram_receive_buffer_bytes))
        .datagram_send_buffer_size(cfg.datagram_send_buffer_bytes)
        .max_idle_timeout(Some(
            quinn::IdleTimeout::try_from(Duration::from_millis(cfg.idle_timeout_ms))
                .context("idle_timeout_ms")?,
        ))
        .keep_alive_interval(
            (cfg.keep_alive_interval_ms > 0)
                .then(|| Duration::from_millis(cfg.keep_alive_interval_ms)),
        );
    Ok(t)
}

/// Whether handing `len` more bytes to `connection` makes quinn drop older
/// queued datagrams (its send buffer has less room than that).
pub fn queued_kind(connection: &quinn::Connection, len: usize) -> DatagramQueued {
    if connection.datagram_send_buffer_space() < len {
        DatagramQueued::DisplacedOlder
    } else {
        DatagramQueued::Queued
    }
}

/// The server configuration for `identity` (also used to swap in a
/// renewed certificate).
pub fn server_config(
    cfg: &DatagramTransportConfig,
    identity: &TlsIdentity,
) -> anyhow::Result<quinn::ServerConfig> {
    let tls = identity.rustls_server_config(&[ALPN_CITADEL])?;
    let crypto =
        quinn::crypto::rustls::QuicServerConfig::try_from(tls).context("QUIC TLS configuration")?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport_config(cfg)?));
    Ok(server)
}

/// Binds the QUIC endpoint.
pub fn endpoint(
    cfg: &DatagramTransportConfig,
    identity: &TlsIdentity,
    addr: SocketAddr,
) -> anyhow::Result<quinn::Endpoint> {
    let socket = bind_udp(addr, cfg.udp_socket_buffer_bytes)
        .with_context(|| format!("cannot bind transport.quic.bind {addr}"))?;
    let runtime = Arc::new(quinn::TokioRuntime);
    quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        Some(server_config(cfg, identity)?),
        socket,
        runtime,
    )
    .with_context(|| format!("cannot start the QUIC endpoint on {addr}"))
}

/// Binds the endpoint's UDP socket with `buffer` bytes of kernel receive
/// and send buffer (`transport.quic.udp_socket_buffer_bytes`). The
/// kernel's default (about 208 KiB) overflowed in the NetworkPeer bench:
/// 100 clients' packets arriving during one busy tick were dropped and
/// retransmitted. A cap below the request is logged, not an error.
fn bind_udp(addr: SocketAddr, buffer: usize) -> std::io::Result<std::net::UdpSocket> {
    use rustix::net::sockopt;
    let socket = std::net::UdpSocket::bind(addr)?;
    sockopt::set_socket_recv_buffer_size(&socket, buffer)?;
    sockopt::set_socket_send_buffer_size(&socket, buffer)?;
    let got = granted_recv_buffer(&socket).unwrap_or(0);
    if got < buffer {
        tracing::warn!(
            requested = buffer,
            granted = got,
            "transport.quic.udp_socket_buffer_bytes capped by the kernel (net.core.rmem_max)"
        );
    }
    Ok(socket)
}

/// The receive buffer the kernel granted `socket` (Linux reports twice the
/// size, the extra half being its bookkeeping).
fn granted_recv_buffer(socket: &std::net::UdpSocket) -> std::io::Result<usize> {
    Ok(rustix::net::sockopt::socket_recv_buffer_size(socket)? / 2)
}

/// Accepts QUIC connections until shutdown; a source address past
/// `transport.limits.max_connections_per_ip` is refused before the
/// handshake (counted).
pub async fn serve(endpoint: quinn::Endpoint, deps: TransportDeps, settings: LinkSettings) {
    loop {
        let incoming = tokio::select! {
            _ = deps.shutdown.cancelled() => break,
            incoming = endpoint.accept() => incoming,
        };
        let Some(incoming) = incoming else { break };
        let Some(address) = deps.admission.try_address(incoming.remote_address().ip()) else {
            incoming.refuse();
            continue;
        };
        let deps = deps.clone();
        deps.tasks.clone().spawn(async move {
            let _address = address;
            let connection = match tokio::time::timeout(settings.handshake_timeout, incoming).await
            {
                Ok(Ok(connection)) => connection,
                Ok(Err(err)) => {
                    tracing::debug!(error = %err, "quic handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("quic handshake timed out");
                    return;
                }
            };
            handle_session(QuicSession(connection), deps, settings).await;
        });
    }
    // Let connections send their close frames before the socket goes.
    deps.tasks.clone().spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    });
}

/// [`Session`] over a native QUIC connection.
#[derive(Clone)]
pub struct QuicSession(pub quinn::Connection);

impl Session for QuicSession {
    type Recv = quinn::RecvStream;
    type Sent = quinn::SendStream;

    async fn accept_uni(&self) -> Option<Self::Recv> {
        self.0.accept_uni().await.ok()
    }

    async fn accept_bi(&self) -> Option<Self::Recv> {
        // The send half is dropped: the server answers on its own streams.
        self.0.accept_bi().await.ok().map(|(_send, recv)| recv)
    }

    async fn read_datagram(&self) -> Option<Bytes> {
        self.0.read_datagram().await.ok()
    }

    fn send_datagram(&self, datagram: Bytes) -> Result<DatagramQueued, DatagramRefused> {
        match self.0.max_datagram_size() {
            Some(max) if datagram.len() <= max => {}
            _ => return Err(DatagramRefused::TooLarge),
        }
        let queued = queued_kind(&self.0, datagram.len());
        self.0
            .send_datagram(datagram)
            .map(|()| queued)
            .map_err(|err| match err {
                quinn::SendDatagramError::ConnectionLost(_) => DatagramRefused::Closed,
                _ => DatagramRefused::TooLarge,
            })
    }

    fn datagrams_received(&self) -> u64 {
        self.0.stats().frame_rx.datagram
    }

    async fn send_stream(&self, bytes: Bytes) -> Option<Self::Sent> {
        let mut stream = self.0.open_uni().await.ok()?;
        stream.write_chunk(bytes).await.ok()?;
        stream.finish().ok()?;
        Some(stream)
    }

    async fn wait_acked(sent: Self::Sent) {
        let _ = sent.stopped().await;
    }

    fn close(&self, code: u32, reason: &[u8]) {
        self.0.close(quinn::VarInt::from_u32(code), reason);
    }

    fn rtt(&self) -> Duration {
        self.0.rtt()
    }
}

#[cfg(test)]
mod tests {
    use super::{bind_udp, granted_recv_buffer};

    #[test]
    fn the_udp_socket_gets_the_configured_kernel_buffer() -> Result<(), Box<dyn std::error::Error>>
    {
        // The kernel grants at most net.core.rmem_max; ask for 1 MiB or that.
        let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")?
            .trim()
            .parse()?;
        let want = (1024 * 1024).min(rmem_max);
        let socket = bind_udp("127.0.0.1:0".parse()?, want)?;
        assert_eq!(granted_recv_buffer(&socket)?, want);
        // The kernel default is far below it: the setting took effect.
        let plain = std::net::UdpSocket::bind("127.0.0.1:0")?;
        assert!(granted_recv_buffer(&plain)? < want);
        Ok(())
    }
}
