//! Player API: sign-in (device, custom, email), profile, lookup, session
//! refresh and logout (services.md §2). Bodies are JSON objects of at most
//! 16 KiB; unknown fields are rejected; errors use the `{code, message}`
//! body. Tokens and passwords never reach logs or error bodies.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequest, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{ApiError, HttpState, MAX_BODY_BYTES};
use crate::services::AccountService;
use crate::services::accounts::SignIn;
use crate::services::live::LiveSessions;
use crate::store::{AccountRecord, AccountUpdate, CredentialKind};

/// The player routes.
pub fn routes() -> Router<HttpState> {
    Router::new()
        .route("/v1/auth/device", post(device))
        .route("/v1/auth/custom", post(custom))
        .route("/v1/auth/email", post(email))
        .route("/v1/account", get(get_account).patch(patch_account))
        .route("/v1/users/lookup", post(lookup))
        .route("/v1/session/refresh", post(refresh))
        .route("/v1/session/logout", post(logout))
}

/// A JSON body of at most [`MAX_BODY_BYTES`], unknown fields rejected by the
/// target type.
struct JsonBody<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _state: &S) -> Result<Self, Self::Rejection> {
        // A declared length over the cap is refused before any body byte
        // is read (the client may never send it).
        if axum::body::HttpBody::size_hint(req.body()).lower() > MAX_BODY_BYTES as u64 {
            return Err(ApiError::invalid("request body too large or unreadable"));
        }
        let bytes = axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES)
            .await
            .map_err(|_| ApiError::invalid("request body too large or unreadable"))?;
        parse(&bytes).map(JsonBody)
    }
}

fn parse<T: DeserializeOwned>(bytes: &Bytes) -> Result<T, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|_| ApiError::invalid("body must be valid JSON"))?;
    if !value.is_object() {
        return Err(ApiError::invalid("body must be a JSON object"));
    }
    // Field-level messages name the field, never its value.
    serde_json::from_slice(bytes).map_err(|e| ApiError::invalid(field_message(&e)))
}

fn field_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    for marker in ["unknown field `", "missing field `", "duplicate field `"] {
        if let Some(rest) = text.split(marker).nth(1)
            && let Some(name) = rest.split('`').next()
        {
            return format!("{marker}{name}`");
        }
    }
    "a field has the wrong type".into()
}

/// The bearer token, if the header is present and well-formed.
fn bearer(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| ApiError::unauthenticated())?;
    let token = text
        .strip_prefix("Bearer ")
        .or_else(|| text.strip_prefix("bearer "))
        .ok_or_else(ApiError::unauthenticated)?;
    Ok(Some(token.trim().to_owned()))
}

fn require_bearer(headers: &HeaderMap) -> Result<String, ApiError> {
    bearer(headers)?.ok_or_else(ApiError::unauthenticated)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdRequest {
    id: String,
    #[serde(default)]
    create: bool,
    username: Option<String>,
    display_name: Option<String>,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EmailRequest {
    email: String,
    password: String,
    #[serde(default)]
    create: bool,
    username: Option<String>,
    display_name: Option<String>,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

fn metadata_text(m: Option<serde_json::Map<String, serde_json::Value>>) -> Option<String> {
    m.map(|m| serde_json::Value::Object(m).to_string())
}

fn signed_in(pair: crate::services::TokenPair) -> Response {
    let status = if pair.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (status, Json(pair)).into_response()
}

async fn sign_in_with_id(
    accounts: Arc<AccountService>,
    kind: CredentialKind,
    peer: SocketAddr,
    req: IdRequest,
) -> Result<Response, ApiError> {
    let req = SignIn {
        id: req.id,
        password: None,
        create: req.create,
        username: req.username,
        display_name: req.display_name,
        metadata: metadata_text(req.metadata),
    };
    Ok(signed_in(
        accounts.sign_in_with_id(kind, req, peer.ip()).await?,
    ))
}

async fn device(
    State(accounts): State<Arc<AccountService>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    JsonBody(req): JsonBody<IdRequest>,
) -> Result<Response, ApiError> {
    sign_in_with_id(accounts, CredentialKind::Device, peer, req).await
}

async fn custom(
    State(accounts): State<Arc<AccountService>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    JsonBody(req): JsonBody<IdRequest>,
) -> Result<Response, ApiError> {
    sign_in_with_id(accounts, CredentialKind::Custom, peer, req).await
}

async fn email(
    State(accounts): State<Arc<AccountService>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    JsonBody(req): JsonBody<EmailRequest>,
) -> Result<Response, ApiError> {
    let req = SignIn {
        id: req.email,
        password: Some(req.password),
        create: req.create,
        username: req.username,
        display_name: req.display_name,
        metadata: metadata_text(req.metadata),
    };
    Ok(signed_in(
        accounts.sign_in_with_email(req, peer.ip()).await?,
    ))
}

fn profile(a: &AccountRecord) -> serde_json::Value {
    let mut v = json!({"user_id": a.user_id, "username": a.username});
    if let (Some(name), Some(obj)) = (&a.display_name, v.as_object_mut()) {
        obj.insert("display_name".into(), json!(name));
    }
    v
}

async fn get_account(
    State(accounts): State<Arc<AccountService>>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    let token = require_bearer(&headers)?;
    Ok(Json(profile(&accounts.account(&token).await?)))
}

/// `display_name`: absent = unchanged, `null` = clear, string = set.
fn double_option<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Option<String>>, D::Error> {
    Ok(Some(Option::deserialize(d)?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchRequest {
    username: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    display_name: Option<Option<String>>,
}

async fn patch_account(
    State(accounts): State<Arc<AccountService>>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<PatchRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let token = require_bearer(&headers)?;
    let update = AccountUpdate {
        username: req.username,
        display_name: req.display_name,
    };
    Ok(Json(profile(
        &accounts.update_account(&token, update).await?,
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LookupRequest {
    #[serde(default)]
    user_ids: Vec<String>,
    #[serde(default)]
    usernames: Vec<String>,
}

async fn lookup(
    State(accounts): State<Arc<AccountService>>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<LookupRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let token = require_bearer(&headers)?;
    let users = accounts.lookup(&token, req.user_ids, req.usernames).await?;
    Ok(Json(
        json!({"users": users.iter().map(profile).collect::<Vec<_>>()}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RefreshRequest {
    refresh_token: String,
}

async fn refresh(
    State(accounts): State<Arc<AccountService>>,
    JsonBody(req): JsonBody<RefreshRequest>,
) -> Result<Response, ApiError> {
    let pair = accounts.refresh(&req.refresh_token).await?;
    Ok((StatusCode::OK, Json(pair)).into_response())
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct LogoutRequest {
    refresh_token: Option<String>,
}

async fn logout(
    State(accounts): State<Arc<AccountService>>,
    State(live): State<Arc<LiveSessions>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    if body.len() > MAX_BODY_BYTES {
        return Err(ApiError::invalid("request body too large"));
    }
    let req: LogoutRequest = if body.iter().all(u8::is_ascii_whitespace) {
        LogoutRequest::default()
    } else {
        parse(&body)?
    };
    let access = bearer(&headers)?;
    if access.is_none() && req.refresh_token.is_none() {
        return Err(ApiError::unauthenticated());
    }
    if let Some(session_id) = accounts
        .logout(access.as_deref(), req.refresh_token.as_deref())
        .await?
    {
        live.close_session(&session_id);
    }
    Ok(StatusCode::NO_CONTENT)
}
