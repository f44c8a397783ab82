//! WebTransport (wtransport, HTTP/3 + ALPN `h3`): the endpoint, the session
//! accept loop (only `transport.webtransport.path` is accepted; any other
//! path gets 404), and [`Session`] for a `wtransport::Connection`.
//!
//! A browser sends framed envelopes on any stream it opens (normally one
//! bidirectional stream) and datagrams; the server answers exactly as on
//! native QUIC: one server-opened unidirectional stream per reliable batch,
//! read by the page in arrival order, and datagrams.
//!
//! Call order: [`endpoint`] (node start) → [`serve`] until shutdown. What it
//! is not: protocol logic (the driver and the gateway own it).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use tokio::io::AsyncWriteExt;

use crate::config::DatagramTransportConfig;
use crate::transport::TransportDeps;
use crate::transport::link::LinkSettings;
use crate::transport::quic::transport_config;
use crate::transport::session::{DatagramQueued, DatagramRefused, Session};
use crate::transport::tls::TlsIdentity;
use crate::transport::udp_conn::handle_session;

/// A bound WebTransport server endpoint.
pub type WtEndpoint = wtransport::Endpoint<wtransport::endpoint::endpoint_side::Server>;

/// The server configuration for `identity` (also used to swap in a
/// renewed certificate; the address is ignored then).
pub fn server_config(
    cfg: &DatagramTransportConfig,
    identity: &TlsIdentity,
    addr: SocketAddr,
) -> anyhow::Result<wtransport::ServerConfig> {
    let tls = identity.rustls_server_config(&[b"h3"])?;
    Ok(wtransport::ServerConfig::builder()
        .with_bind_address(addr)
        .with_custom_tls_and_transport(tls, transport_config(cfg)?)
        .build())
}

/// Binds the WebTransport endpoint.
pub fn endpoint(
    cfg: &DatagramTransportConfig,
    identity: &TlsIdentity,
    addr: SocketAddr,
) -> anyhow::Result<Arc<WtEndpoint>> {
    wtransport::Endpoint::server(server_config(cfg, identity, addr)?)
        .map(Arc::new)
        .with_context(|| format!("cannot bind transport.webtransport.bind {addr}"))
}

/// Accepts WebTransport sessions on `path` until shutdown; a source
/// address past `transport.limits.max_connections_per_ip` is refused before
/// the handshake (counted).
pub async fn serve(
    endpoint: Arc<WtEndpoint>,
    deps: TransportDeps,
    settings: LinkSettings,
    path: String,
) {
    let path: Arc<str> = path.into();
    loop {
        let incoming = tokio::select! {
            _ = deps.shutdown.cancelled() => break,
            incoming = endpoint.accept() => incoming,
        };
        let Some(address) = deps.admission.try_address(incoming.remote_address().ip()) else {
            incoming.refuse();
            continue;
        };
        let deps = deps.clone();
        let path = path.clone();
        deps.tasks.clone().spawn(async move {
            let _address = address;
            let accepted = tokio::time::timeout(settings.handshake_timeout, async {
                let request = incoming.await.ok()?;
                if request.path() != &*path {
                    request.not_found().await;
                    return None;
                }
                request.accept().await.ok()
            })
            .await;
            let Ok(Some(connection)) = accepted else {
                tracing::debug!("webtransport session setup failed or timed out");
                return;
            };
            handle_session(WtSession(Arc::new(connection)), deps, settings).await;
        });
    }
    deps.tasks.clone().spawn(async move {
        let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    });
}

/// [`Session`] over a WebTransport session.
#[derive(Clone)]
pub struct WtSession(Arc<wtransport::Connection>);

impl Session for WtSession {
    type Recv = wtransport::RecvStream;
    type Sent = wtransport::SendStream;

    async fn accept_uni(&self) -> Option<Self::Recv> {
        self.0.accept_uni().await.ok()
    }

    async fn accept_bi(&self) -> Option<Self::Recv> {
        self.0.accept_bi().await.ok().map(|(_send, recv)| recv)
    }

    async fn read_datagram(&self) -> Option<Bytes> {
        self.0.receive_datagram().await.ok().map(|d| d.payload())
    }

    fn send_datagram(&self, datagram: Bytes) -> Result<DatagramQueued, DatagramRefused> {
        match self.0.max_datagram_size() {
            Some(max) if datagram.len() <= max => {}
            _ => return Err(DatagramRefused::TooLarge),
        }
        // The session id travels in front of the payload (a QUIC varint, at
        // most 8 bytes): count with the larger size.
        let queued = super::quic::queued_kind(self.0.quic_connection(), datagram.len() + 8);
        self.0
            .send_datagram(datagram)
            .map(|()| queued)
            .map_err(|err| match err {
                wtransport::error::SendDatagramError::NotConnected => DatagramRefused::Closed,
                _ => DatagramRefused::TooLarge,
            })
    }

    fn datagrams_received(&self) -> u64 {
        self.0.quic_connection().stats().frame_rx.datagram
    }

    async fn send_stream(&self, bytes: Bytes) -> Option<Self::Sent> {
        let mut stream = self.0.open_uni().await.ok()?.await.ok()?;
        stream.write_all(&bytes).await.ok()?;
        stream.shutdown().await.ok()?;
        Some(stream)
    }

    async fn wait_acked(mut sent: Self::Sent) {
        let _ = sent.finish().await;
    }

    fn close(&self, code: u32, reason: &[u8]) {
        self.0.close(wtransport::VarInt::from_u32(code), reason);
    }

    fn rtt(&self) -> std::time::Duration {
        self.0.quic_connection().rtt()
    }
}
