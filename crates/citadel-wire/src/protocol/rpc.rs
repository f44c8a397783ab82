//! Kinds 3 and 4: RPC request and its caller-only response.
//!
//! Request: `request_id u64 | method_len u16 | method UTF-8 | payload`.
//! Response: `request_id u64 | status u8 | payload`. All big-endian.
//! Encoders clamp a method above 65 535 bytes at a UTF-8 boundary.

use bytes::Bytes;

use super::{KIND_RPC_REQUEST, KIND_RPC_RESPONSE, RPC_STATUS_OK};
use crate::body::{ByteReader, put_string_u16, wire_body};
use crate::error::DecodeError;

/// A kind-3 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcRequest {
    /// Client correlation id, echoed in the response.
    pub request_id: u64,
    /// Method name.
    pub method: String,
    /// Opaque request payload.
    pub payload: Bytes,
}

impl RpcRequest {
    /// Appends the body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request_id.to_be_bytes());
        put_string_u16(out, &self.method);
        out.extend_from_slice(&self.payload);
    }

    /// Decodes; a short header, an overrunning method or non-UTF-8 method is
    /// invalid (and cannot be correlated).
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let request_id = r.u64()?;
        let method = r.string_u16()?;
        Ok(RpcRequest {
            request_id,
            method,
            payload: Bytes::copy_from_slice(r.rest()),
        })
    }
}
wire_body!(RpcRequest, KIND_RPC_REQUEST);

/// A kind-4 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcResponse {
    /// Echoed correlation id.
    pub request_id: u64,
    /// `RPC_STATUS_OK` or `RPC_STATUS_ERROR`.
    pub status: u8,
    /// Reply bytes, or a short UTF-8 error message.
    pub payload: Bytes,
}

impl RpcResponse {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.status == RPC_STATUS_OK
    }

    /// The error message of a failed call (lossy UTF-8).
    pub fn error_message(&self) -> Option<String> {
        (!self.is_ok()).then(|| String::from_utf8_lossy(&self.payload).into_owned())
    }

    /// Appends the body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.request_id.to_be_bytes());
        out.push(self.status);
        out.extend_from_slice(&self.payload);
    }

    /// Decodes; shorter than 9 bytes is invalid.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = ByteReader::new(body);
        let request_id = r.u64()?;
        let status = r.u8()?;
        Ok(RpcResponse {
            request_id,
            status,
            payload: Bytes::copy_from_slice(r.rest()),
        })
    }
}
wire_body!(RpcResponse, KIND_RPC_RESPONSE);

/// Builds a kind-3 body.
pub fn encode_rpc_request(request_id: u64, method: &str, payload: &[u8]) -> Vec<u8> {
    RpcRequest {
        request_id,
        method: method.to_owned(),
        payload: Bytes::copy_from_slice(payload),
    }
    .encode()
}

/// Parses a kind-3 body; `None` when it cannot be safely correlated.
pub fn decode_rpc_request(body: &[u8]) -> Option<RpcRequest> {
    RpcRequest::decode(body).ok()
}

/// Builds a kind-4 body.
pub fn encode_rpc_response(request_id: u64, status: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + payload.len());
    out.extend_from_slice(&request_id.to_be_bytes());
    out.push(status);
    out.extend_from_slice(payload);
    out
}

/// Parses a kind-4 body; `None` if shorter than its 9-byte header.
pub fn decode_rpc_response(body: &[u8]) -> Option<RpcResponse> {
    RpcResponse::decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::RPC_STATUS_ERROR;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn request_layout() -> TestResult {
        let body = encode_rpc_request(7, "ping", b"!");
        assert_eq!(
            body,
            [0, 0, 0, 0, 0, 0, 0, 7, 0, 4, b'p', b'i', b'n', b'g', b'!']
        );
        let req = decode_rpc_request(&body).ok_or("request did not decode")?;
        assert_eq!(
            (req.request_id, req.method.as_str(), &req.payload[..]),
            (7, "ping", &b"!"[..])
        );
        assert!(decode_rpc_request(&body[..9]).is_none());
        assert!(decode_rpc_request(&body[..12]).is_none());
        let mut bad = body.clone();
        bad[10] = 0xFF;
        assert!(decode_rpc_request(&bad).is_none());
        Ok(())
    }

    #[test]
    fn long_methods_are_clamped_consistently() -> TestResult {
        let method = "é".repeat(40_000);
        let req = decode_rpc_request(&encode_rpc_request(1, &method, b""))
            .ok_or("long-method request did not decode")?;
        assert_eq!(req.method.len(), 65_534);
        Ok(())
    }

    #[test]
    fn response_layout() -> TestResult {
        let body = encode_rpc_response(9, RPC_STATUS_ERROR, b"unknown method");
        let resp = decode_rpc_response(&body).ok_or("response did not decode")?;
        assert!(!resp.is_ok());
        assert_eq!(resp.error_message().as_deref(), Some("unknown method"));
        assert!(decode_rpc_response(&body[..8]).is_none());
        Ok(())
    }
}
