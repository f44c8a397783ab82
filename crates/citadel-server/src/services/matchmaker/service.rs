//! [`Matchmaker`]: the node's ticket queue behind one mutex, the handoffs
//! of formed matches, and the presence it needs (which accounts are
//! connected, so a party can only queue when every member is).
//!
//! Call order for one ticket: [`Matchmaker::add`] (validated request →
//! queued) → [`Matchmaker::form`] right after the add reply (preview the
//! smallest cohort, ask the [`FormationClaim`], commit it atomically) →
//! label hook → closed room in the realm → one-time join token per member
//! and KIND_MATCHMAKER_MATCHED to every live session of each member →
//! [`Matchmaker::accept`] (token redeemed) → [`Matchmaker::enter`] after the
//! accept reply (ROOM_JOINED). [`Matchmaker::tick`] expires tickets, old
//! records and unused rooms; [`Matchmaker::disconnected`] removes a leaving
//! participant's queued ticket. The mutex is never held across an
//! `.await`. What it is not: JSON parsing (see `rpc`) or delivery (the
//! router does it).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use citadel_wire::WireBody;
use citadel_wire::service::MatchmakerMatched;

use super::config::MatchmakerConfig;
use super::label::{MatchInfo, MatchLabeler, TicketInfo};
use super::query::{self, Props};
use super::queue::{Cohort, Member, Queue, Ticket};
use crate::actors::TransformHub;
use crate::gateway::ratelimit::TokenBucket;
use crate::metrics::{Metrics, ServiceEvent};
use crate::place::{Place, RoomId};
use crate::realm::Realm;
use crate::router::{Lane, Router, frame};
use crate::services::party::Parties;

/// Unknown ticket (or one the caller does not own) in `status`.
pub const UNKNOWN_TICKET: &str = "unknown ticket";
/// Second queued ticket for one participant.
pub const ALREADY_QUEUED: &str = "participant already has a queued ticket";
/// A party member holds a queued ticket (§3.2).
pub const MEMBER_QUEUED: &str = "party member already has a queued ticket";
/// A party member is not connected.
pub const MEMBER_OFFLINE: &str = "every party member must be connected";
/// `matchmaker.max_tickets` reached.
pub const QUEUE_FULL: &str = "matchmaker queue full";
/// The matchmaker-specific rate limit.
pub const RATE_LIMITED: &str = "matchmaker rate limit exceeded";
/// A wrong, foreign or unknown join token.
pub const INVALID_TOKEN: &str = "invalid join token";
/// A join token redeemed before.
pub const TOKEN_USED: &str = "join token already used";
/// A join token past `expires_at`.
pub const TOKEN_EXPIRED: &str = "join token expired";
/// The matched room is gone.
pub const MATCH_GONE: &str = "match no longer available";
/// Randomness unavailable.
const UNAVAILABLE: &str = "matchmaker unavailable";

/// The step between preview and commit where a cluster takes its durable,
/// fenced formation claim (`cluster.md` §4.1). Refusing fails closed: the
/// cohort stays queued.
pub trait FormationClaim: Send + Sync + std::fmt::Debug {
    /// Whether `tickets` (ids, arriving first) may form now.
    fn claim(&self, tickets: &[&str]) -> bool;
}

/// The single-node claim: the queue mutex already makes formation atomic.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalClaim;

impl FormationClaim for LocalClaim {
    fn claim(&self, _tickets: &[&str]) -> bool {
        true
    }
}

/// A validated `matchmaker.add` request, before its members are known.
#[derive(Debug, Clone)]
pub struct Request {
    /// Query text (empty: anyone).
    pub query: String,
    /// Properties.
    pub properties: Props,
    /// `min_count`.
    pub min_count: u32,
    /// `max_count`.
    pub max_count: u32,
    /// `count_multiple`.
    pub count_multiple: u32,
    /// `party_id`.
    pub party_id: Option<String>,
    /// `ttl_ms`.
    pub ttl_ms: u64,
}

/// One member's handoff (§3.5).
#[derive(Debug, Clone)]
struct Handoff {
    token: String,
    used: bool,
}

#[derive(Debug, Clone)]
enum Outcome {
    /// Committed; room and tokens on the way.
    Forming,
    Matched {
        room: RoomId,
        expires_at: u64,
        handoffs: HashMap<String, Handoff>,
    },
    Removed,
}

#[derive(Debug)]
struct Record {
    users: Vec<String>,
    outcome: Outcome,
}

/// What `status` reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Still waiting (or being formed).
    Queued,
    /// Formed: the caller's own handoff.
    Matched(MatchmakerMatched),
    /// Cancelled, expired, disconnected, or failed to form.
    Removed,
}

#[derive(Debug, Default)]
struct State {
    queue: Queue,
    /// Participant → its queued ticket.
    by_participant: HashMap<u64, String>,
    /// Party → its queued ticket.
    by_party: HashMap<String, String>,
    /// Tickets no longer queued, kept for `status` until `keep`.
    records: HashMap<String, Record>,
    keep: VecDeque<(u64, String)>,
    /// Accepted but not yet entered: participant → room.
    pending: HashMap<u64, RoomId>,
    /// Matched rooms to prune if still empty after the handoff expired.
    rooms: VecDeque<(u64, RoomId)>,
    buckets: HashMap<u64, TokenBucket>,
    /// Connected accounts: account → participants, and back.
    online: HashMap<String, Vec<u64>>,
    users: HashMap<u64, String>,
}

impl State {
    fn record(&mut self, id: String, users: Vec<String>, outcome: Outcome, keep_until: u64) {
        self.keep.push_back((keep_until, id.clone()));
        self.records.insert(id, Record { users, outcome });
    }

    /// Takes a ticket out of the participant and party maps.
    fn forget(&mut self, ticket: &Ticket) {
        for m in &ticket.members {
            if self.by_participant.get(&m.participant_id) == Some(&ticket.id) {
                self.by_participant.remove(&m.participant_id);
            }
        }
        if let Some(party) = &ticket.party_id {
            self.by_party.remove(party);
        }
    }
}

/// The matchmaker of one node.
pub struct Matchmaker {
    config: MatchmakerConfig,
    limits: query::Limits,
    state: Mutex<State>,
    realm: Arc<Realm>,
    router: Arc<dyn Router>,
    hub: Arc<TransformHub>,
    metrics: Arc<Metrics>,
    parties: Arc<Parties>,
    labeler: RwLock<Arc<dyn MatchLabeler>>,
    claim: Arc<dyn FormationClaim>,
}

impl std::fmt::Debug for Matchmaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matchmaker").finish_non_exhaustive()
    }
}

fn random_token(bytes: usize) -> Result<String, &'static str> {
    let mut buf = [0u8; 32];
    let buf = &mut buf[..bytes.min(32)];
    getrandom::fill(buf).map_err(|_| UNAVAILABLE)?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    u64::try_from(crate::services::accounts::now_ms()).unwrap_or(0)
}

/// Equal without an early exit on the first differing byte.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Matchmaker {
    /// A matchmaker creating rooms in `realm` and delivering through
    /// `router`; parties come from `parties`.
    pub fn new(
        config: MatchmakerConfig,
        realm: Arc<Realm>,
        router: Arc<dyn Router>,
        hub: Arc<TransformHub>,
        metrics: Arc<Metrics>,
        parties: Arc<Parties>,
    ) -> Self {
        Matchmaker {
            limits: query::Limits {
                max_bytes: config.max_query_bytes,
                max_depth: config.max_query_depth,
            },
            config,
            state: Mutex::default(),
            realm,
            router,
            hub,
            metrics,
            parties,
            labeler: RwLock::new(Arc::new(super::label::DefaultLabel)),
            claim: Arc::new(LocalClaim),
        }
    }

    /// Replaces the label hook (the Lua runtime's, once started).
    pub fn set_labeler(&self, labeler: Arc<dyn MatchLabeler>) {
        *self.labeler.write().unwrap_or_else(|p| p.into_inner()) = labeler;
    }

    /// The configuration.
    pub fn config(&self) -> &MatchmakerConfig {
        &self.config
    }

    /// Query bounds.
    pub fn limits(&self) -> query::Limits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a refused `add`.
    pub fn refused(&self) {
        self.metrics.service_event(ServiceEvent::MatchmakerRefused);
    }

    fn set_gauge(&self, st: &State) {
        self.metrics
            .matchmaker_queued
            .store(st.queue.len() as i64, std::sync::atomic::Ordering::Relaxed);
    }

    /// An authenticated connection arrived.
    pub fn connected(&self, participant_id: u64, user_id: &str) {
        let mut st = self.lock();
        st.online
            .entry(user_id.to_owned())
            .or_default()
            .push(participant_id);
        st.users.insert(participant_id, user_id.to_owned());
    }

    /// A connection ended: its queued ticket (solo or party) is removed.
    pub fn disconnected(&self, participant_id: u64) {
        let mut st = self.lock();
        if let Some(user) = st.users.remove(&participant_id)
            && let Some(ids) = st.online.get_mut(&user)
        {
            ids.retain(|p| *p != participant_id);
            if ids.is_empty() {
                st.online.remove(&user);
            }
        }
        st.buckets.remove(&participant_id);
        st.pending.remove(&participant_id);
        if let Some(id) = st.by_participant.get(&participant_id).cloned()
            && let Some(ticket) = st.queue.remove(&id)
        {
            st.forget(&ticket);
            let users = ticket.members.iter().map(|m| m.user_id.clone()).collect();
            let keep = now_ms().saturating_add(self.config.handoff_ttl_ms);
            st.record(id, users, Outcome::Removed, keep);
            self.metrics
                .service_event(ServiceEvent::MatchmakerTicketsDisconnected);
        }
        self.set_gauge(&st);
    }

    /// Whether party `party_id` has a queued ticket (membership frozen).
    pub fn party_queued(&self, party_id: &str) -> bool {
        self.lock().by_party.contains_key(party_id)
    }

    /// Takes one token of the caller's matchmaker bucket.
    pub fn admit_call(&self, participant_id: u64) -> Result<(), &'static str> {
        let now = Instant::now();
        let (rate, burst) = (self.config.calls_per_second, self.config.call_burst);
        let ok = self
            .lock()
            .buckets
            .entry(participant_id)
            .or_insert_with(|| TokenBucket::new(rate, burst, now))
            .try_take(now);
        if ok {
            Ok(())
        } else {
            self.metrics
                .service_event(ServiceEvent::MatchmakerRateLimited);
            Err(RATE_LIMITED)
        }
    }

    /// Queues a ticket for `user` on connection `participant_id`; returns
    /// its id. Formation runs in [`Matchmaker::form`] afterwards.
    pub fn add(&self, participant_id: u64, user: &str, request: Request) -> Result<String, String> {
        let query = query::parse(&request.query, self.limits).map_err(|e| {
            self.refused();
            format!("invalid match query: {e}")
        })?;
        let refuse = |m: &'static str| {
            self.refused();
            m.to_owned()
        };
        // Lock order: the party book, then the queue.
        let book = self.parties.lock();
        let members: Vec<String> = match &request.party_id {
            None => vec![user.to_owned()],
            Some(party) => book.led_by(party, user).map_err(refuse)?.members.clone(),
        };
        let mut st = self.lock();
        if st.by_participant.contains_key(&participant_id) {
            return Err(refuse(ALREADY_QUEUED));
        }
        let mut seated = Vec::with_capacity(members.len());
        for member in members {
            let pid = if member == user {
                participant_id
            } else {
                let Some(pid) = st.online.get(&member).and_then(|ids| ids.first().copied()) else {
                    return Err(refuse(MEMBER_OFFLINE));
                };
                pid
            };
            let holds = st.by_participant.contains_key(&pid)
                || st
                    .online
                    .get(&member)
                    .is_some_and(|ids| ids.iter().any(|p| st.by_participant.contains_key(p)));
            if holds {
                return Err(refuse(MEMBER_QUEUED));
            }
            seated.push(Member {
                user_id: member,
                participant_id: pid,
            });
        }
        if seated.len() > request.max_count as usize {
            return Err(refuse("party is larger than max_count"));
        }
        if st.queue.len() >= self.config.max_tickets {
            return Err(refuse(QUEUE_FULL));
        }
        let id = random_token(18).map_err(refuse)?;
        let ticket = Ticket {
            id: id.clone(),
            members: seated,
            min_count: request.min_count,
            max_count: request.max_count,
            count_multiple: request.count_multiple,
            query,
            query_text: request.query,
            properties: request.properties,
            expires_at: now_ms().saturating_add(request.ttl_ms),
            party_id: request.party_id,
        };
        for m in &ticket.members {
            st.by_participant.insert(m.participant_id, id.clone());
        }
        if let Some(party) = &ticket.party_id {
            st.by_party.insert(party.clone(), id.clone());
        }
        st.queue.insert(ticket);
        self.set_gauge(&st);
        drop(st);
        drop(book);
        self.metrics
            .service_event(ServiceEvent::MatchmakerTicketsAdded);
        Ok(id)
    }

    /// The queued ticket of `participant_id`, if any.
    pub fn queued_ticket(&self, participant_id: u64) -> Option<String> {
        self.lock().by_participant.get(&participant_id).cloned()
    }

    /// Forms the smallest valid cohort containing ticket `id`, if there is
    /// one: commit, label, room, tokens, MATCHED. Returns the room.
    pub async fn form(&self, id: &str) -> Option<RoomId> {
        let tickets = self.take_cohort(id)?;
        let info = MatchInfo {
            tickets: tickets
                .iter()
                .map(|t| TicketInfo {
                    ticket_id: t.id.clone(),
                    user_ids: t.members.iter().map(|m| m.user_id.clone()).collect(),
                    properties: t.properties.clone(),
                    query: t.query_text.clone(),
                })
                .collect(),
        };
        let total: u32 = tickets.iter().map(Ticket::count).sum();
        let labeler = self
            .labeler
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let label = labeler.label(info, total).await;
        let room = match self.realm.create_matched(&format!("match:{id}"), label) {
            Ok(room) => room,
            Err(err) => {
                tracing::warn!(error = %err, "matched room not created; cohort removed");
                self.metrics
                    .service_event(ServiceEvent::MatchmakerFormationFailed);
                self.finish(&tickets, None);
                return None;
            }
        };
        self.finish(&tickets, Some(room));
        Some(room)
    }

    /// Preview → claim → commit, under the queue lock.
    fn take_cohort(&self, id: &str) -> Option<Vec<Ticket>> {
        let started = Instant::now();
        let mut st = self.lock();
        let seq = st.queue.seq_of(id)?;
        let before = st.queue.evaluated;
        let cohort: Option<Cohort> = st.queue.preview(seq);
        let looked = st.queue.evaluated - before;
        let m = &self.metrics;
        m.service_n(ServiceEvent::MatchmakerEvaluations, looked);
        let taken = cohort.and_then(|cohort| {
            let ids: Vec<String> = cohort
                .0
                .iter()
                .filter_map(|s| st.queue.id_of(*s).map(str::to_owned))
                .collect();
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            if !self.claim.claim(&refs) {
                return None;
            }
            st.queue.commit(&cohort)
        });
        if let Some(tickets) = &taken {
            // Kept past the handoff's expiry so a late accept is told so.
            let keep = now_ms().saturating_add(self.config.handoff_ttl_ms.saturating_mul(2));
            for t in tickets {
                st.forget(t);
                let users = t.members.iter().map(|m| m.user_id.clone()).collect();
                st.record(t.id.clone(), users, Outcome::Forming, keep);
            }
            self.set_gauge(&st);
        }
        drop(st);
        m.service_n(
            ServiceEvent::MatchmakerEvaluationMicros,
            started.elapsed().as_micros() as u64,
        );
        taken
    }

    /// Records the result of a committed cohort and delivers the handoffs.
    fn finish(&self, tickets: &[Ticket], room: Option<RoomId>) {
        let now = now_ms();
        let expires_at = now.saturating_add(self.config.handoff_ttl_ms);
        let mut deliveries = Vec::new();
        {
            let mut st = self.lock();
            for t in tickets {
                let Some(record) = st.records.get_mut(&t.id) else {
                    continue;
                };
                let Some(room) = room else {
                    record.outcome = Outcome::Removed;
                    continue;
                };
                let mut handoffs = HashMap::new();
                for m in &t.members {
                    let Ok(token) = random_token(24) else {
                        continue;
                    };
                    deliveries.push((
                        m.user_id.clone(),
                        MatchmakerMatched {
                            ticket_id: t.id.clone(),
                            match_id: room.get(),
                            join_token: token.clone(),
                            expires_at,
                        },
                    ));
                    handoffs.insert(m.user_id.clone(), Handoff { token, used: false });
                }
                record.outcome = Outcome::Matched {
                    room,
                    expires_at,
                    handoffs,
                };
            }
            if let Some(room) = room {
                st.rooms.push_back((expires_at, room));
            }
        }
        if room.is_some() {
            let m = &self.metrics;
            m.service_event(ServiceEvent::MatchmakerMatchesFormed);
            m.service_n(ServiceEvent::MatchmakerTicketsFormed, tickets.len() as u64);
        }
        for (user, matched) in deliveries {
            // A lost delivery is recovered through `status` (§3.5).
            self.router
                .to_account(&user, Lane::Reliable, frame(&matched.to_envelope()));
        }
    }

    /// `matchmaker.cancel`: true if the caller's queued ticket was removed.
    pub fn cancel(&self, user: &str, id: &str) -> bool {
        let mut st = self.lock();
        let mine = st
            .queue
            .get(id)
            .is_some_and(|t| t.members.iter().any(|m| m.user_id == user));
        if !mine {
            return false;
        }
        let Some(ticket) = st.queue.remove(id) else {
            return false;
        };
        st.forget(&ticket);
        let users = ticket.members.iter().map(|m| m.user_id.clone()).collect();
        let keep = now_ms().saturating_add(self.config.handoff_ttl_ms);
        st.record(ticket.id, users, Outcome::Removed, keep);
        self.set_gauge(&st);
        self.metrics
            .service_event(ServiceEvent::MatchmakerTicketsCancelled);
        true
    }

    /// `matchmaker.status` for a ticket `user` belongs to.
    pub fn status(&self, user: &str, id: &str) -> Result<Status, &'static str> {
        let st = self.lock();
        if let Some(t) = st.queue.get(id) {
            return if t.members.iter().any(|m| m.user_id == user) {
                Ok(Status::Queued)
            } else {
                Err(UNKNOWN_TICKET)
            };
        }
        let record = st
            .records
            .get(id)
            .filter(|r| r.users.iter().any(|u| u == user))
            .ok_or(UNKNOWN_TICKET)?;
        Ok(match &record.outcome {
            Outcome::Forming => Status::Queued,
            Outcome::Removed => Status::Removed,
            Outcome::Matched {
                room,
                expires_at,
                handoffs,
            } => match handoffs.get(user) {
                Some(h) => Status::Matched(MatchmakerMatched {
                    ticket_id: id.to_owned(),
                    match_id: room.get(),
                    join_token: h.token.clone(),
                    expires_at: *expires_at,
                }),
                None => Status::Removed,
            },
        })
    }

    /// `matchmaker.accept`: redeems `token`; the room is entered by
    /// [`Matchmaker::enter`] once the reply is queued. Returns the match id.
    pub fn accept(
        &self,
        participant_id: u64,
        user: &str,
        id: &str,
        token: &str,
    ) -> Result<u64, &'static str> {
        let now = now_ms();
        let mut st = self.lock();
        let record = st
            .records
            .get_mut(id)
            .filter(|r| r.users.iter().any(|u| u == user))
            .ok_or(INVALID_TOKEN)?;
        let Outcome::Matched {
            room,
            expires_at,
            handoffs,
        } = &mut record.outcome
        else {
            return Err(INVALID_TOKEN);
        };
        let handoff = handoffs.get_mut(user).ok_or(INVALID_TOKEN)?;
        if !same(&handoff.token, token) {
            return Err(INVALID_TOKEN);
        }
        if handoff.used {
            return Err(TOKEN_USED);
        }
        if now >= *expires_at {
            return Err(TOKEN_EXPIRED);
        }
        let room = *room;
        if !self.realm.room_exists(room) {
            return Err(MATCH_GONE);
        }
        handoff.used = true;
        st.pending.insert(participant_id, room);
        drop(st);
        self.metrics.service_event(ServiceEvent::MatchmakerAccepted);
        Ok(room.get())
    }

    /// Moves an accepted participant into its matched room (ROOM_JOINED).
    pub fn enter(&self, participant_id: u64) {
        let Some(room) = self.lock().pending.remove(&participant_id) else {
            return;
        };
        match self.realm.enter_matched(participant_id, room) {
            Ok(()) => self
                .hub
                .handle_place_change(participant_id, Place::Room(room)),
            Err(err) => {
                tracing::info!(error = %err, "accepted participant could not enter its match")
            }
        }
    }

    /// The lifecycle tick: expires tickets past their TTL, forgets records
    /// past their retention and prunes matched rooms nobody entered.
    pub fn tick(&self, now: u64) {
        let mut st = self.lock();
        let keep = now.saturating_add(self.config.handoff_ttl_ms);
        let due = st.queue.due(now);
        for id in due {
            if let Some(ticket) = st.queue.remove(&id) {
                st.forget(&ticket);
                let users = ticket.members.iter().map(|m| m.user_id.clone()).collect();
                st.record(id, users, Outcome::Removed, keep);
                self.metrics
                    .service_event(ServiceEvent::MatchmakerTicketsExpired);
            }
        }
        // Records: by retention, and never more than max_tickets of them.
        while let Some((until, _)) = st.keep.front() {
            let over = st.keep.len() > self.config.max_tickets;
            if *until > now && !over {
                break;
            }
            if let Some((_, id)) = st.keep.pop_front() {
                st.records.remove(&id);
            }
        }
        let mut prune = Vec::new();
        while st.rooms.front().is_some_and(|(until, _)| *until <= now) {
            if let Some((_, room)) = st.rooms.pop_front() {
                prune.push(room);
            }
        }
        self.set_gauge(&st);
        drop(st);
        for room in prune {
            self.realm.prune_if_empty(room);
        }
    }

    /// Queued tickets.
    pub fn queued(&self) -> usize {
        self.lock().queue.len()
    }
}
