//! Citadel over native QUIC (`--transport quic`): the endpoint a spawned
//! node serves, and the connector whose bots are `citadel-client`'s
//! `QuicClient`s.
//!
//! What it is: [`QuicEndpoint`] (a free UDP port and a fresh TLS data
//! directory for the generated config, and the readiness wait: the node's
//! development certificate exists and the UDP port is taken) and
//! [`QuicConnector`], which opens one QUIC connection (its own endpoint and
//! UDP socket, as a game client has) per bot, pins the node's development
//! certificate, and authenticates as `AuthMode` says. Its bots are
//! [`CitadelBot`]s over `QuicLink`: the join is reliable (streams), every
//! position is one datagram, and peers' positions arrive as datagrams. What
//! it is not: a lean QUIC client (the fan-out runs these bots in the classic
//! per-bot loop), nor WebTransport.
//!
//! Call order: `StartOptions::quic` → `citadel::spawn` (uses
//! [`QuicEndpoint::fresh`], [`QuicEndpoint::config`],
//! [`QuicEndpoint::wait_ready`]) → [`QuicConnector::new`] → `connect` per bot.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use citadel_client::quic::{QuicLink, load_pem_certificates};
use citadel_client::{QuicClient, ServerTrust};

use super::ServerHandle;
use super::citadel::{CitadelBot, CitadelConnector};
use crate::transport::{AuthMode, Connector};

/// The development certificate the node writes into its TLS data dir.
const DEV_CERT: &str = "dev-cert.pem";

/// Where a spawned node serves QUIC, and where its certificate is.
#[derive(Debug, Clone)]
pub struct QuicEndpoint {
    /// UDP address of `[transport.quic]`.
    pub addr: SocketAddr,
    /// `transport.tls.data_dir` (created by the node, removed on drop).
    pub data_dir: PathBuf,
}

impl QuicEndpoint {
    /// A free loopback UDP port and the data dir `<stem>-tls`.
    pub fn fresh(stem: &Path) -> anyhow::Result<Self> {
        let probe = UdpSocket::bind("127.0.0.1:0").context("cannot find a free UDP port")?;
        Ok(QuicEndpoint {
            addr: probe.local_addr()?,
            data_dir: PathBuf::from(format!("{}-tls", stem.display())),
        })
    }

    /// The config sections that enable it.
    pub fn config(&self) -> String {
        format!(
            "[transport.quic]\nenabled = true\nbind = \"{}\"\n\
             [transport.tls]\ndata_dir = \"{}\"\n",
            self.addr,
            self.data_dir.display()
        )
    }

    /// The certificate bots pin.
    pub fn certificate(&self) -> PathBuf {
        self.data_dir.join(DEV_CERT)
    }

    /// Waits until the node wrote its certificate and holds the UDP port.
    pub fn wait_ready(&self, server: &mut ServerHandle, within: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + within;
        loop {
            if let Some(why) = server.exited() {
                bail!("{why} before serving QUIC on {}", self.addr);
            }
            let cert = self.certificate().metadata().is_ok_and(|m| m.len() > 0);
            if cert && UdpSocket::bind(self.addr).is_err() {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "server did not serve QUIC on {} within {within:?}",
                    self.addr
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Opens authenticated QUIC bot connections to a Citadel node.
#[derive(Debug)]
pub struct QuicConnector {
    /// Device tokens come from the node's HTTP API, as for WebSocket bots.
    tokens: CitadelConnector,
    addr: String,
    trust: ServerTrust,
}

impl QuicConnector {
    /// For the node whose WebSocket URL is `url` (tokens), HTTP API
    /// `http_url` and QUIC endpoint `quic` (its certificate is pinned).
    pub fn new(url: &str, http_url: Option<&str>, quic: &QuicEndpoint) -> anyhow::Result<Self> {
        let certs = load_pem_certificates(&quic.certificate())
            .with_context(|| format!("the node's certificate {}", quic.certificate().display()))?;
        Ok(QuicConnector {
            tokens: CitadelConnector::new(url, http_url)?,
            addr: quic.addr.to_string(),
            trust: ServerTrust::Pinned(certs),
        })
    }
}

impl Connector for QuicConnector {
    type Transport = CitadelBot<QuicLink>;

    async fn connect(
        &self,
        source: Ipv4Addr,
        auth: &AuthMode,
    ) -> anyhow::Result<CitadelBot<QuicLink>> {
        let token = self.tokens.token_for(source, auth).await?;
        let client = QuicClient::connect(&self.addr, self.trust.clone()).await?;
        CitadelBot::authenticated(client, token.as_deref()).await
    }
}
