//! The TLS identity QUIC and WebTransport present: a PEM chain and key from
//! `[transport.tls]`, or a self-signed development certificate.
//!
//! Development certificate: ECDSA P-256, SAN `localhost` + `127.0.0.1`,
//! valid from one hour ago for [`DEV_CERT_LIFETIME`] in total (under the 14
//! days browsers accept for `serverCertificateHashes`). It is written to
//! `transport.tls.data_dir` (`dev-cert.pem`, `dev-key.pem` with mode 0600,
//! `dev-cert.expiry` holding the not-after Unix time) at first start, reused
//! across restarts, and regenerated when less than [`DEV_CERT_RENEW_BEFORE`]
//! remains (at start, and by [`TlsIdentity::needs_renewal`] checks while
//! running).
//!
//! What it is not: no ACME, no client certificates, no hot reload of
//! configured PEM files. Call order: [`install_crypto_provider`] once →
//! [`load_or_create`] → [`TlsIdentity::rustls_server_config`] (ALPN
//! `citadel/0` for QUIC, `h3` for WebTransport).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::TlsConfig;

/// ALPN protocol of the native QUIC transport.
pub const ALPN_CITADEL: &[u8] = b"citadel/0";

/// Total validity of a development certificate (browsers require < 14 days).
pub const DEV_CERT_LIFETIME: Duration = Duration::from_secs(13 * 24 * 3600);

/// A development certificate with less than this left is regenerated.
pub const DEV_CERT_RENEW_BEFORE: Duration = Duration::from_secs(3 * 24 * 3600);

/// The certificate chain and key in use, plus the leaf's SHA-256.
#[derive(Debug)]
pub struct TlsIdentity {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    /// SHA-256 of the leaf certificate's DER (`serverCertificateHashes`).
    pub leaf_sha256: [u8; 32],
    /// Not-after of a development certificate (None for configured PEM).
    pub dev_not_after: Option<SystemTime>,
}

/// The certificate QUIC and WebTransport present now, shared by the
/// renewal task (which replaces it), `GET /v1/webtransport` and the node's
/// handle (which read it). Empty when both UDP transports are off.
#[derive(Debug, Default)]
pub struct CurrentTls(RwLock<Option<Arc<TlsIdentity>>>);

impl CurrentTls {
    /// Holding `identity` (or nothing).
    pub fn new(identity: Option<Arc<TlsIdentity>>) -> Arc<Self> {
        Arc::new(CurrentTls(RwLock::new(identity)))
    }

    /// The identity in use.
    pub fn get(&self) -> Option<Arc<TlsIdentity>> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the identity in use (new handshakes already use the new
    /// one; this only changes what is reported).
    pub fn set(&self, identity: Arc<TlsIdentity>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Some(identity);
    }
}

/// Installs rustls' ring provider as the process default (idempotent).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl TlsIdentity {
    /// A copy of the private key.
    pub fn key(&self) -> PrivateKeyDer<'static> {
        self.key.clone_key()
    }

    /// The leaf hash as lowercase hex.
    pub fn leaf_sha256_hex(&self) -> String {
        self.leaf_sha256
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// True for a development certificate close to expiry.
    pub fn needs_renewal(&self, now: SystemTime) -> bool {
        self.dev_not_after
            .is_some_and(|end| end.duration_since(now).unwrap_or_default() < DEV_CERT_RENEW_BEFORE)
    }

    /// A rustls server config (TLS 1.3, ring) with the given ALPN list.
    pub fn rustls_server_config(&self, alpn: &[&[u8]]) -> anyhow::Result<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .context("TLS 1.3 with ring")?
            .with_no_client_auth()
            .with_single_cert(self.chain.clone(), self.key())
            .context("transport.tls: certificate and key do not match")?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }
}

/// Loads the configured PEM files, or the development certificate
/// (generating or renewing it as needed).
pub fn load_or_create(config: &TlsConfig) -> anyhow::Result<TlsIdentity> {
    if !config.certificate_file.is_empty() {
        return load_pem(
            Path::new(&config.certificate_file),
            Path::new(&config.private_key_file),
        );
    }
    let dir = PathBuf::from(&config.data_dir);
    let now = SystemTime::now();
    if let Ok(identity) = load_dev(&dir)
        && !identity.needs_renewal(now)
    {
        tracing::info!(dir = %dir.display(), "reusing the development TLS certificate");
        return Ok(identity);
    }
    let identity = create_dev(&dir, now)?;
    tracing::info!(
        dir = %dir.display(),
        sha256 = %identity.leaf_sha256_hex(),
        "generated a development TLS certificate"
    );
    Ok(identity)
}

fn load_pem(cert: &Path, key: &Path) -> anyhow::Result<TlsIdentity> {
    let chain = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("transport.tls.certificate_file {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("transport.tls.certificate_file {}", cert.display()))?;
    let Some(leaf) = chain.first() else {
        anyhow::bail!(
            "transport.tls.certificate_file {}: no certificate",
            cert.display()
        );
    };
    let leaf_sha256 = sha256(leaf);
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("transport.tls.private_key_file {}", key.display()))?;
    Ok(TlsIdentity {
        chain,
        key,
        leaf_sha256,
        dev_not_after: None,
    })
}

const DEV_CERT: &str = "dev-cert.pem";
const DEV_KEY: &str = "dev-key.pem";
const DEV_EXPIRY: &str = "dev-cert.expiry";

fn load_dev(dir: &Path) -> anyhow::Result<TlsIdentity> {
    let mut identity = load_pem(&dir.join(DEV_CERT), &dir.join(DEV_KEY))?;
    let expiry: u64 = std::fs::read_to_string(dir.join(DEV_EXPIRY))?
        .trim()
        .parse()?;
    identity.dev_not_after = Some(UNIX_EPOCH + Duration::from_secs(expiry));
    Ok(identity)
}

/// Generates, stores and returns a new development certificate.
pub fn create_dev(dir: &Path, now: SystemTime) -> anyhow::Result<TlsIdentity> {
    let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .context("generating the development key")?;
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .context("development certificate names")?;
    let not_before = now - Duration::from_secs(3600);
    let not_after = not_before + DEV_CERT_LIFETIME;
    params.not_before = time::OffsetDateTime::from(not_before);
    params.not_after = time::OffsetDateTime::from(not_after);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Citadel development");
    let cert = params
        .self_signed(&key_pair)
        .context("signing the development certificate")?;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("transport.tls.data_dir {}", dir.display()))?;
    std::fs::write(dir.join(DEV_CERT), cert.pem())?;
    write_secret(&dir.join(DEV_KEY), key_pair.serialize_pem().as_bytes())?;
    let expiry = not_after
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    std::fs::write(dir.join(DEV_EXPIRY), expiry.to_string())?;
    let leaf = cert.der().clone();
    Ok(TlsIdentity {
        leaf_sha256: sha256(&leaf),
        chain: vec![leaf],
        key: PrivateKeyDer::Pkcs8(key_pair.serialize_der().into()),
        dev_not_after: Some(not_after),
    })
}

fn write_secret(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

fn sha256(der: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("citadel-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn dev_certificate_is_created_reused_and_renewed() -> TestResult {
        install_crypto_provider();
        let dir = temp_dir("dev");
        let config = TlsConfig {
            data_dir: dir.display().to_string(),
            ..TlsConfig::default()
        };
        let first = load_or_create(&config)?;
        let again = load_or_create(&config)?;
        assert_eq!(first.leaf_sha256, again.leaf_sha256, "reused");
        let lifetime = first
            .dev_not_after
            .ok_or("dev certificate has no expiry")?
            .duration_since(SystemTime::now())?;
        assert!(lifetime < Duration::from_secs(14 * 24 * 3600));
        assert!(!first.needs_renewal(SystemTime::now()));
        assert!(first.needs_renewal(SystemTime::now() + Duration::from_secs(11 * 24 * 3600)));
        // An almost-expired certificate is replaced at start.
        std::fs::write(dir.join(DEV_EXPIRY), "1")?;
        let renewed = load_or_create(&config)?;
        assert_ne!(renewed.leaf_sha256, first.leaf_sha256);
        renewed.rustls_server_config(&[ALPN_CITADEL])?;
        let _ = std::fs::remove_dir_all(&dir);
        Ok(())
    }

    #[test]
    fn half_configured_pem_is_refused_by_validation_and_missing_files_fail() {
        let config = TlsConfig {
            certificate_file: "/nonexistent/cert.pem".into(),
            private_key_file: "/nonexistent/key.pem".into(),
            ..TlsConfig::default()
        };
        let err = load_or_create(&config).unwrap_err().to_string();
        assert!(err.contains("transport.tls.certificate_file"), "{err}");
    }
}
