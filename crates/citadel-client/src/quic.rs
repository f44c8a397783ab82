//! [`QuicClient`]: one Citadel realtime connection over native QUIC (ALPN
//! `citadel/0`) with a reliable path (streams) and an unreliable one
//! (datagrams).
//!
//! What it is: [`QuicLink`], the QUIC transport under the same [`Client`]
//! core as [`crate::WsClient`] (handshake, RPC correlation, room helpers,
//! pending queue: one body for every transport, in `link.rs`), plus what
//! only QUIC does ([`QuicClient::send_unreliable`], raw streams and
//! datagrams). Outbound reliable
//! envelopes go, framed, on one long-lived bidirectional stream the client
//! opens; unreliable ones are one datagram each (2-byte kind, no length).
//! Inbound: the server's reliable frames arrive on server-opened
//! unidirectional streams, which this client reads one at a time in
//! stream-id (= send) order, and datagrams; [`QuicClient::recv`] returns
//! whichever is ready, preferring stream data.
//!
//! What it is not: no background task, reconnect, reply timeouts or token
//! storage; it never logs tokens. Certificate checks: [`ServerTrust::Pinned`]
//! accepts exactly the given certificate(s) as the server's leaf;
//! [`ServerTrust::SystemRoots`] verifies the chain up to the platform's
//! trusted roots and the host name (WebPKI, as a browser does);
//! [`ServerTrust::InsecureDev`] accepts any (development only).
//!
//! Call order: [`QuicClient::connect`] → [`QuicClient::authenticate`] →
//! room helpers / `send` / `send_unreliable` / `call_rpc` / `recv` →
//! [`QuicClient::close`].

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use citadel_wire::protocol::MAX_FRAME_BODY_BYTES;
use citadel_wire::{Envelope, FrameDecoder, decode_datagram_bytes};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::{DigitallySignedStruct, SignatureScheme};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use crate::error::{ClientError, ClientResult};
use crate::event::AuthOutcome;
use crate::link::{self, Client, sealed};

/// ALPN of Citadel's native QUIC transport.
pub const ALPN: &[u8] = b"citadel/0";

/// Application close code the client sends on [`QuicClient::close`].
const CLOSE_NORMAL: u32 = 1000;
/// Largest chunk read from a stream at once.
const READ_CHUNK: usize = 64 * 1024;
/// How long [`QuicClient::close`] waits for sent data to be acknowledged.
const CLOSE_FLUSH: Duration = Duration::from_secs(2);

/// How the client checks the server's certificate.
#[derive(Debug, Clone)]
pub enum ServerTrust {
    /// Accept only these certificates (DER) as the server's leaf, e.g. the
    /// node's `dev-cert.pem`; the TLS signature is still verified.
    Pinned(Vec<CertificateDer<'static>>),
    /// Verify the chain up to the platform's trusted roots (public CAs)
    /// and the host name of the address.
    SystemRoots,
    /// Accept any certificate. Development only: it gives no protection
    /// against an active attacker.
    InsecureDev,
}

/// A Citadel realtime connection over QUIC: the shared [`Client`] core over
/// [`QuicLink`]. One owner drives it through `&mut self`; see the module
/// documentation.
pub type QuicClient = Client<QuicLink>;

/// The QUIC transport of a [`QuicClient`]: the connection, the client's
/// reliable stream, the server stream being read, and datagrams.
pub struct QuicLink {
    endpoint: quinn::Endpoint,
    conn: quinn::Connection,
    /// The long-lived bidirectional stream reliable frames go on.
    send: Option<quinn::SendStream>,
    /// The server-opened stream being read.
    current: Option<quinn::RecvStream>,
    /// Frames of the current server stream (frames never span streams).
    inbound: FrameDecoder,
    closed: bool,
    close_reason: Option<(u16, String)>,
    datagrams_received: u64,
}

impl fmt::Debug for QuicLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QuicLink")
            .field("remote", &self.conn.remote_address())
            .field("closed", &self.closed)
            .field("close_reason", &self.close_reason)
            .finish_non_exhaustive()
    }
}

enum Wire {
    Chunk(Bytes),
    StreamEnd,
    Datagram(Bytes),
    Gone(quinn::ConnectionError),
}

impl Client<QuicLink> {
    /// Connects to `addr` (`host:port`); the host is also the TLS server
    /// name. No frame is sent; call [`QuicClient::authenticate`] next.
    pub async fn connect(addr: &str, trust: ServerTrust) -> ClientResult<Self> {
        let (host, _) = addr
            .rsplit_once(':')
            .ok_or_else(|| ClientError::Config("quic address must be host:port".into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let remote: SocketAddr = tokio::net::lookup_host(addr)
            .await
            .map_err(|e| ClientError::Config(format!("invalid quic address: {e}")))?
            .next()
            .ok_or_else(|| ClientError::Config("quic address did not resolve".into()))?;
        let bind: SocketAddr = if remote.is_ipv6() {
            "[::]:0".parse()
        } else {
            "0.0.0.0:0".parse()
        }
        .map_err(|e| ClientError::Config(format!("{e}")))?;
        let mut endpoint =
            quinn::Endpoint::client(bind).map_err(|e| ClientError::Connect(e.to_string()))?;
        endpoint.set_default_client_config(client_config(trust)?);
        let conn = endpoint
            .connect(remote, host)
            .map_err(|e| ClientError::Connect(e.to_string()))?
            .await
            .map_err(|e| ClientError::Connect(e.to_string()))?;
        tracing::debug!("citadel quic connected");
        Ok(Client::over(QuicLink {
            endpoint,
            conn,
            send: None,
            current: None,
            inbound: FrameDecoder::new(MAX_FRAME_BODY_BYTES),
            closed: false,
            close_reason: None,
            datagrams_received: 0,
        }))
    }

    /// Connects, then handshakes as a guest (empty token).
    pub async fn connect_as_guest(
        addr: &str,
        trust: ServerTrust,
    ) -> ClientResult<(Self, AuthOutcome)> {
        let mut client = Self::connect(addr, trust).await?;
        let outcome = client.authenticate(None).await?;
        Ok((client, outcome))
    }

    /// Connects, then handshakes with the session access `token`.
    pub async fn connect_with_token(
        addr: &str,
        trust: ServerTrust,
        token: &str,
    ) -> ClientResult<(Self, AuthOutcome)> {
        let mut client = Self::connect(addr, trust).await?;
        let outcome = client.authenticate(Some(token)).await?;
        Ok((client, outcome))
    }

    /// Alias of [`QuicClient::send`].
    pub async fn send_reliable(&mut self, envelope: &Envelope) -> ClientResult<()> {
        self.send(envelope).await
    }

    /// Sends one envelope as one datagram (unreliable, unordered). Larger
    /// than the connection's current maximum datagram size is
    /// [`ClientError::Config`]; nothing is sent.
    pub fn send_unreliable(&mut self, envelope: &Envelope) -> ClientResult<()> {
        self.send_raw_datagram(envelope.encode_datagram())
    }

    /// Sends raw bytes as one datagram (escape hatch for tests).
    pub fn send_raw_datagram(&mut self, datagram: Bytes) -> ClientResult<()> {
        let link = &mut self.link;
        if link.closed {
            return Err(ClientError::Closed);
        }
        match link.conn.max_datagram_size() {
            Some(max) if datagram.len() <= max => {}
            max => {
                return Err(ClientError::Config(format!(
                    "datagram of {} bytes exceeds the current maximum {max:?}",
                    datagram.len()
                )));
            }
        }
        link.conn
            .send_datagram(datagram)
            .map_err(|e| ClientError::Send(e.to_string()))
    }

    /// Writes raw bytes on the reliable stream (escape hatch for tests).
    pub async fn send_raw_stream(&mut self, bytes: &[u8]) -> ClientResult<()> {
        self.link.write_reliable(bytes).await
    }

    /// Writes raw bytes on a fresh unidirectional stream and finishes it
    /// (how clients that send one stream per envelope behave).
    pub async fn send_raw_uni_stream(&mut self, bytes: &[u8]) -> ClientResult<()> {
        let mut stream = self.link.conn.open_uni().await.map_err(send_error)?;
        stream.write_all(bytes).await.map_err(send_error)?;
        stream.finish().map_err(send_error)
    }

    /// The connection's current maximum datagram payload (None: datagrams
    /// unsupported).
    pub fn max_datagram_size(&self) -> Option<usize> {
        self.link.conn.max_datagram_size()
    }

    /// Reports the local position as a datagram (kind 1, unreliable).
    pub fn send_position_unreliable(&mut self, x: f32, y: f32) -> ClientResult<()> {
        self.send_unreliable(&link::position(x, y))
    }

    /// Envelopes received as datagrams so far (diagnostics: which path an
    /// envelope took).
    pub fn datagrams_received(&self) -> u64 {
        self.link.datagrams_received
    }
}

impl QuicLink {
    async fn write_reliable(&mut self, bytes: &[u8]) -> ClientResult<()> {
        if self.closed {
            return Err(ClientError::Closed);
        }
        if self.send.is_none() {
            let (send, _recv) = self.conn.open_bi().await.map_err(send_error)?;
            self.send = Some(send);
        }
        let Some(send) = self.send.as_mut() else {
            return Err(ClientError::Closed);
        };
        send.write_all(bytes).await.map_err(send_error)
    }

    /// Next envelope from the wire: complete frames of the current stream
    /// first, then whichever of stream data and datagrams is ready
    /// (preferring stream data).
    async fn read_wire(&mut self) -> ClientResult<Option<Envelope>> {
        loop {
            if let Some(envelope) = link::next_buffered(&mut self.inbound)? {
                return Ok(Some(envelope));
            }
            if self.closed {
                return Ok(None);
            }
            let wire = {
                let conn = &self.conn;
                let current = &mut self.current;
                tokio::select! {
                    biased;
                    wire = next_stream_data(conn, current) => wire,
                    datagram = conn.read_datagram() => match datagram {
                        Ok(d) => Wire::Datagram(d),
                        // Let the stream branch drain what already arrived.
                        Err(_) => next_stream_data(conn, current).await,
                    },
                }
            };
            match wire {
                Wire::Chunk(chunk) => self.inbound.handle_bytes(&chunk),
                Wire::StreamEnd if self.inbound.buffered() == 0 => {}
                Wire::StreamEnd => {
                    return Err(link::ended_inside_frame(
                        &mut self.inbound,
                        "server stream ended",
                    ));
                }
                Wire::Datagram(d) => match decode_datagram_bytes(d) {
                    Ok(envelope) => {
                        self.datagrams_received += 1;
                        return Ok(Some(envelope));
                    }
                    Err(e) => tracing::debug!(error = %e, "ignored a malformed datagram"),
                },
                Wire::Gone(err) => {
                    self.closed = true;
                    if let quinn::ConnectionError::ApplicationClosed(close) = err {
                        let code = u16::try_from(close.error_code.into_inner()).unwrap_or(u16::MAX);
                        let reason = String::from_utf8_lossy(&close.reason).into_owned();
                        tracing::debug!(code, "citadel server closed the connection");
                        self.close_reason = Some((code, reason));
                    }
                    return Ok(None);
                }
            }
        }
    }
}

/// Data from the current server stream, accepting the next one (in id
/// order) when it ends. Cancel-safe: nothing is consumed unless returned.
async fn next_stream_data(
    conn: &quinn::Connection,
    current: &mut Option<quinn::RecvStream>,
) -> Wire {
    let stream = match current {
        Some(stream) => stream,
        None => match conn.accept_uni().await {
            Ok(stream) => current.insert(stream),
            Err(err) => return Wire::Gone(err),
        },
    };
    match stream.read_chunk(READ_CHUNK, true).await {
        Ok(Some(chunk)) => Wire::Chunk(chunk.bytes),
        Ok(None) => {
            *current = None;
            Wire::StreamEnd
        }
        Err(quinn::ReadError::ConnectionLost(err)) => Wire::Gone(err),
        Err(_) => {
            // Reset by the server: the next stream carries on.
            *current = None;
            Wire::StreamEnd
        }
    }
}

impl sealed::Wire for QuicLink {
    async fn send_frames(&mut self, frames: Bytes) -> ClientResult<()> {
        self.write_reliable(&frames).await
    }

    async fn read_envelope(&mut self) -> ClientResult<Option<Envelope>> {
        self.read_wire().await
    }

    async fn close(&mut self) -> ClientResult<()> {
        if self.closed {
            return Ok(());
        }
        if let Some(mut send) = self.send.take() {
            let _ = send.finish();
            let _ = tokio::time::timeout(CLOSE_FLUSH, send.stopped()).await;
        }
        self.conn
            .close(quinn::VarInt::from_u32(CLOSE_NORMAL), b"closed");
        self.closed = true;
        let _ = tokio::time::timeout(CLOSE_FLUSH, self.endpoint.wait_idle()).await;
        Ok(())
    }

    fn close_reason(&self) -> Option<(u16, String)> {
        self.close_reason.clone()
    }
}

fn send_error(err: impl fmt::Display) -> ClientError {
    ClientError::Send(err.to_string())
}

/// The root store of a WebPKI check: the given roots, or the platform's.
fn root_store(trust: &ServerTrust) -> ClientResult<Option<rustls::RootCertStore>> {
    let certs = match trust {
        ServerTrust::SystemRoots => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(ClientError::Connect(format!(
                    "no trusted root certificates found on this system ({} errors)",
                    found.errors.len()
                )));
            }
            found.certs
        }
        ServerTrust::Pinned(_) | ServerTrust::InsecureDev => return Ok(None),
    };
    let mut store = rustls::RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(ClientError::Config(
            "none of the root certificates could be parsed".into(),
        ));
    }
    Ok(Some(store))
}

fn client_config(trust: ServerTrust) -> ClientResult<quinn::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ClientError::Config(e.to_string()))?;
    let mut tls = match root_store(&trust)? {
        Some(roots) => builder.with_root_certificates(roots).with_no_client_auth(),
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier { trust, provider }))
            .with_no_client_auth(),
    };
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| ClientError::Config(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport
        .max_concurrent_uni_streams(quinn::VarInt::from_u32(1024))
        .keep_alive_interval(Some(Duration::from_secs(5)));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Checks the leaf against the pinned certificates (or not at all in
/// insecure dev mode); handshake signatures are always verified.
#[derive(Debug)]
struct PinnedVerifier {
    trust: ServerTrust,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.trust {
            ServerTrust::InsecureDev => Ok(ServerCertVerified::assertion()),
            ServerTrust::Pinned(pinned) if pinned.iter().any(|c| c == end_entity) => {
                Ok(ServerCertVerified::assertion())
            }
            // SystemRoots uses rustls's WebPKI verifier instead.
            ServerTrust::Pinned(_) | ServerTrust::SystemRoots => Err(
                rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
            ),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Reads a PEM certificate file (e.g. the node's `data/dev-cert.pem`) for
/// [`ServerTrust::Pinned`].
pub fn load_pem_certificates(path: &std::path::Path) -> ClientResult<Vec<CertificateDer<'static>>> {
    use rustls_pki_types::pem::PemObject as _;
    CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| ClientError::Config(format!("certificate file: {e}")))
}
