//! Realm membership cost: one participant connecting to and leaving the
//! default dimension while `n` room-less participants are already there
//! (what every connect and disconnect pays), and one joining and leaving a
//! room of 50. A flat figure across `n` means membership changes do not
//! copy the whole member list.
//!
//! Run: `cargo bench -p citadel-server --bench realm`

use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use citadel_server::config::RoomsConfig;
use citadel_server::gateway::outbound::{LaneLimits, Outbound};
use citadel_server::metrics::Metrics;
use citadel_server::realm::{DefaultRoomPolicy, Places, Realm};
use citadel_server::router::{LocalRouter, Recipient, Router};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

fn outbound(metrics: &Arc<Metrics>) -> Outbound {
    let limits = LaneLimits {
        reliable_capacity: 64,
        unreliable_capacity: 64,
        max_bytes: 1 << 16,
    };
    Outbound::new(limits, metrics.clone())
}

/// A realm whose room replies go through a router that knows every
/// participant registered with [`register`].
fn realm() -> (Realm, Arc<LocalRouter>) {
    let places = Arc::new(Places::default());
    let router = Arc::new(LocalRouter::new(places.clone()));
    let realm = Realm::new(
        RoomsConfig::default(),
        Arc::new(DefaultRoomPolicy::default()),
        places,
        router.clone(),
    );
    (realm, router)
}

fn register(realm: &Realm, router: &LocalRouter, id: u64, outbound: Outbound) {
    router.attach(Recipient {
        participant_id: id,
        user_id: None,
        outbound: outbound.clone(),
    });
    realm.register(id, None, outbound);
}

fn default_dimension(c: &mut Criterion) {
    let metrics = Arc::new(Metrics::default());
    let mut group = c.benchmark_group("realm_register_unregister");
    for n in [1_000u64, 20_000] {
        let (realm, router) = realm();
        for id in 1..=n {
            register(&realm, &router, id, outbound(&metrics));
        }
        let probe = outbound(&metrics);
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                let place = realm.register(n + 1, None, probe.clone());
                realm.unregister(n + 1);
                black_box(place)
            })
        });
    }
    group.finish();
}

fn room(c: &mut Criterion) {
    let metrics = Arc::new(Metrics::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let (realm, router) = realm();
    let name = Bytes::from_static(b"arena");
    for id in 1..=50u64 {
        register(&realm, &router, id, outbound(&metrics));
        let _ = rt.block_on(realm.join_or_create(id, name.clone()));
    }
    register(&realm, &router, 51, outbound(&metrics));
    c.bench_function("realm_room_join_leave_50", |b| {
        b.iter(|| {
            let room = rt.block_on(realm.join_or_create(51, name.clone()));
            if let Ok(id) = room {
                realm.leave(51, id);
            }
            black_box(room)
        })
    });
}

criterion_group!(benches, default_dimension, room);
criterion_main!(benches);
