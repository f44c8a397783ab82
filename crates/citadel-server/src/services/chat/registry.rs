//! Live subscriptions of this node: one per (connection, channel), each
//! with its presence, the authority epoch captured at join and the resync
//! state. One owner: a mutex never held across an `.await`; deliveries
//! under it only push to lanes through the router (which never blocks).
//!
//! Resync: a durable event that a subscriber's lane drops flags the
//! subscription and records the dropped event id; a `resync_required`
//! (with the channel's watermark) is then offered until it is queued. The
//! flag clears only when the client acknowledges a history watermark at or
//! past every dropped event; an older acknowledgement re-sends the notice.
//!
//! What it is not: no authorisation and no storage.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use citadel_wire::service::ChatPresence;

use super::ChatError;
use super::channel::Target;
use super::events;
use crate::metrics::{Metrics, ServiceEvent};
use crate::place::Place;
use crate::router::{Lane, Router};

#[derive(Debug, Default, Clone, Copy)]
struct Resync {
    flagged: bool,
    notified: bool,
    dropped_up_to: u64,
}

#[derive(Debug)]
struct Sub {
    subscription: String,
    presence: ChatPresence,
    epoch: u64,
    resync: Resync,
}

#[derive(Debug)]
struct LiveChannel {
    target: Target,
    watermark: u64,
    subs: BTreeMap<u64, Sub>,
}

#[derive(Debug, Default)]
struct State {
    channels: HashMap<String, LiveChannel>,
    by_participant: HashMap<u64, BTreeSet<String>>,
    serial: u64,
}

/// A subscription as a join reply shows it.
#[derive(Debug, Clone)]
pub struct Joined {
    /// `sub_<16 hex>`.
    pub subscription: String,
    /// Every presence of the channel on this node (the joiner included).
    pub presences: Vec<ChatPresence>,
    /// The joiner's presence.
    pub presence: ChatPresence,
}

/// One subscription, for the re-authorisation sweep.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Channel.
    pub channel_id: String,
    /// Its target.
    pub target: Target,
    /// Connection.
    pub participant_id: u64,
    /// Account.
    pub user_id: String,
    /// Authority epoch captured at join.
    pub epoch: u64,
}

/// The subscription registry.
pub struct Registry {
    state: Mutex<State>,
    router: Arc<dyn Router>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// Bounds of one join.
#[derive(Debug, Clone, Copy)]
pub struct JoinBounds {
    /// `chat.max_subscriptions_per_connection`.
    pub per_connection: usize,
    /// `chat.max_subscribers_per_channel`.
    pub per_channel: usize,
}

impl Registry {
    /// An empty registry delivering through `router`.
    pub fn new(router: Arc<dyn Router>, metrics: Arc<Metrics>) -> Self {
        Registry {
            state: Mutex::new(State::default()),
            router,
            metrics,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn offer(&self, participant_id: u64, frame: Bytes) -> bool {
        self.router
            .to_participant(participant_id, Lane::Offered, frame)
    }

    /// Subscribes `participant_id` (idempotent for the same connection);
    /// a new presence is announced to the channel's other subscribers.
    pub fn join(
        &self,
        channel_id: &str,
        target: Target,
        participant_id: u64,
        user_id: &str,
        watermark: u64,
        bounds: JoinBounds,
    ) -> Result<Joined, ChatError> {
        let mut st = self.lock();
        let st = &mut *st;
        let existing = st
            .channels
            .get(channel_id)
            .and_then(|c| c.subs.get(&participant_id))
            .map(|s| (s.subscription.clone(), s.presence.clone()));
        let (subscription, presence) = match existing {
            Some(found) => found,
            None => {
                let mine = st
                    .by_participant
                    .get(&participant_id)
                    .map_or(0, BTreeSet::len);
                let theirs = st.channels.get(channel_id).map_or(0, |c| c.subs.len());
                if mine >= bounds.per_connection || theirs >= bounds.per_channel {
                    self.metrics
                        .service_event(ServiceEvent::ChatSubscriptionLimit);
                    return Err(ChatError::SubscriptionLimit);
                }
                st.serial += 1;
                let subscription = format!("sub_{:016x}", st.serial);
                let presence = ChatPresence {
                    presence_id: format!("pr_{:016x}", st.serial),
                    user_id: user_id.to_owned(),
                };
                let channel =
                    st.channels
                        .entry(channel_id.to_owned())
                        .or_insert_with(|| LiveChannel {
                            target: target.clone(),
                            watermark,
                            subs: BTreeMap::new(),
                        });
                channel.watermark = channel.watermark.max(watermark);
                let frame = events::presence_join(channel_id, target.channel_type(), &presence);
                for pid in channel.subs.keys() {
                    self.offer(*pid, frame.clone());
                }
                channel.subs.insert(
                    participant_id,
                    Sub {
                        subscription: subscription.clone(),
                        presence: presence.clone(),
                        epoch: st.serial,
                        resync: Resync::default(),
                    },
                );
                st.by_participant
                    .entry(participant_id)
                    .or_default()
                    .insert(channel_id.to_owned());
                (subscription, presence)
            }
        };
        let presences = st
            .channels
            .get(channel_id)
            .map(|c| c.subs.values().map(|s| s.presence.clone()).collect())
            .unwrap_or_default();
        Ok(Joined {
            subscription,
            presences,
            presence,
        })
    }

    /// The target and presence of the connection's subscription.
    pub fn subscribed(
        &self,
        channel_id: &str,
        participant_id: u64,
    ) -> Option<(Target, ChatPresence)> {
        let st = self.lock();
        let channel = st.channels.get(channel_id)?;
        let sub = channel.subs.get(&participant_id)?;
        Some((channel.target.clone(), sub.presence.clone()))
    }

    /// Removes one subscription: `presence.leave` to the others, and
    /// `access.revoked` to the subscriber itself when `revoked`.
    pub fn remove(&self, channel_id: &str, participant_id: u64, revoked: bool) -> bool {
        self.remove_in(&mut self.lock(), channel_id, participant_id, revoked)
    }

    fn remove_in(
        &self,
        st: &mut State,
        channel_id: &str,
        participant_id: u64,
        revoked: bool,
    ) -> bool {
        let Some(channel) = st.channels.get_mut(channel_id) else {
            return false;
        };
        let Some(sub) = channel.subs.remove(&participant_id) else {
            return false;
        };
        let leave = events::presence_leave(channel_id, &sub.presence);
        for pid in channel.subs.keys() {
            self.offer(*pid, leave.clone());
        }
        if revoked {
            self.metrics.service_event(ServiceEvent::ChatRevoked);
            self.offer(
                participant_id,
                events::access_revoked(channel_id, &sub.presence),
            );
        }
        if channel.subs.is_empty() {
            st.channels.remove(channel_id);
        }
        if let Some(set) = st.by_participant.get_mut(&participant_id) {
            set.remove(channel_id);
            if set.is_empty() {
                st.by_participant.remove(&participant_id);
            }
        }
        true
    }

    /// Revokes every subscription of `channel_id` (of `user` only, when
    /// given): `access.revoked` to each, `presence.leave` to the others.
    pub fn revoke_channel(&self, channel_id: &str, user: Option<&str>) {
        let mut st = self.lock();
        let affected: Vec<u64> = st.channels.get(channel_id).map_or_else(Vec::new, |c| {
            c.subs
                .iter()
                .filter(|(_, s)| user.is_none_or(|u| s.presence.user_id == u))
                .map(|(pid, _)| *pid)
                .collect()
        });
        for pid in affected {
            self.remove_in(&mut st, channel_id, pid, true);
        }
    }

    fn channels_of(&self, participant_id: u64) -> Vec<(String, Target)> {
        let st = self.lock();
        st.by_participant
            .get(&participant_id)
            .map(|set| {
                set.iter()
                    .filter_map(|id| st.channels.get(id).map(|c| (id.clone(), c.target.clone())))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The connection ended: every subscription goes (the others see
    /// `presence.leave`; the closing connection is not written to).
    pub fn disconnect(&self, participant_id: u64) {
        for (channel_id, _) in self.channels_of(participant_id) {
            self.remove(&channel_id, participant_id, false);
        }
    }

    /// The connection moved to `place`: its room subscriptions elsewhere
    /// are revoked.
    pub fn place_changed(&self, participant_id: u64, place: Place) {
        for (channel_id, target) in self.channels_of(participant_id) {
            if let Target::Room(room) = target
                && place != Place::Room(room)
            {
                self.remove(&channel_id, participant_id, true);
            }
        }
    }

    /// Offers a committed durable event to every subscriber of the
    /// channel; a drop flags the subscription for resync. Returns
    /// (queued, dropped).
    pub fn deliver(&self, channel_id: &str, event_id: u64, frame: &Bytes) -> (u64, u64) {
        let mut st = self.lock();
        let Some(channel) = st.channels.get_mut(channel_id) else {
            return (0, 0);
        };
        channel.watermark = channel.watermark.max(event_id);
        let watermark = channel.watermark;
        let (mut queued, mut dropped) = (0, 0);
        for (pid, sub) in channel.subs.iter_mut() {
            if sub.resync.flagged && !sub.resync.notified {
                self.notify_resync(channel_id, *pid, sub, watermark);
            }
            if self.offer(*pid, frame.clone()) {
                queued += 1;
            } else {
                dropped += 1;
                sub.resync.dropped_up_to = sub.resync.dropped_up_to.max(event_id);
                if !sub.resync.flagged {
                    sub.resync.flagged = true;
                    sub.resync.notified = false;
                }
            }
        }
        self.metrics.service_n(ServiceEvent::ChatLiveQueued, queued);
        self.metrics
            .service_n(ServiceEvent::ChatLiveDropped, dropped);
        (queued, dropped)
    }

    fn notify_resync(&self, channel_id: &str, participant_id: u64, sub: &mut Sub, watermark: u64) {
        if self.offer(
            participant_id,
            events::resync_required(channel_id, watermark),
        ) {
            sub.resync.notified = true;
            self.metrics.service_event(ServiceEvent::ChatResyncSent);
        }
    }

    /// Offers every pending `resync_required` again (the background tick).
    pub fn poll_resync(&self) {
        let mut st = self.lock();
        for (channel_id, channel) in st.channels.iter_mut() {
            let watermark = channel.watermark;
            for (pid, sub) in channel.subs.iter_mut() {
                if sub.resync.flagged && !sub.resync.notified {
                    self.notify_resync(channel_id, *pid, sub, watermark);
                }
            }
        }
    }

    /// The client applied history up to `watermark`: the flag clears if
    /// that covers every dropped event, else the notice is sent again.
    pub fn acknowledge(&self, channel_id: &str, participant_id: u64, watermark: u64) {
        let mut st = self.lock();
        let Some(channel) = st.channels.get_mut(channel_id) else {
            return;
        };
        channel.watermark = channel.watermark.max(watermark);
        let current = channel.watermark;
        let Some(sub) = channel.subs.get_mut(&participant_id) else {
            return;
        };
        if !sub.resync.flagged {
            return;
        }
        if watermark >= sub.resync.dropped_up_to {
            sub.resync = Resync::default();
        } else {
            sub.resync.notified = false;
            self.notify_resync(channel_id, participant_id, sub, current);
        }
    }

    /// Subscriptions of `channel_id` flagged for resync (tests, operators).
    pub fn flagged(&self, channel_id: &str) -> usize {
        let st = self.lock();
        st.channels
            .get(channel_id)
            .map_or(0, |c| c.subs.values().filter(|s| s.resync.flagged).count())
    }

    /// Offers an ephemeral frame (typing) to every subscriber but `except`;
    /// drops are not flagged.
    pub fn broadcast(&self, channel_id: &str, except: u64, frame: &Bytes) {
        let st = self.lock();
        if let Some(channel) = st.channels.get(channel_id) {
            for pid in channel.subs.keys().filter(|pid| **pid != except) {
                self.offer(*pid, frame.clone());
            }
        }
    }

    /// Every subscription that is not a room's (those are revoked by the
    /// place hook), plus room ones, for the re-authorisation sweep.
    pub fn entries(&self) -> Vec<Entry> {
        let st = self.lock();
        let mut out = Vec::new();
        for (channel_id, channel) in &st.channels {
            for (pid, sub) in &channel.subs {
                out.push(Entry {
                    channel_id: channel_id.clone(),
                    target: channel.target.clone(),
                    participant_id: *pid,
                    user_id: sub.presence.user_id.clone(),
                    epoch: sub.epoch,
                });
            }
        }
        out
    }

    /// Revokes the subscription if it is still the one captured at `epoch`.
    pub fn revoke_if(&self, entry: &Entry) {
        let current = {
            let st = self.lock();
            st.channels
                .get(&entry.channel_id)
                .and_then(|c| c.subs.get(&entry.participant_id))
                .map(|s| s.epoch)
        };
        if current == Some(entry.epoch) {
            self.remove(&entry.channel_id, entry.participant_id, true);
        }
    }
}
