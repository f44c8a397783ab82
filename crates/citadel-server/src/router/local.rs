//! [`LocalRouter`]: delivery to the connections of this node.
//!
//! It keeps a directory of attached connections (by participant and by
//! account) and reads each place's member list from the realm's published
//! [`Places`] index, without the realm's lock. Its locks are short and never
//! held across an `.await`; a push only takes the recipient's lane mutex.
//! What it is not: it does not forward to other nodes (a cluster router
//! wraps it) and it never changes membership.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use super::{Fanout, Lane, Outbound, Recipient, Router, push};
use crate::place::Place;
use crate::realm::Places;

#[derive(Debug, Default)]
struct Directory {
    participants: HashMap<u64, Recipient>,
    /// Participant ids of each account's live connections.
    accounts: HashMap<String, Vec<u64>>,
}

/// The single-node router.
#[derive(Debug)]
pub struct LocalRouter {
    directory: RwLock<Directory>,
    places: Arc<Places>,
}

impl LocalRouter {
    /// A router over the realm's published places.
    pub fn new(places: Arc<Places>) -> Self {
        LocalRouter {
            directory: RwLock::new(Directory::default()),
            places,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Directory> {
        self.directory.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Directory> {
        self.directory.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The lanes of one attached connection (the directory lock is released
    /// before the caller pushes).
    fn outbound_of(&self, participant_id: u64) -> Option<Outbound> {
        self.read()
            .participants
            .get(&participant_id)
            .map(|r| r.outbound.clone())
    }

    /// Attached connections.
    pub fn len(&self) -> usize {
        self.read().participants.len()
    }

    /// Whether no connection is attached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Router for LocalRouter {
    fn attach(&self, recipient: Recipient) {
        let mut dir = self.write();
        if let Some(user) = &recipient.user_id {
            dir.accounts
                .entry(user.clone())
                .or_default()
                .push(recipient.participant_id);
        }
        dir.participants.insert(recipient.participant_id, recipient);
    }

    fn detach(&self, participant_id: u64) {
        let mut dir = self.write();
        let Some(gone) = dir.participants.remove(&participant_id) else {
            return;
        };
        if let Some(user) = gone.user_id
            && let Some(ids) = dir.accounts.get_mut(&user)
        {
            ids.retain(|id| *id != participant_id);
            if ids.is_empty() {
                dir.accounts.remove(&user);
            }
        }
    }

    fn to_participant(&self, participant_id: u64, lane: Lane, frame: Bytes) -> bool {
        self.outbound_of(participant_id)
            .is_some_and(|o| push(&o, lane, frame))
    }

    fn packed_to_participant(&self, participant_id: u64, packed: Bytes, envelopes: usize) -> usize {
        self.outbound_of(participant_id)
            .map_or(0, |o| o.send_reliable_packed(packed, envelopes))
    }

    fn reliable_room(&self, participant_id: u64) -> Option<usize> {
        self.outbound_of(participant_id).map(|o| o.reliable_room())
    }

    fn to_account(&self, user_id: &str, lane: Lane, frame: Bytes) -> Fanout {
        let dir = self.read();
        let Some(ids) = dir.accounts.get(user_id) else {
            return Fanout::default();
        };
        Fanout::count(
            ids.iter()
                .filter_map(|id| dir.participants.get(id))
                .map(|r| push(&r.outbound, lane, frame.clone())),
        )
    }

    fn to_place(&self, place: Place, except: Option<u64>, lane: Lane, frame: Bytes) -> usize {
        let Some(scope) = self.places.scope(place) else {
            return 0;
        };
        let members = scope.members();
        members
            .iter()
            .filter(|m| Some(m.participant_id) != except)
            .filter(|m| push(&m.outbound, lane, frame.clone()))
            .count()
    }

    fn to_everyone(&self, lane: Lane, frame: Bytes) -> usize {
        self.read()
            .participants
            .values()
            .filter(|r| push(&r.outbound, lane, frame.clone()))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RoomsConfig;
    use crate::gateway::outbound::LaneLimits;
    use crate::metrics::Metrics;
    use crate::realm::{DefaultRoomPolicy, Realm};
    use crate::router::frame;
    use citadel_wire::Envelope;

    struct Node {
        router: Arc<LocalRouter>,
        realm: Realm,
        metrics: Arc<Metrics>,
    }

    fn node() -> Node {
        let places = Arc::new(Places::default());
        let router = Arc::new(LocalRouter::new(places.clone()));
        let realm = Realm::new(
            RoomsConfig::default(),
            Arc::new(DefaultRoomPolicy::default()),
            places,
            router.clone(),
        );
        Node {
            router,
            realm,
            metrics: Arc::new(Metrics::default()),
        }
    }

    impl Node {
        fn connect(&self, participant_id: u64, user: Option<&str>) -> Outbound {
            let limits = LaneLimits {
                reliable_capacity: 16,
                unreliable_capacity: 16,
                max_bytes: 1 << 16,
            };
            let outbound = Outbound::new(limits, self.metrics.clone());
            self.router.attach(Recipient {
                participant_id,
                user_id: user.map(str::to_owned),
                outbound: outbound.clone(),
            });
            self.realm
                .register(participant_id, user.map(str::to_owned), outbound.clone());
            outbound
        }
    }

    fn probe(n: u8) -> Bytes {
        frame(&Envelope::new(200, vec![n]))
    }

    #[test]
    fn one_participant_on_the_lane_asked_for() {
        let node = node();
        let a = node.connect(1, None);
        let b = node.connect(2, None);
        assert!(node.router.to_participant(1, Lane::Reliable, probe(1)));
        assert!(node.router.to_participant(1, Lane::Unreliable, probe(2)));
        assert!(!node.router.to_participant(9, Lane::Reliable, probe(3)));
        assert_eq!(a.drain(), (vec![probe(1)], vec![probe(2)]));
        assert_eq!(b.drain(), (vec![], vec![]));
    }

    #[test]
    fn every_session_of_one_account_and_no_one_else() {
        let node = node();
        let phone = node.connect(1, Some("u-1"));
        let laptop = node.connect(2, Some("u-1"));
        let other = node.connect(3, Some("u-2"));
        let guest = node.connect(4, None);
        assert_eq!(
            node.router
                .to_account("u-1", Lane::Reliable, probe(7))
                .queued,
            2
        );
        assert_eq!(phone.drain().0, vec![probe(7)]);
        assert_eq!(laptop.drain().0, vec![probe(7)]);
        assert!(other.drain().0.is_empty() && guest.drain().0.is_empty());
        node.router.detach(1);
        assert_eq!(
            node.router
                .to_account("u-1", Lane::Reliable, probe(8))
                .queued,
            1
        );
        laptop.close(crate::metrics::CloseReason::ClientClosed);
        let refused = node.router.to_account("u-1", Lane::Reliable, probe(9));
        assert_eq!((refused.queued, refused.refused), (0, 1));
        node.router.detach(2);
        assert_eq!(
            node.router.to_account("u-1", Lane::Reliable, probe(9)),
            Fanout::default()
        );
        assert_eq!(node.router.len(), 2);
    }

    #[tokio::test]
    async fn a_place_except_the_sender_then_everyone() {
        let node = node();
        let a = node.connect(1, None);
        let b = node.connect(2, None);
        let c = node.connect(3, None);
        let room = node
            .realm
            .join_or_create(3, Bytes::from_static(b"arena"))
            .await
            .unwrap();
        c.drain(); // ROOM_JOINED
        let sent = node
            .router
            .to_place(Place::Default, Some(1), Lane::Unreliable, probe(1));
        assert_eq!(sent, 1, "b only: a is the sender, c is in the room");
        assert_eq!(b.drain().1, vec![probe(1)]);
        assert!(a.drain().1.is_empty() && c.drain().1.is_empty());
        assert_eq!(
            node.router
                .to_place(Place::Room(room), None, Lane::Reliable, probe(2)),
            1
        );
        assert_eq!(c.drain().0, vec![probe(2)]);
        assert_eq!(node.router.to_everyone(Lane::Reliable, probe(3)), 3);
        for outbound in [&a, &b, &c] {
            assert_eq!(outbound.drain().0, vec![probe(3)]);
        }
        node.realm.unregister(3);
        assert_eq!(
            node.router
                .to_place(Place::Room(room), None, Lane::Reliable, probe(4)),
            0,
            "a pruned room has no scope"
        );
    }

    #[test]
    fn a_closing_connection_is_not_counted() {
        let node = node();
        let a = node.connect(1, None);
        a.close(crate::metrics::CloseReason::ClientClosed);
        assert!(!node.router.to_participant(1, Lane::Reliable, probe(1)));
        assert_eq!(node.router.to_everyone(Lane::Unreliable, probe(2)), 0);
    }
}
