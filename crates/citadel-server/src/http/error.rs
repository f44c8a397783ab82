//! The one place service failures become HTTP answers: status, the
//! `{code, message}` body, and `Retry-After` for 429. Internal details are
//! logged here and never sent.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use serde_json::json;

use crate::services::ServiceError;

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code string.
    pub code: &'static str,
    /// Short client-safe message.
    pub message: String,
    /// Seconds for `Retry-After` (429 only).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// 400 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            message: message.into(),
            retry_after: None,
        }
    }

    /// 401 `authentication_failed` (the same body for every credential failure).
    pub fn unauthenticated() -> Self {
        ApiError {
            status: StatusCode::UNAUTHORIZED,
            code: "authentication_failed",
            message: "authentication failed".into(),
            retry_after: None,
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> Self {
        match err {
            ServiceError::InvalidRequest(message) => ApiError::invalid(message),
            ServiceError::AuthenticationFailed => ApiError::unauthenticated(),
            ServiceError::Conflict(message) => ApiError {
                status: StatusCode::CONFLICT,
                code: "conflict",
                message: message.into(),
                retry_after: None,
            },
            ServiceError::RateLimited { retry_after_secs } => ApiError {
                status: StatusCode::TOO_MANY_REQUESTS,
                code: "rate_limited",
                message: "too many requests".into(),
                retry_after: Some(retry_after_secs),
            },
            ServiceError::Internal(detail) => {
                tracing::error!(error = %detail, "request failed");
                ApiError {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    code: "internal_error",
                    message: "internal error".into(),
                    retry_after: None,
                }
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            Json(json!({"code": self.code, "message": self.message})),
        )
            .into_response();
        if let Some(secs) = self.retry_after
            && let Ok(value) = HeaderValue::from_str(&secs.to_string())
        {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        response
    }
}
