//! Accounts and sessions: device/custom/email sign-in (log in or register),
//! profile read/update, exact user lookup, refresh with rotation, logout,
//! and realtime token validation.
//!
//! Rules (services.md §2): every credential failure is the same
//! `AuthenticationFailed`; admission limits are charged before any
//! credential work and a refused request consumes no counter; secrets are
//! stored only as hashes (tokens) or Argon2id verifiers (passwords) and
//! never logged. Call order: build with [`AccountService::new`], then the
//! per-route methods; [`AccountService::validate_access`] backs the
//! realtime handshake.

use std::net::IpAddr;
use std::sync::Arc;

use argon2::Argon2;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

use super::tokens::{self, sha256_hex};
use super::validation;
use crate::config::{AuthenticationConfig, RateRule};
use crate::gateway::handshake::{SessionIdentity, SessionValidator};
use crate::store::{
    AccountRecord, AccountUpdate, CredentialKind, NewAccount, RateCharge, Store, StoreError,
    TokenHashes,
};
use crate::util::BoxFuture;

/// A service failure, mapped to an HTTP answer in one place (`http::error`).
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// Malformed input; the message is client-safe.
    #[error("invalid request: {0}")]
    InvalidRequest(&'static str),
    /// Any credential or token failure (deliberately one answer).
    #[error("authentication failed")]
    AuthenticationFailed,
    /// A uniqueness clash (username taken).
    #[error("conflict: {0}")]
    Conflict(&'static str),
    /// An admission limit; retry after this many seconds.
    #[error("rate limited")]
    RateLimited {
        /// Seconds until a retry may succeed.
        retry_after_secs: u64,
    },
    /// Our failure; details are logged, never returned.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Conflict(what) => ServiceError::Conflict(what),
            other => ServiceError::Internal(other.to_string()),
        }
    }
}

/// Token pair returned by sign-in and refresh (secrets: never log it).
#[derive(Clone, serde::Serialize)]
pub struct TokenPair {
    /// Access token.
    pub token: String,
    /// Refresh token.
    pub refresh_token: String,
    /// Account id.
    pub user_id: String,
    /// Username.
    pub username: String,
    /// Whether this call registered the account.
    pub created: bool,
}

impl std::fmt::Debug for TokenPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenPair")
            .field("created", &self.created)
            .finish_non_exhaustive()
    }
}

/// A device, custom or email sign-in request after JSON decoding.
#[derive(Clone, Default)]
pub struct SignIn {
    /// Device id, custom id, or raw email.
    pub id: String,
    /// Password (email only).
    pub password: Option<String>,
    /// Register an unknown id.
    pub create: bool,
    /// Username when registering.
    pub username: Option<String>,
    /// Display name when registering.
    pub display_name: Option<String>,
    /// Metadata object text when registering.
    pub metadata: Option<String>,
}

/// The accounts and sessions service.
pub struct AccountService {
    store: Arc<dyn Store>,
    config: AuthenticationConfig,
    node_id: String,
}

impl std::fmt::Debug for AccountService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountService")
            .field("backend", &self.store.backend())
            .finish_non_exhaustive()
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn internal(e: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(e.to_string())
}

impl AccountService {
    /// A service over `store`; sessions record `node_id` as their owner.
    pub fn new(store: Arc<dyn Store>, config: AuthenticationConfig, node_id: String) -> Self {
        AccountService {
            store,
            config,
            node_id,
        }
    }

    /// The store (for operators and tests).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    async fn admit(&self, rules: &[(&str, &RateRule, &str)], now: i64) -> Result<(), ServiceError> {
        let charges = rules
            .iter()
            .map(|(name, rule, key)| {
                let window = rule.window_ms as i64;
                RateCharge {
                    key_hash: sha256_hex(&format!("{name}\u{0}{key}")),
                    window_start: now - now.rem_euclid(window),
                    limit: rule.limit,
                }
            })
            .collect();
        if self.store.charge_all(charges).await? {
            return Ok(());
        }
        let longest = rules
            .iter()
            .map(|(_, r, _)| r.window_ms)
            .max()
            .unwrap_or(1000);
        Err(ServiceError::RateLimited {
            retry_after_secs: longest.div_ceil(1000),
        })
    }

    async fn issue(
        &self,
        account: &AccountRecord,
        created: bool,
        now: i64,
    ) -> Result<TokenPair, ServiceError> {
        let token = tokens::new_access_token().map_err(internal)?;
        let refresh_token = tokens::new_refresh_token().map_err(internal)?;
        let session_id = tokens::new_session_id().map_err(internal)?;
        let hashes = self.hashes(&token, &refresh_token, now);
        self.store
            .create_session(&session_id, &account.user_id, hashes, &self.node_id, now)
            .await?;
        Ok(TokenPair {
            token,
            refresh_token,
            user_id: account.user_id.clone(),
            username: account.username.clone(),
            created,
        })
    }

    fn hashes(&self, access: &str, refresh: &str, now: i64) -> TokenHashes {
        TokenHashes {
            access_hash: sha256_hex(access),
            refresh_hash: sha256_hex(refresh),
            access_expires_at: now + (self.config.access_token_ttl_secs as i64) * 1000,
            refresh_expires_at: now + (self.config.refresh_token_ttl_secs as i64) * 1000,
        }
    }

    /// `POST /v1/auth/device` and `/v1/auth/custom`.
    pub async fn sign_in_with_id(
        &self,
        kind: CredentialKind,
        req: SignIn,
        peer: IpAddr,
    ) -> Result<TokenPair, ServiceError> {
        validation::check_id(&req.id).map_err(ServiceError::InvalidRequest)?;
        self.check_registration_fields(&req)?;
        let now = now_ms();
        self.admit_sign_in(&req, peer, None, now).await?;
        if let Some((account, _)) = self.store.find_by_credential(kind, &req.id).await? {
            return self.log_in(account, now).await;
        }
        if !req.create {
            return Err(ServiceError::AuthenticationFailed);
        }
        self.register(kind, req.id.clone(), None, &req, now).await
    }

    /// `POST /v1/auth/email`.
    pub async fn sign_in_with_email(
        &self,
        req: SignIn,
        peer: IpAddr,
    ) -> Result<TokenPair, ServiceError> {
        let email = validation::normalize_email(&req.id).map_err(ServiceError::InvalidRequest)?;
        let password = req.password.clone().unwrap_or_default();
        validation::check_password(&password).map_err(ServiceError::InvalidRequest)?;
        self.check_registration_fields(&req)?;
        let now = now_ms();
        self.admit_sign_in(&req, peer, Some(&email), now).await?;
        match self
            .store
            .find_by_credential(CredentialKind::Email, &email)
            .await?
        {
            Some((account, Some(verifier))) => {
                if verify_password(password, verifier).await {
                    self.log_in(account, now).await
                } else {
                    Err(ServiceError::AuthenticationFailed)
                }
            }
            Some((_, None)) => Err(ServiceError::AuthenticationFailed),
            None if !req.create => {
                // Same cost as a real check, so timing does not reveal existence.
                let _ = verify_password(password, dummy_verifier().await).await;
                Err(ServiceError::AuthenticationFailed)
            }
            None => {
                let verifier = hash_password(password).await?;
                self.register(CredentialKind::Email, email, Some(verifier), &req, now)
                    .await
            }
        }
    }

    fn check_registration_fields(&self, req: &SignIn) -> Result<(), ServiceError> {
        if let Some(name) = &req.username {
            validation::check_username(name).map_err(ServiceError::InvalidRequest)?;
        }
        if let Some(name) = &req.display_name {
            validation::check_display_name(name).map_err(ServiceError::InvalidRequest)?;
        }
        if req.create && req.username.is_none() {
            return Err(ServiceError::InvalidRequest(
                "username is required when create is true",
            ));
        }
        Ok(())
    }

    async fn admit_sign_in(
        &self,
        req: &SignIn,
        peer: IpAddr,
        email: Option<&str>,
        now: i64,
    ) -> Result<(), ServiceError> {
        let limits = &self.config.limits;
        let ip = peer.to_string();
        let mut rules = vec![("source", &limits.source, ip.as_str())];
        if let Some(email) = email {
            rules.push(("email", &limits.email, email));
        }
        if req.create {
            rules.push((
                "registration_source",
                &limits.registration_source,
                ip.as_str(),
            ));
        }
        self.admit(&rules, now).await
    }

    async fn log_in(&self, account: AccountRecord, now: i64) -> Result<TokenPair, ServiceError> {
        if account.disabled {
            return Err(ServiceError::AuthenticationFailed);
        }
        self.issue(&account, false, now).await
    }

    async fn register(
        &self,
        kind: CredentialKind,
        credential: String,
        secret: Option<String>,
        req: &SignIn,
        now: i64,
    ) -> Result<TokenPair, ServiceError> {
        let metadata = req.metadata.clone().unwrap_or_else(|| "{}".to_owned());
        let new = NewAccount {
            user_id: tokens::new_user_id().map_err(internal)?,
            username: req.username.clone().unwrap_or_default(),
            display_name: req.display_name.clone(),
            metadata,
            kind,
            credential: credential.clone(),
            secret,
            now,
        };
        match self.store.create_account(new).await {
            Ok(account) => self.issue(&account, true, now).await,
            Err(StoreError::Conflict(_)) => {
                // Either the username is taken, or a concurrent call registered
                // this very credential: then this call is a login.
                if let Some((account, _)) = self.store.find_by_credential(kind, &credential).await?
                    && kind != CredentialKind::Email
                {
                    return self.log_in(account, now).await;
                }
                Err(ServiceError::Conflict("username taken"))
            }
            Err(other) => Err(other.into()),
        }
    }

    /// The live session behind an access token.
    pub async fn session_for(&self, access_token: &str) -> Result<SessionIdentity, ServiceError> {
        if !tokens::well_formed(access_token) {
            return Err(ServiceError::AuthenticationFailed);
        }
        let record = self
            .store
            .session_by_access(&sha256_hex(access_token), now_ms())
            .await?
            .ok_or(ServiceError::AuthenticationFailed)?;
        Ok(SessionIdentity {
            user_id: record.user_id,
            session_id: record.session_id,
        })
    }

    /// `GET /v1/account`.
    pub async fn account(&self, access_token: &str) -> Result<AccountRecord, ServiceError> {
        let session = self.session_for(access_token).await?;
        self.store
            .account(&session.user_id)
            .await?
            .filter(|a| !a.disabled)
            .ok_or(ServiceError::AuthenticationFailed)
    }

    /// `PATCH /v1/account`.
    pub async fn update_account(
        &self,
        access_token: &str,
        update: AccountUpdate,
    ) -> Result<AccountRecord, ServiceError> {
        if update.username.is_none() && update.display_name.is_none() {
            return Err(ServiceError::InvalidRequest("nothing to update"));
        }
        if let Some(name) = &update.username {
            validation::check_username(name).map_err(ServiceError::InvalidRequest)?;
        }
        if let Some(Some(name)) = &update.display_name {
            validation::check_display_name(name).map_err(ServiceError::InvalidRequest)?;
        }
        let session = self.session_for(access_token).await?;
        match self
            .store
            .update_account(&session.user_id, update, now_ms())
            .await
        {
            Ok(Some(account)) => Ok(account),
            Ok(None) => Err(ServiceError::AuthenticationFailed),
            Err(StoreError::Conflict(_)) => Err(ServiceError::Conflict("username taken")),
            Err(other) => Err(other.into()),
        }
    }

    /// `POST /v1/users/lookup`: at least one and at most 100 keys.
    pub async fn lookup(
        &self,
        access_token: &str,
        user_ids: Vec<String>,
        usernames: Vec<String>,
    ) -> Result<Vec<AccountRecord>, ServiceError> {
        let keys = user_ids.len() + usernames.len();
        if keys == 0 || keys > 100 {
            return Err(ServiceError::InvalidRequest(
                "give 1-100 user_ids and usernames in total",
            ));
        }
        if user_ids
            .iter()
            .chain(&usernames)
            .any(|k| k.is_empty() || k.len() > validation::MAX_NAME_BYTES)
        {
            return Err(ServiceError::InvalidRequest("keys must be 1-128 bytes"));
        }
        self.session_for(access_token).await?;
        Ok(self.store.lookup(user_ids, usernames).await?)
    }

    /// `POST /v1/session/refresh`: a fresh pair; the used refresh token dies.
    pub async fn refresh(&self, refresh_token: &str) -> Result<TokenPair, ServiceError> {
        if !tokens::well_formed(refresh_token) {
            return Err(ServiceError::AuthenticationFailed);
        }
        let now = now_ms();
        let token = tokens::new_access_token().map_err(internal)?;
        let refresh = tokens::new_refresh_token().map_err(internal)?;
        let record = self
            .store
            .rotate(
                &sha256_hex(refresh_token),
                self.hashes(&token, &refresh, now),
                now,
            )
            .await?
            .ok_or(ServiceError::AuthenticationFailed)?;
        let account = self
            .store
            .account(&record.user_id)
            .await?
            .ok_or(ServiceError::AuthenticationFailed)?;
        Ok(TokenPair {
            token,
            refresh_token: refresh,
            user_id: account.user_id,
            username: account.username,
            created: false,
        })
    }

    /// `POST /v1/session/logout`: revokes exactly one session. Returns the
    /// revoked session id (None when nothing matched, which is still a 204).
    pub async fn logout(
        &self,
        access_token: Option<&str>,
        refresh_token: Option<&str>,
    ) -> Result<Option<String>, ServiceError> {
        for t in access_token.iter().chain(refresh_token.iter()) {
            if !tokens::well_formed(t) {
                return Err(ServiceError::AuthenticationFailed);
            }
        }
        let (by_access, by_refresh) = self
            .store
            .session_id_by_hash(
                access_token.map(sha256_hex).as_deref(),
                refresh_token.map(sha256_hex).as_deref(),
            )
            .await?;
        let target = match (
            access_token.is_some(),
            refresh_token.is_some(),
            by_access,
            by_refresh,
        ) {
            (true, true, Some(a), Some(r)) if a == r => Some(a),
            (true, true, _, _) => None, // mismatched pair revokes nothing
            (true, false, a, _) => a,
            (false, true, _, r) => r,
            (false, false, _, _) => {
                return Err(ServiceError::InvalidRequest(
                    "give a bearer token or a refresh_token",
                ));
            }
        };
        if let Some(session_id) = &target {
            self.store.revoke(session_id, "logout", now_ms()).await?;
        }
        Ok(target)
    }

    /// Operator action: disable (or re-enable) an account. Its live
    /// connections close within the revocation poll interval.
    pub async fn set_disabled(&self, user_id: &str, disabled: bool) -> Result<bool, ServiceError> {
        Ok(self.store.set_disabled(user_id, disabled, now_ms()).await?)
    }
}

/// A verifier of a random password nobody knows, computed once: checking
/// against it costs the same as a real check (equal-cost failure path).
async fn dummy_verifier() -> String {
    static DUMMY: tokio::sync::OnceCell<String> = tokio::sync::OnceCell::const_new();
    DUMMY
        .get_or_init(|| async {
            let secret =
                tokens::new_access_token().unwrap_or_else(|_| "fallback-dummy-password".into());
            hash_password(secret).await.unwrap_or_default()
        })
        .await
        .clone()
}

async fn hash_password(password: String) -> Result<String, ServiceError> {
    tokio::task::spawn_blocking(move || {
        let mut salt = [0u8; 16];
        getrandom::fill(&mut salt).map_err(internal)?;
        let salt = SaltString::encode_b64(&salt).map_err(internal)?;
        Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(internal)
    })
    .await
    .map_err(internal)?
}

async fn verify_password(password: String, verifier: String) -> bool {
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&verifier)
            .map(|parsed| {
                Argon2::default()
                    .verify_password(password.as_bytes(), &parsed)
                    .is_ok()
            })
            .unwrap_or(false)
    })
    .await
    .unwrap_or(false)
}

/// Validates realtime KIND_AUTH tokens against the store.
pub struct StoreSessionValidator {
    /// The service.
    pub accounts: Arc<AccountService>,
}

impl SessionValidator for StoreSessionValidator {
    fn validate(&self, token: &str) -> BoxFuture<Option<SessionIdentity>> {
        let accounts = self.accounts.clone();
        let token = token.to_owned();
        Box::pin(async move {
            match accounts.session_for(&token).await {
                Ok(identity) => Some(identity),
                Err(ServiceError::AuthenticationFailed) => None,
                Err(err) => {
                    tracing::warn!(error = %err, "session validation failed");
                    None
                }
            }
        })
    }
}
