//! The realm: every participant's [`Place`] (a room, or the implicit default
//! dimension shared by all room-less participants) and the room registry.
//!
//! One owner: the realm's mutex guards membership, names and labels; it is
//! never held across an `.await` (policy hooks run outside it). Each place
//! publishes an immutable member list ([`Scope`]) in the [`Places`] index
//! that the router reads without touching the realm lock; each participant
//! has a [`Seat`] that tells its connection where it is now. Room replies
//! (ROOM_JOINED, ROOM_LEAVE) go through the router. What it is not: it
//! delivers nothing itself. Call order per participant: [`Realm::register`]
//! → any of `join_or_create` / `join_by_id` / `leave` / `map_ready` →
//! [`Realm::unregister`].

mod matched;
mod members;
mod policy;

pub use members::{MemberList, MemberSet};
pub use policy::{DefaultRoomPolicy, PolicyContext, RoomLabel, RoomPolicy};

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use citadel_wire::WireBody;
use citadel_wire::room::{RoomJoined, RoomLeave};
use tokio::sync::OnceCell;

use crate::config::RoomsConfig;
use crate::gateway::outbound::Outbound;
use crate::place::{Place, RoomId};
use crate::router::{Lane, Router, frame};

/// One member of a place, as fan-out sees it.
#[derive(Debug, Clone)]
pub struct Member {
    /// Participant id.
    pub participant_id: u64,
    /// Its outbound lanes.
    pub outbound: Outbound,
}

/// A place's published member list: a room or the default dimension.
#[derive(Debug)]
pub struct Scope {
    place: Place,
    members: RwLock<MemberList>,
}

impl Scope {
    fn new(place: Place) -> Arc<Self> {
        Arc::new(Scope {
            place,
            members: RwLock::new(MemberList::default()),
        })
    }
    /// Which place this is.
    pub fn place(&self) -> Place {
        self.place
    }
    /// The current members (cheap clone of an immutable list).
    pub fn members(&self) -> MemberList {
        self.members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
    fn publish(&self, members: MemberList) {
        *self.members.write().unwrap_or_else(|p| p.into_inner()) = members;
    }
}

/// Why a join did not happen (no success frame is sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    /// Empty or too long a name.
    #[error("invalid room name")]
    BadName,
    /// `rooms.max_rooms` reached.
    #[error("room limit reached")]
    RoomLimit,
    /// No such room (or it was pruned).
    #[error("no such room")]
    NoSuchRoom,
    /// The room is closed to joins.
    #[error("room closed")]
    Closed,
    /// The room is at `max_players`.
    #[error("room full")]
    Full,
    /// The admission policy said no.
    #[error("admission denied")]
    Denied,
}

/// Every place's published member list, by place: what the router reads.
/// The realm inserts a room's scope when it creates the room and removes it
/// when it prunes it; reads never wait on the realm lock.
#[derive(Debug)]
pub struct Places {
    lobby: Arc<Scope>,
    rooms: RwLock<HashMap<RoomId, Arc<Scope>>>,
}

impl Default for Places {
    fn default() -> Self {
        Places {
            lobby: Scope::new(Place::Default),
            rooms: RwLock::new(HashMap::new()),
        }
    }
}

impl Places {
    /// The published scope of `place`; `None` for a room that no longer exists.
    pub fn scope(&self, place: Place) -> Option<Arc<Scope>> {
        match place {
            Place::Default => Some(self.lobby.clone()),
            Place::Room(id) => self
                .rooms
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&id)
                .cloned(),
        }
    }

    fn insert(&self, scope: Arc<Scope>) {
        if let Place::Room(id) = scope.place() {
            self.rooms
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, scope);
        }
    }

    fn remove(&self, id: RoomId) {
        self.rooms
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }
}

/// A room as `/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RoomStatus {
    /// Room id.
    pub id: u64,
    /// The join key (lossy UTF-8).
    pub name: String,
    /// Map label.
    pub map: String,
    /// Mode label.
    pub mode: String,
    /// Members now.
    pub members: usize,
    /// Members that sent MAP_READY.
    pub ready: usize,
    /// Cap (0 = unlimited).
    pub max_players: u32,
    /// Open to joins.
    pub open: bool,
}

#[derive(Debug)]
struct RoomState {
    name: Vec<u8>,
    label: RoomLabel,
    members: MemberSet,
    ready: HashSet<u64>,
    scope: Arc<Scope>,
    /// A matched room whose join tokens are still redeemable: it survives
    /// being emptied (a player who accepted and left early must not take
    /// the match away from those still holding tokens) until the
    /// matchmaker's [`Realm::prune_if_empty`] releases it.
    held: bool,
}

impl RoomState {
    /// A room with no members and nobody ready, named `name` (what
    /// `/status` shows), scoped to `scope`; `held` as for a matched room.
    fn new(name: Vec<u8>, label: RoomLabel, scope: Arc<Scope>, held: bool) -> Self {
        RoomState {
            name,
            label,
            members: MemberSet::default(),
            ready: HashSet::new(),
            scope,
            held,
        }
    }
}

#[derive(Debug)]
struct ParticipantState {
    outbound: Outbound,
    user_id: Option<String>,
    room: Option<RoomId>,
    seat: Seat,
}

type NameCell = Arc<OnceCell<Option<RoomId>>>;

#[derive(Debug, Default)]
struct RealmState {
    rooms: HashMap<RoomId, RoomState>,
    names: HashMap<Vec<u8>, NameCell>,
    participants: HashMap<u64, ParticipantState>,
    lobby: MemberSet,
    next_room_id: u64,
}

/// Where one participant is now: written by the realm when it moves, read
/// lock-free by its connection on every relayed frame.
#[derive(Debug, Clone, Default)]
pub struct Seat {
    code: Arc<AtomicU64>,
}

impl Seat {
    /// The participant's place now.
    pub fn place(&self) -> Place {
        Place::from_code(self.code.load(Ordering::Acquire))
    }

    fn set(&self, place: Place) {
        self.code.store(place.to_code(), Ordering::Release);
    }
}

/// The room registry and membership owner.
pub struct Realm {
    state: Mutex<RealmState>,
    places: Arc<Places>,
    router: Arc<dyn Router>,
    policy: Arc<dyn RoomPolicy>,
    config: RoomsConfig,
}

impl std::fmt::Debug for Realm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Realm").finish_non_exhaustive()
    }
}

impl Realm {
    /// An empty realm using `policy`, publishing member lists into
    /// `places` and sending room replies through `router`.
    pub fn new(
        config: RoomsConfig,
        policy: Arc<dyn RoomPolicy>,
        places: Arc<Places>,
        router: Arc<dyn Router>,
    ) -> Self {
        Realm {
            state: Mutex::new(RealmState {
                next_room_id: 1,
                ..Default::default()
            }),
            places,
            router,
            policy,
            config,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RealmState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an accepted participant to the default dimension.
    pub fn register(
        &self,
        participant_id: u64,
        user_id: Option<String>,
        outbound: Outbound,
    ) -> Seat {
        let seat = Seat::default();
        let mut st = self.lock();
        st.lobby.insert(Member {
            participant_id,
            outbound: outbound.clone(),
        });
        st.participants.insert(
            participant_id,
            ParticipantState {
                outbound,
                user_id,
                room: None,
                seat: seat.clone(),
            },
        );
        self.publish_lobby(&st);
        seat
    }

    /// Removes a participant everywhere at once (disconnect); prunes its
    /// room if it was the last member.
    pub fn unregister(&self, participant_id: u64) {
        let mut st = self.lock();
        self.detach(&mut st, participant_id, false);
        st.participants.remove(&participant_id);
    }

    fn context(&self, participant_id: u64) -> PolicyContext {
        let st = self.lock();
        PolicyContext {
            participant_id,
            user_id: st
                .participants
                .get(&participant_id)
                .and_then(|p| p.user_id.clone()),
        }
    }

    /// Joins the room named `params`, creating it (and running the create
    /// policy once) if it does not exist. The creator is admitted without the
    /// join hook; later callers go through it.
    pub async fn join_or_create(
        &self,
        participant_id: u64,
        params: Bytes,
    ) -> Result<RoomId, JoinRefused> {
        if params.is_empty() || params.len() > self.config.max_name_bytes {
            return Err(JoinRefused::BadName);
        }
        let ctx = self.context(participant_id);
        for _ in 0..4 {
            let cell = {
                let mut st = self.lock();
                if let Some(id) = st.participants.get(&participant_id).and_then(|p| p.room)
                    && st.rooms.get(&id).is_some_and(|r| r.name == params)
                {
                    // Already there: answer again (idempotent).
                    self.send_joined(&st, participant_id, id);
                    return Ok(id);
                }
                st.names.entry(params.to_vec()).or_default().clone()
            };
            let created = AtomicBool::new(false);
            let outcome = cell
                .get_or_init(|| async {
                    created.store(true, Ordering::Relaxed);
                    let label = self
                        .policy
                        .on_room_create(ctx.clone(), params.clone())
                        .await;
                    let mut st = self.lock();
                    if st.rooms.len() >= self.config.max_rooms
                        || !st.participants.contains_key(&participant_id)
                    {
                        return None;
                    }
                    let id = RoomId::new(st.next_room_id)?;
                    st.next_room_id += 1;
                    let scope = Scope::new(Place::Room(id));
                    self.places.insert(scope.clone());
                    st.rooms
                        .insert(id, RoomState::new(params.to_vec(), label, scope, false));
                    self.move_into(&mut st, participant_id, id);
                    Some(id)
                })
                .await;
            let Some(room_id) = *outcome else {
                Self::forget_name(&mut self.lock(), &params, &cell);
                return Err(JoinRefused::RoomLimit);
            };
            if created.load(Ordering::Relaxed) {
                return Ok(room_id);
            }
            match self.admit(participant_id, room_id, ctx.clone()).await {
                Err(JoinRefused::NoSuchRoom) => {
                    // Pruned between lookup and join: forget the stale name and retry.
                    Self::forget_name(&mut self.lock(), &params, &cell);
                }
                other => return other,
            }
        }
        Err(JoinRefused::NoSuchRoom)
    }

    /// Joins an existing room by id through the admission policy.
    pub async fn join_by_id(
        &self,
        participant_id: u64,
        room_id: RoomId,
    ) -> Result<RoomId, JoinRefused> {
        {
            let st = self.lock();
            if st.participants.get(&participant_id).and_then(|p| p.room) == Some(room_id) {
                self.send_joined(&st, participant_id, room_id);
                return Ok(room_id);
            }
            self.check_capacity(&st, room_id)?;
        }
        let ctx = self.context(participant_id);
        self.admit(participant_id, room_id, ctx).await
    }

    async fn admit(
        &self,
        participant_id: u64,
        room_id: RoomId,
        ctx: PolicyContext,
    ) -> Result<RoomId, JoinRefused> {
        if !self.policy.on_room_join(ctx, room_id).await {
            return Err(JoinRefused::Denied);
        }
        let mut st = self.lock();
        if !st.participants.contains_key(&participant_id) {
            return Err(JoinRefused::NoSuchRoom);
        }
        if st.participants.get(&participant_id).and_then(|p| p.room) == Some(room_id) {
            self.send_joined(&st, participant_id, room_id);
            return Ok(room_id);
        }
        self.check_capacity(&st, room_id)?;
        self.move_into(&mut st, participant_id, room_id);
        Ok(room_id)
    }

    fn check_capacity(&self, st: &RealmState, room_id: RoomId) -> Result<(), JoinRefused> {
        let room = st.rooms.get(&room_id).ok_or(JoinRefused::NoSuchRoom)?;
        if !room.label.open {
            return Err(JoinRefused::Closed);
        }
        let max = room.label.max_players as usize;
        if max != 0 && room.members.len() >= max {
            return Err(JoinRefused::Full);
        }
        Ok(())
    }

    /// Leaves `room_id` if that is the participant's room (back to the
    /// default dimension, with a ROOM_LEAVE notice). `false` for a stale id.
    pub fn leave(&self, participant_id: u64, room_id: RoomId) -> bool {
        let mut st = self.lock();
        if st.participants.get(&participant_id).and_then(|p| p.room) != Some(room_id) {
            return false;
        }
        self.detach(&mut st, participant_id, true);
        if let Some(member) = Self::member(&st, participant_id) {
            st.lobby.insert(member);
        }
        self.publish_lobby(&st);
        self.set_place(&st, participant_id, Place::Default);
        true
    }

    /// Marks the participant ready in `room_id`; `false` (no effect) for a
    /// wrong or stale id.
    pub fn map_ready(&self, participant_id: u64, room_id: RoomId) -> bool {
        let mut st = self.lock();
        if st.participants.get(&participant_id).and_then(|p| p.room) != Some(room_id) {
            return false;
        }
        st.rooms.get_mut(&room_id).is_some_and(|room| {
            room.ready.insert(participant_id);
            true
        })
    }

    /// Every live room, ordered by id.
    pub fn rooms(&self) -> Vec<RoomStatus> {
        let st = self.lock();
        let mut out: Vec<RoomStatus> = st
            .rooms
            .iter()
            .map(|(id, r)| RoomStatus {
                id: id.get(),
                name: String::from_utf8_lossy(&r.name).into_owned(),
                map: r.label.map.clone(),
                mode: r.label.mode.clone(),
                members: r.members.len(),
                ready: r.ready.len(),
                max_players: r.label.max_players,
                open: r.label.open,
            })
            .collect();
        out.sort_by_key(|r| r.id);
        out
    }

    /// Live rooms.
    pub fn room_count(&self) -> usize {
        self.lock().rooms.len()
    }

    /// Participants in the default dimension.
    pub fn lobby_count(&self) -> usize {
        self.lock().lobby.len()
    }

    /// The participant's room (`None` = default dimension or unknown).
    pub fn room_of(&self, participant_id: u64) -> Option<RoomId> {
        self.lock()
            .participants
            .get(&participant_id)
            .and_then(|p| p.room)
    }

    /// Live room ids, ascending (what the Lua `on_tick` walks).
    pub fn room_ids(&self) -> Vec<RoomId> {
        let st = self.lock();
        let mut ids: Vec<RoomId> = st.rooms.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// The published members of `place`; `None` for a room that no longer
    /// exists. Reads the published index, not the realm lock.
    pub fn place_members(&self, place: Place) -> Option<MemberList> {
        self.places.scope(place).map(|s| s.members())
    }

    // ---- helpers: all run under the realm lock ----

    fn member(st: &RealmState, participant_id: u64) -> Option<Member> {
        st.participants.get(&participant_id).map(|p| Member {
            participant_id,
            outbound: p.outbound.clone(),
        })
    }

    /// Drops the name → room entry if it is still `cell` (a newer entry for
    /// the same name is left alone).
    fn forget_name(st: &mut RealmState, name: &[u8], cell: &NameCell) {
        if st.names.get(name).is_some_and(|c| Arc::ptr_eq(c, cell)) {
            st.names.remove(name);
        }
    }

    fn publish_lobby(&self, st: &RealmState) {
        self.places.lobby.publish(st.lobby.snapshot());
    }

    fn set_place(&self, st: &RealmState, participant_id: u64, place: Place) {
        if let Some(p) = st.participants.get(&participant_id) {
            p.seat.set(place);
        }
    }

    fn send_joined(&self, st: &RealmState, participant_id: u64, room_id: RoomId) {
        if let Some(room) = st.rooms.get(&room_id) {
            let joined = RoomJoined {
                room_id: room_id.get(),
                map: room.label.map.clone(),
                mode: room.label.mode.clone(),
            };
            self.router.to_participant(
                participant_id,
                Lane::Reliable,
                frame(&joined.to_envelope()),
            );
        }
    }

    /// Removes the participant from its current place (room or default
    /// dimension), pruning an emptied room. With `notify`, a room exit sends
    /// ROOM_LEAVE to the participant.
    fn detach(&self, st: &mut RealmState, participant_id: u64, notify: bool) {
        let Some(current) = st.participants.get(&participant_id).map(|p| p.room) else {
            return;
        };
        match current {
            None => {
                st.lobby.remove(participant_id);
                self.publish_lobby(st);
            }
            Some(room_id) => {
                let mut prune = None;
                if let Some(room) = st.rooms.get_mut(&room_id) {
                    room.members.remove(participant_id);
                    room.ready.remove(&participant_id);
                    room.scope.publish(room.members.snapshot());
                    if room.members.is_empty() && !room.held {
                        prune = Some(room.name.clone());
                    }
                }
                if let Some(name) = prune {
                    st.rooms.remove(&room_id);
                    self.places.remove(room_id);
                    let stale = st
                        .names
                        .get(&name)
                        .is_some_and(|cell| cell.get() == Some(&Some(room_id)));
                    if stale {
                        st.names.remove(&name);
                    }
                }
                if notify {
                    let leave = RoomLeave {
                        room_id: room_id.get(),
                    };
                    self.router.to_participant(
                        participant_id,
                        Lane::Reliable,
                        frame(&leave.to_envelope()),
                    );
                }
            }
        }
        if let Some(p) = st.participants.get_mut(&participant_id) {
            p.room = None;
        }
    }

    /// Moves the participant into `room_id` (leaving its current place with a
    /// notice) and sends ROOM_JOINED.
    fn move_into(&self, st: &mut RealmState, participant_id: u64, room_id: RoomId) {
        self.detach(st, participant_id, true);
        let Some(member) = Self::member(st, participant_id) else {
            return;
        };
        let Some(room) = st.rooms.get_mut(&room_id) else {
            return;
        };
        room.members.insert(member);
        room.scope.publish(room.members.snapshot());
        if let Some(p) = st.participants.get_mut(&participant_id) {
            p.room = Some(room_id);
        }
        self.set_place(st, participant_id, Place::Room(room_id));
        self.send_joined(st, participant_id, room_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::outbound::LaneLimits;
    use crate::metrics::Metrics;
    use crate::router::{LocalRouter, Recipient};

    struct Fixture {
        realm: Realm,
        router: Arc<LocalRouter>,
    }

    impl Fixture {
        fn register(&self, participant_id: u64, outbound: Outbound) -> Seat {
            self.router.attach(Recipient {
                participant_id,
                user_id: None,
                outbound: outbound.clone(),
            });
            self.realm.register(participant_id, None, outbound)
        }
    }

    impl std::ops::Deref for Fixture {
        type Target = Realm;
        fn deref(&self) -> &Realm {
            &self.realm
        }
    }

    fn realm(max_rooms: usize) -> Fixture {
        let config = RoomsConfig {
            max_rooms,
            ..RoomsConfig::default()
        };
        let places = Arc::new(Places::default());
        let router = Arc::new(LocalRouter::new(places.clone()));
        let realm = Realm::new(
            config,
            Arc::new(DefaultRoomPolicy::default()),
            places,
            router.clone(),
        );
        Fixture { realm, router }
    }

    fn room(raw: u64) -> RoomId {
        RoomId::new(raw).unwrap()
    }

    fn outbound() -> Outbound {
        let limits = LaneLimits {
            reliable_capacity: 64,
            unreliable_capacity: 64,
            max_bytes: 1 << 20,
        };
        Outbound::new(limits, Arc::new(Metrics::default()))
    }

    #[tokio::test]
    async fn first_caller_creates_and_rest_join() {
        let realm = realm(10);
        let a = realm.register(1, outbound());
        let _b = realm.register(2, outbound());
        assert_eq!(realm.lobby_count(), 2);
        let id = realm
            .join_or_create(1, Bytes::from_static(b"lobby"))
            .await
            .unwrap();
        assert_eq!(
            realm.join_or_create(2, Bytes::from_static(b"lobby")).await,
            Ok(id)
        );
        assert_eq!(a.place(), Place::Room(id));
        assert_eq!(realm.place_members(a.place()).unwrap().len(), 2);
        assert_eq!(realm.lobby_count(), 0);
        assert!(realm.leave(1, id));
        assert!(!realm.leave(1, id));
        realm.unregister(2);
        assert_eq!(realm.room_count(), 0, "empty room pruned");
        let again = realm
            .join_or_create(1, Bytes::from_static(b"lobby"))
            .await
            .unwrap();
        assert_ne!(again, id, "name freed, ids never reused");
    }

    #[tokio::test]
    async fn limits_and_stale_ids() {
        let realm = realm(1);
        realm.register(1, outbound());
        realm.register(2, outbound());
        let id = realm
            .join_or_create(1, Bytes::from_static(b"a"))
            .await
            .unwrap();
        assert_eq!(
            realm.join_or_create(2, Bytes::from_static(b"b")).await,
            Err(JoinRefused::RoomLimit)
        );
        assert_eq!(
            realm.join_by_id(2, room(999)).await,
            Err(JoinRefused::NoSuchRoom)
        );
        assert_eq!(
            realm.join_or_create(2, Bytes::new()).await,
            Err(JoinRefused::BadName)
        );
        assert!(!realm.map_ready(2, id));
        assert!(realm.map_ready(1, id));
        assert_eq!(realm.rooms()[0].ready, 1);
        // The refused name is not stuck: once there is room it can be created.
        realm.unregister(1);
        assert!(
            realm
                .join_or_create(2, Bytes::from_static(b"b"))
                .await
                .is_ok()
        );
    }
}
