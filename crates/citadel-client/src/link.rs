//! What every client transport shares: the pending queue, RPC correlation,
//! the handshake, waiting for a kind, and the room / position envelopes.
//!
//! What it is: [`Link`] (the two primitives a transport provides: send one
//! reliable envelope, read the next envelope from the wire) and generic
//! helpers built on it, used by [`crate::WsClient`] and
//! [`crate::QuicClient`] so both behave identically. What it is not: public
//! API; the clients' methods document the behaviour.
//!
//! Call order: a client's public method calls the helper here, which calls
//! back into the client's [`Link`] methods.

use std::collections::VecDeque;

use bytes::Bytes;
use citadel_wire::protocol::{
    AuthResult, KIND_AUTH, KIND_AUTH_RESULT, KIND_POSITION, KIND_ROOM_JOINED, KIND_RPC_RESPONSE,
    MAX_FRAME_BODY_BYTES, RpcRequest, RpcResponse, encode_position,
};
use citadel_wire::room::{RoomCreate, RoomJoined};
use citadel_wire::{Envelope, WireBody};

use crate::error::{ClientError, ClientResult};
use crate::event::AuthOutcome;

/// Most envelopes a client keeps for a later `recv` while a helper
/// (`call_rpc`, `authenticate`, `wait_for_*`) waits for its reply.
///
/// Draining the queue with `recv` is the caller's duty. When it is full the
/// waiting helper stops *before* reading more from the connection and
/// returns `ClientError::Receive("client buffer full")`; nothing is
/// dropped, and the connection stays usable once the caller drains it (a
/// reply that arrives later is then returned by `recv` like any other
/// envelope).
pub const MAX_BUFFERED_ENVELOPES: usize = 65_536;

/// Envelopes read while a helper waited, plus the RPC id counter.
#[derive(Debug)]
pub(crate) struct Inbox {
    pub(crate) pending: VecDeque<Envelope>,
    next_request_id: u64,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox {
            pending: VecDeque::new(),
            next_request_id: 1,
        }
    }
}

impl Inbox {
    /// A monotonic, non-zero request id.
    fn next_id(&mut self) -> u64 {
        let id = self.next_request_id;
        self.next_request_id = self.next_request_id.wrapping_add(1).max(1);
        id
    }
}

/// The transport primitives the shared helpers need.
pub(crate) trait Link {
    fn inbox(&mut self) -> &mut Inbox;
    /// Sends one envelope on the reliable path.
    async fn send_reliable(&mut self, envelope: &Envelope) -> ClientResult<()>;
    /// Next envelope from the wire (the pending queue is not consulted);
    /// `Ok(None)` once closed.
    async fn read_envelope(&mut self) -> ClientResult<Option<Envelope>>;
}

pub(crate) async fn recv<L: Link>(link: &mut L) -> ClientResult<Option<Envelope>> {
    if let Some(envelope) = link.inbox().pending.pop_front() {
        return Ok(Some(envelope));
    }
    link.read_envelope().await
}

pub(crate) async fn authenticate<L: Link>(
    link: &mut L,
    token: Option<&str>,
) -> ClientResult<AuthOutcome> {
    let body = Bytes::copy_from_slice(token.unwrap_or_default().as_bytes());
    link.send_reliable(&Envelope::new(KIND_AUTH, body)).await?;
    let reply = wait_for_kind(link, KIND_AUTH_RESULT).await?;
    let result = AuthResult::decode(&reply.body)
        .map_err(|e| ClientError::Decode(format!("kind-6 auth result: {e}")))?;
    let outcome = AuthOutcome::from(result);
    tracing::debug!(
        accepted = outcome.is_accepted(),
        "citadel handshake finished"
    );
    Ok(outcome)
}

pub(crate) async fn call_rpc<L: Link>(
    link: &mut L,
    method: &str,
    payload: &[u8],
) -> ClientResult<Bytes> {
    if method.len() > usize::from(u16::MAX) {
        return Err(ClientError::Config(format!(
            "rpc method of {} bytes exceeds 65535",
            method.len()
        )));
    }
    let request_id = link.inbox().next_id();
    let request = RpcRequest {
        request_id,
        method: method.to_owned(),
        payload: Bytes::copy_from_slice(payload),
    };
    link.send_reliable(&request.to_envelope()).await?;
    let reply = wait_matching(link, |env| {
        env.kind == KIND_RPC_RESPONSE && rpc_response_id(&env.body) == Some(request_id)
    })
    .await?;
    let response = RpcResponse::decode(&reply.body)
        .map_err(|e| ClientError::Decode(format!("kind-4 rpc response: {e}")))?;
    if response.is_ok() {
        Ok(response.payload)
    } else {
        Err(ClientError::Rpc {
            request_id,
            message: response.error_message().unwrap_or_default(),
        })
    }
}

pub(crate) async fn wait_for_kind<L: Link>(link: &mut L, kind: u16) -> ClientResult<Envelope> {
    let pending = &mut link.inbox().pending;
    if let Some(index) = pending.iter().position(|env| env.kind == kind)
        && let Some(envelope) = pending.remove(index)
    {
        return Ok(envelope);
    }
    wait_matching(link, |env| env.kind == kind).await
}

pub(crate) async fn wait_for_room_joined<L: Link>(link: &mut L) -> ClientResult<RoomJoined> {
    let envelope = wait_for_kind(link, KIND_ROOM_JOINED).await?;
    RoomJoined::decode(&envelope.body)
        .map_err(|e| ClientError::Decode(format!("kind-23 room joined: {e}")))
}

/// Reads until an envelope satisfies `matches`, queueing the others.
async fn wait_matching<L: Link>(
    link: &mut L,
    mut matches: impl FnMut(&Envelope) -> bool,
) -> ClientResult<Envelope> {
    loop {
        if link.inbox().pending.len() >= MAX_BUFFERED_ENVELOPES {
            return Err(ClientError::Receive("client buffer full".into()));
        }
        match link.read_envelope().await? {
            Some(envelope) if matches(&envelope) => return Ok(envelope),
            Some(envelope) => link.inbox().pending.push_back(envelope),
            None => return Err(ClientError::Closed),
        }
    }
}

/// Kind 21 with the UTF-8 room name as params.
pub(crate) fn room_create(name: &str) -> ClientResult<Envelope> {
    if name.len() > usize::from(u16::MAX) {
        return Err(ClientError::Config(format!(
            "room name of {} bytes exceeds 65535",
            name.len()
        )));
    }
    Ok(RoomCreate {
        params: name.as_bytes().to_vec(),
    }
    .to_envelope())
}

/// Kind 1 with the canonical `x`, `y` little-endian `f32` body.
pub(crate) fn position(x: f32, y: f32) -> Envelope {
    Envelope::new(
        KIND_POSITION,
        Bytes::copy_from_slice(&encode_position(x, y)),
    )
}

/// Refuses an envelope whose frame would exceed [`MAX_FRAME_BODY_BYTES`].
pub(crate) fn check_fits(envelope: &Envelope) -> ClientResult<()> {
    if envelope.fits_frame() {
        Ok(())
    } else {
        Err(ClientError::Config(format!(
            "kind {} body of {} bytes exceeds the {MAX_FRAME_BODY_BYTES}-byte frame limit",
            envelope.kind,
            envelope.body.len()
        )))
    }
}

/// The request id of a well-formed kind-4 body (at least the 9-byte header).
fn rpc_response_id(body: &[u8]) -> Option<u64> {
    if body.len() < 9 {
        return None;
    }
    body.first_chunk::<8>().map(|id| u64::from_be_bytes(*id))
}
