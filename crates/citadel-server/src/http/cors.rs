//! CORS for the player API (`/v1/*`): lets a game page served from another
//! origin call the auth, session and profile routes and read
//! `/v1/webtransport`. `http.cors_allowed_origins` lists the origins
//! (`"*"` = any, the default; empty = no CORS headers, browsers then block
//! cross-origin reads). Credentials travel in the `Authorization` header
//! and request bodies, never in cookies, so a foreign page gains nothing it
//! does not already hold: `Access-Control-Allow-Credentials` is never sent.
//!
//! What it is not: access control (the routes authenticate every call) or
//! CORS for `/health`, `/status`, `/metrics` and `/demo`. Call order: one
//! middleware layer around every route; preflights (`OPTIONS` with
//! `Access-Control-Request-Method`) are answered here with 204.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// `http.cors_allowed_origins`, shared by every request.
#[derive(Debug, Clone, Default)]
pub struct CorsOrigins(pub Arc<[String]>);

/// Methods and request headers a preflight may ask for.
const ALLOW_METHODS: &str = "GET, POST, PATCH, OPTIONS";
const ALLOW_HEADERS: &str = "authorization, content-type";
/// Response headers a page may read (429 answers carry Retry-After).
const EXPOSE_HEADERS: &str = "retry-after";
/// How long a browser may cache a preflight (seconds).
const MAX_AGE: &str = "600";

/// The middleware.
pub async fn layer(State(origins): State<CorsOrigins>, req: Request, next: Next) -> Response {
    if !req.uri().path().starts_with("/v1/") {
        return next.run(req).await;
    }
    let allowed = allowed_origin(&origins.0, req.headers().get(header::ORIGIN));
    let preflight = req.method() == Method::OPTIONS
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    if let Some(origin) = allowed {
        decorate(response.headers_mut(), origin, preflight);
    }
    response
}

/// The `Access-Control-Allow-Origin` value for `origin`, if allowed.
fn allowed_origin(allowed: &[String], origin: Option<&HeaderValue>) -> Option<HeaderValue> {
    if allowed.iter().any(|o| o == "*") {
        return Some(HeaderValue::from_static("*"));
    }
    let origin = origin?;
    let text = origin.to_str().ok()?;
    allowed
        .iter()
        .any(|o| o.eq_ignore_ascii_case(text))
        .then(|| origin.clone())
}

fn decorate(headers: &mut HeaderMap, origin: HeaderValue, preflight: bool) {
    let specific = origin != "*";
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    if specific {
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
    if preflight {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(ALLOW_HEADERS),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(MAX_AGE),
        );
    } else {
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSE_HEADERS),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_allows_any_origin_and_lists_match_exactly() {
        let any = vec!["*".to_string()];
        let page = HeaderValue::from_static("https://game.example");
        assert_eq!(allowed_origin(&any, Some(&page)).unwrap(), "*");
        assert_eq!(allowed_origin(&any, None).unwrap(), "*");
        let list = vec!["https://game.example".to_string()];
        assert_eq!(allowed_origin(&list, Some(&page)).unwrap(), page);
        let other = HeaderValue::from_static("https://evil.example");
        assert!(allowed_origin(&list, Some(&other)).is_none());
        assert!(allowed_origin(&list, None).is_none());
        assert!(allowed_origin(&[], Some(&page)).is_none());
    }
}
