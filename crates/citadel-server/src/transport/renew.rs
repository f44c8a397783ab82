//! Renewal of the development certificate while the node runs: browsers
//! only accept `serverCertificateHashes` for certificates valid under 14
//! days, so a long-running development node must rotate its certificate.
//!
//! [`Renewal::run`] checks every [`CHECK_EVERY`]; when less than
//! `DEV_CERT_RENEW_BEFORE` remains it regenerates the certificate (on disk
//! too), swaps it into the QUIC and WebTransport endpoints (new handshakes
//! use it; open connections keep theirs) and into `/v1/webtransport`.
//! What it is not: reloading of configured PEM files (restart for those).
//! Call order: spawned once by the node when a UDP transport is enabled.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::config::TransportConfig;
use crate::transport::tls::CurrentTls;
use crate::transport::webtransport::WtEndpoint;

/// How often the certificate's remaining validity is checked.
pub const CHECK_EVERY: Duration = Duration::from_secs(3600);

/// The endpoints whose certificate is swapped.
#[derive(Clone, Default)]
pub struct UdpEndpoints {
    /// The QUIC endpoint, if enabled.
    pub quic: Option<quinn::Endpoint>,
    /// The WebTransport endpoint, if enabled.
    pub webtransport: Option<Arc<WtEndpoint>>,
}

/// What a renewal touches: the certificate in use, where the development
/// certificate lives, and the endpoints (with their sections, to rebuild
/// their server configurations).
pub struct Renewal {
    /// The certificate reported by `/v1/webtransport` and the node.
    pub tls: Arc<CurrentTls>,
    /// `[transport]` (the `tls.data_dir`, `quic` and `webtransport` keys).
    pub transport: TransportConfig,
    /// The endpoints to swap the certificate into.
    pub endpoints: UdpEndpoints,
}

impl Renewal {
    /// Checks every [`CHECK_EVERY`] until shutdown.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
            }
            if let Err(err) = self.renew_if_due(SystemTime::now()) {
                tracing::warn!(error = %err, "development certificate renewal failed");
            }
        }
    }

    /// Renews the development certificate if it is due at `now`; true if
    /// it was renewed.
    pub fn renew_if_due(&self, now: SystemTime) -> anyhow::Result<bool> {
        let Some(current) = self.tls.get() else {
            return Ok(false);
        };
        if !current.needs_renewal(now) {
            return Ok(false);
        }
        let transport = &self.transport;
        let identity = Arc::new(crate::transport::tls::create_dev(
            &PathBuf::from(&transport.tls.data_dir),
            SystemTime::now(),
        )?);
        if let Some(endpoint) = &self.endpoints.quic {
            endpoint.set_server_config(Some(crate::transport::quic::server_config(
                &transport.quic,
                &identity,
            )?));
        }
        if let Some(endpoint) = &self.endpoints.webtransport {
            let addr = endpoint.local_addr()?;
            endpoint.reload_config(
                crate::transport::webtransport::server_config(
                    &transport.webtransport,
                    &identity,
                    addr,
                )?,
                false,
            )?;
        }
        tracing::info!(sha256 = %identity.leaf_sha256_hex(), "development TLS certificate renewed");
        self.tls.set(identity);
        Ok(true)
    }
}
