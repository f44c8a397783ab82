//! Opaque secrets and ids: 256-bit random session tokens (stored only as
//! SHA-256 hashes), loggable session handles, account ids.
//!
//! Formats follow the reference so clients that display or length-check
//! them keep working: `cit.access.` / `cit.refresh.` + 43 base64url chars,
//! `tref-` + 22 chars, `user-` + 22 chars. Clients must not parse them.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// Prefix of access tokens.
pub const ACCESS_PREFIX: &str = "cit.access.";
/// Prefix of refresh tokens.
pub const REFRESH_PREFIX: &str = "cit.refresh.";
/// Longest secret accepted anywhere (longer is malformed).
pub const MAX_SECRET_BYTES: usize = 4096;

fn random_b64<const N: usize>() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// A fresh access secret.
pub fn new_access_token() -> Result<String, getrandom::Error> {
    Ok(format!("{ACCESS_PREFIX}{}", random_b64::<32>()?))
}

/// A fresh refresh secret.
pub fn new_refresh_token() -> Result<String, getrandom::Error> {
    Ok(format!("{REFRESH_PREFIX}{}", random_b64::<32>()?))
}

/// A fresh session handle (loggable, never a credential).
pub fn new_session_id() -> Result<String, getrandom::Error> {
    Ok(format!("tref-{}", random_b64::<16>()?))
}

/// A fresh account id.
pub fn new_user_id() -> Result<String, getrandom::Error> {
    Ok(format!("user-{}", random_b64::<16>()?))
}

/// SHA-256 of `text`, hex. Used for token hashes and rate-limit keys.
pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `token` is syntactically possible (length, printable ASCII).
pub fn well_formed(token: &str) -> bool {
    !token.is_empty()
        && token.len() <= MAX_SECRET_BYTES
        && token.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_uniqueness() {
        let a = new_access_token().unwrap();
        assert!(a.starts_with(ACCESS_PREFIX) && a.len() == ACCESS_PREFIX.len() + 43);
        assert_ne!(a, new_access_token().unwrap());
        assert_eq!(new_session_id().unwrap().len(), 5 + 22);
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!well_formed("has space") && !well_formed(""));
    }
}
