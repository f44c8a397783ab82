//! Dispatch tests of [`Connection`] with a recording router and no
//! socket: what each inbound envelope asks the router to deliver.

//! Dispatch without a socket: a recording router stands in for delivery
//! and the connection's own lanes are read directly.

use std::sync::{Mutex, PoisonError};

use citadel_wire::protocol::{
    KIND_AUTH_RESULT, KIND_PEER_POSITION, KIND_RPC_RESPONSE, RpcResponse, encode_position,
    encode_rpc_request,
};
use citadel_wire::room::RoomJoined;

use super::*;
use crate::config::RoomsConfig;
use crate::gateway::handshake::RejectAllTokens;
use crate::gateway::outbound::LaneLimits;
use crate::place::Place;
use crate::realm::{DefaultRoomPolicy, Places};

/// One delivery the connection asked for.
#[derive(Debug, Clone, PartialEq)]
enum Routed {
    Attach(u64),
    Detach(u64),
    Participant(u64, Lane, Bytes),
    Place(Place, Option<u64>, Lane, Bytes),
}

#[derive(Debug, Default)]
struct RecordingRouter(Mutex<Vec<Routed>>);

impl RecordingRouter {
    fn take(&self) -> Vec<Routed> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
    fn push(&self, routed: Routed) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(routed);
    }
}

impl Router for RecordingRouter {
    fn attach(&self, recipient: Recipient) {
        self.push(Routed::Attach(recipient.participant_id));
    }
    fn detach(&self, participant_id: u64) {
        self.push(Routed::Detach(participant_id));
    }
    fn to_participant(&self, participant_id: u64, lane: Lane, frame: Bytes) -> bool {
        self.push(Routed::Participant(participant_id, lane, frame));
        true
    }
    fn to_account(&self, _user_id: &str, _lane: Lane, _frame: Bytes) -> crate::router::Fanout {
        crate::router::Fanout::default()
    }
    fn to_place(&self, place: Place, except: Option<u64>, lane: Lane, frame: Bytes) -> usize {
        self.push(Routed::Place(place, except, lane, frame));
        1
    }
    fn to_everyone(&self, _lane: Lane, _frame: Bytes) -> usize {
        0
    }
}

struct Harness {
    router: Arc<RecordingRouter>,
    deps: Arc<ConnectionDeps>,
    outbound: Outbound,
    connection: Connection,
}

/// Connection deps over `router`, with the default realm, hub and
/// matchmaker, guests allowed and every token refused; for tests of the
/// connection and of the transports' reader core.
pub(crate) fn deps_with(router: Arc<dyn Router>) -> Arc<ConnectionDeps> {
    let metrics = Arc::new(Metrics::default());
    let places = Arc::new(Places::default());
    let realm = Arc::new(Realm::new(
        RoomsConfig::default(),
        Arc::new(DefaultRoomPolicy::default()),
        places,
        router.clone(),
    ));
    let hub = Arc::new(crate::actors::test_hub(metrics.clone(), router.clone()));
    let matchmaker = Arc::new(crate::services::matchmaker::Matchmaker::new(
        Default::default(),
        realm.clone(),
        router.clone(),
        hub.clone(),
        metrics.clone(),
        Arc::new(crate::services::party::Parties::default()),
    ));
    let netpeer = Arc::new(crate::netpeer::test_node(metrics.clone(), router.clone()));
    Arc::new(ConnectionDeps {
        chat: None,
        auth: AuthConfig::default(),
        limits: LimitsConfig::default(),
        metrics,
        realm,
        router,
        rpc: Arc::new(RpcRegistry::default()),
        validator: Arc::new(RejectAllTokens),
        runtime: None,
        live: Arc::new(LiveSessions::default()),
        hub,
        netpeer,
        tasks: TaskTracker::new(),
        participant_ids: Arc::new(ParticipantIds::default()),
        matchmaker,
    })
}

/// Lanes large enough for any test.
pub(crate) const TEST_LANES: LaneLimits = LaneLimits {
    reliable_capacity: 64,
    unreliable_capacity: 64,
    max_bytes: 1 << 20,
};

fn harness() -> Harness {
    let router = Arc::new(RecordingRouter::default());
    let deps = deps_with(router.clone());
    let outbound = Outbound::new(TEST_LANES, deps.metrics.clone());
    Harness {
        router,
        connection: Connection::new(deps.clone(), outbound.clone()),
        deps,
        outbound,
    }
}

/// The single envelope `frame` holds.
pub(crate) fn decoded(frame: &Bytes) -> Envelope {
    let mut buf = bytes::BytesMut::from(&frame[..]);
    match citadel_wire::decode_framed(&mut buf) {
        Ok(Some(envelope)) => envelope,
        other => panic!("not one framed envelope: {other:?}"),
    }
}

impl Harness {
    /// Completes a guest handshake; returns the participant id.
    async fn accept_guest(&mut self) -> u64 {
        let flow = self
            .connection
            .handle_envelope(Envelope::new(KIND_AUTH, Bytes::new()))
            .await;
        assert_eq!(flow, Flow::Continue);
        let (reliable, _) = self.outbound.drain();
        assert_eq!(reliable.len(), 1);
        let reply = decoded(&reliable[0]);
        assert_eq!(reply.kind, KIND_AUTH_RESULT);
        assert_eq!(AuthResult::decode(&reply.body), Ok(AuthResult::Guest));
        let Some(id) = self.connection.participant_id() else {
            panic!("a guest handshake admits a participant");
        };
        assert_eq!(self.router.take(), vec![Routed::Attach(id)]);
        id
    }
}

#[tokio::test]
async fn a_first_frame_other_than_auth_is_rejected_and_sticks() {
    let mut h = harness();
    let position = Envelope::new(KIND_POSITION, encode_position(1.0, 2.0).to_vec());
    let flow = h.connection.handle_envelope(position.clone()).await;
    assert_eq!(flow, Flow::Close(CloseReason::AuthRejected));
    let reply = decoded(&h.outbound.drain().0[0]);
    assert_eq!(
        AuthResult::decode(&reply.body),
        Ok(AuthResult::Rejected {
            reason_class: AUTH_REASON_PROTOCOL
        })
    );
    assert_eq!(
        h.connection.handle_envelope(position).await,
        Flow::Close(CloseReason::AuthRejected)
    );
    assert!(
        h.router.take().is_empty(),
        "nothing routed for a rejected peer"
    );
}

#[tokio::test]
async fn positions_go_to_the_place_except_the_sender_unreliably() {
    let mut h = harness();
    let id = h.accept_guest().await;
    let body = encode_position(125.0, 64.0);
    h.connection
        .handle_envelope(Envelope::new(KIND_POSITION, body.to_vec()))
        .await;
    assert_eq!(
        h.router.take(),
        vec![Routed::Place(
            Place::Default,
            Some(id),
            Lane::Unreliable,
            tagged_frame(KIND_PEER_POSITION, id, &body)
        )]
    );
}

#[tokio::test]
async fn application_kinds_without_a_script_relay_reliably_in_the_room() {
    let mut h = harness();
    let id = h.accept_guest().await;
    let create = RoomCreate {
        params: b"arena".to_vec(),
    };
    h.connection.handle_envelope(create.to_envelope()).await;
    let routed = h.router.take();
    let [Routed::Participant(to, Lane::Reliable, frame)] = routed.as_slice() else {
        panic!("expected one ROOM_JOINED, got {routed:?}");
    };
    assert_eq!(*to, id);
    let Ok(joined) = RoomJoined::decode(&decoded(frame).body) else {
        panic!("ROOM_JOINED decodes");
    };
    let Some(room_id) = RoomId::new(joined.room_id) else {
        panic!("a created room has a non-zero id");
    };
    let room = Place::Room(room_id);
    h.connection
        .handle_envelope(Envelope::new(FIRST_APPLICATION_KIND, b"hi".to_vec()))
        .await;
    assert_eq!(
        h.router.take(),
        vec![Routed::Place(
            room,
            Some(id),
            Lane::Reliable,
            tagged_frame(FIRST_APPLICATION_KIND, id, b"hi")
        )]
    );
}

#[tokio::test]
async fn an_unknown_rpc_is_answered_on_the_callers_own_lane() {
    let mut h = harness();
    h.accept_guest().await;
    let request = encode_rpc_request(42, "nope", b"");
    h.connection
        .handle_envelope(Envelope::new(KIND_RPC_REQUEST, request))
        .await;
    h.deps.tasks.close();
    h.deps.tasks.wait().await;
    let reply = decoded(&h.outbound.drain().0[0]);
    assert_eq!(reply.kind, KIND_RPC_RESPONSE);
    let Ok(response) = RpcResponse::decode(&reply.body) else {
        panic!("RPC_RESPONSE decodes");
    };
    assert_eq!(response.request_id, 42);
    assert_eq!(response.status, RPC_STATUS_ERROR);
    assert_eq!(&response.payload[..], rpc::UNKNOWN_METHOD.as_bytes());
    assert!(h.router.take().is_empty(), "a reply is not routed");
}

#[tokio::test]
async fn a_second_auth_closes_and_disconnect_detaches() {
    let mut h = harness();
    let id = h.accept_guest().await;
    let flow = h
        .connection
        .handle_envelope(Envelope::new(KIND_AUTH, Bytes::new()))
        .await;
    assert_eq!(flow, Flow::Close(CloseReason::DuplicateAuth));
    h.connection.handle_disconnect();
    h.connection.handle_disconnect();
    assert_eq!(h.router.take(), vec![Routed::Detach(id)]);
    assert_eq!(h.deps.realm.lobby_count(), 0);
}
