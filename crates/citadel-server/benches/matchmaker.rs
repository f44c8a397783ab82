//! Matchmaker formation with 10,000 queued tickets (issue 14's benchmark).
//!
//! The queue holds 10,000 "background" tickets with a mix of properties
//! (mode, region, skill) and queries (mode + region, a skill window, a
//! region OR, side only) that cannot match each other. Each probe is a
//! compatible ticket: `matchmaker.add` → formation → closed room →
//! KIND_MATCHMAKER_MATCHED queued on both players' reliable lanes, through
//! the real `Matchmaker`, `Realm` and `LocalRouter` (no sockets). After a
//! pair forms, one fresh background ticket keeps the queue at 10,000.
//!
//! Prints p50 / p99 / max of add → MATCHED-queued over 20,000 probes and
//! the sustained tickets formed per second on one thread (probe adds,
//! refills and formations all counted in the elapsed time), then runs a
//! criterion group of the same step.
//!
//! Run: `cargo bench -p citadel-server --bench matchmaker`

use std::sync::Arc;
use std::time::{Duration, Instant};

use citadel_server::actors::TransformHub;
use citadel_server::config::{RoomsConfig, TransformSyncConfig};
use citadel_server::gateway::outbound::{LaneLimits, Outbound};
use citadel_server::metrics::Metrics;
use citadel_server::realm::{DefaultRoomPolicy, Places, Realm};
use citadel_server::router::{LocalRouter, Recipient, Router};
use citadel_server::services::matchmaker::query::{Props, Value};
use citadel_server::services::matchmaker::service::Request;
use citadel_server::services::matchmaker::{Matchmaker, MatchmakerConfig};
use citadel_server::services::party::Parties;
use citadel_testkit::TestRng;
use criterion::{Criterion, criterion_group, criterion_main};

const QUEUED: u64 = 10_000;
const MODES: [&str; 3] = ["ranked", "casual", "arena"];
const REGIONS: [&str; 6] = ["eu", "us", "jp", "br", "au", "sa"];

struct Bench {
    mm: Matchmaker,
    realm: Arc<Realm>,
    router: Arc<LocalRouter>,
    metrics: Arc<Metrics>,
    rng: TestRng,
    next_pid: u64,
    rt: tokio::runtime::Runtime,
}

fn request(query: String, props: Props) -> Request {
    Request {
        query,
        properties: props,
        min_count: 2,
        max_count: 2,
        count_multiple: 1,
        party_id: None,
        ttl_ms: 3_600_000,
    }
}

impl Bench {
    fn new() -> Bench {
        let metrics = Arc::new(Metrics::default());
        let places = Arc::new(Places::default());
        let router = Arc::new(LocalRouter::new(places.clone()));
        let rooms = RoomsConfig {
            max_rooms: 1_000_000,
            ..RoomsConfig::default()
        };
        let realm = Arc::new(Realm::new(
            rooms,
            Arc::new(DefaultRoomPolicy::default()),
            places,
            router.clone(),
        ));
        let hub = Arc::new(
            TransformHub::new(
                TransformSyncConfig::default(),
                metrics.clone(),
                router.clone(),
            )
            .unwrap(),
        );
        let config = MatchmakerConfig {
            calls_per_second: u32::MAX,
            call_burst: u32::MAX,
            ..MatchmakerConfig::default()
        };
        let mm = Matchmaker::new(
            config,
            realm.clone(),
            router.clone(),
            hub,
            metrics.clone(),
            Arc::new(Parties::default()),
        );
        let mut bench = Bench {
            mm,
            realm,
            router,
            metrics,
            rng: TestRng::new(0x9e37_79b9_7f4a_7c15),
            next_pid: 1,
            rt: tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        };
        for _ in 0..QUEUED {
            bench.background();
        }
        bench
    }

    /// A connected participant with its own account.
    fn player(&mut self) -> (u64, String) {
        let pid = self.next_pid;
        self.next_pid += 1;
        let user = format!("user-{pid}");
        let limits = LaneLimits {
            reliable_capacity: 8,
            unreliable_capacity: 8,
            max_bytes: 1 << 12,
        };
        self.router.attach(Recipient {
            participant_id: pid,
            user_id: Some(user.clone()),
            outbound: Outbound::new(limits, self.metrics.clone()),
        });
        (pid, user)
    }

    /// Queues one background ticket (side "a": never matches another one).
    fn background(&mut self) {
        let mode = *self.rng.pick(&MODES);
        let region = *self.rng.pick(&REGIONS);
        let skill = (self.rng.next_u64() % 3_000) as f64;
        let query = match self.rng.next_u64() % 4 {
            0 => format!(r#"side == "b" AND mode == "{mode}" AND region == "{region}""#),
            1 => format!(
                r#"side == "b" AND mode == "{mode}" AND skill >= {} AND skill <= {}"#,
                skill - 300.0,
                skill + 300.0
            ),
            2 => {
                let other = *self.rng.pick(&REGIONS);
                format!(r#"side == "b" AND (region == "{region}" OR region == "{other}")"#)
            }
            _ => r#"side == "b""#.to_owned(),
        };
        let props = Props::from([
            ("side".to_owned(), Value::Str("a".into())),
            ("mode".to_owned(), Value::Str(mode.into())),
            ("region".to_owned(), Value::Str(region.into())),
            ("skill".to_owned(), Value::Num(skill)),
        ]);
        let (pid, user) = self.player();
        self.mm.add(pid, &user, request(query, props)).unwrap();
    }

    /// One compatible probe: add, form; returns add → MATCHED time.
    fn probe(&mut self) -> Duration {
        let mode = *self.rng.pick(&MODES);
        let region = *self.rng.pick(&REGIONS);
        let skill = (self.rng.next_u64() % 3_000) as f64;
        let query = if self.rng.next_u64().is_multiple_of(2) {
            format!(r#"side == "a" AND mode == "{mode}" AND region == "{region}""#)
        } else {
            format!(
                r#"side == "a" AND region == "{region}" AND skill >= {} AND skill <= {}"#,
                skill - 500.0,
                skill + 500.0
            )
        };
        let props = Props::from([
            ("side".to_owned(), Value::Str("b".into())),
            ("mode".to_owned(), Value::Str(mode.into())),
            ("region".to_owned(), Value::Str(region.into())),
            ("skill".to_owned(), Value::Num(skill)),
        ]);
        let (pid, user) = self.player();
        let started = Instant::now();
        let id = self.mm.add(pid, &user, request(query, props)).unwrap();
        let room = self.rt.block_on(self.mm.form(&id));
        let took = started.elapsed();
        match room {
            Some(room) => {
                self.realm.prune_if_empty(room);
                self.background();
            }
            None => {
                // Rare: no compatible ticket; keep the queue size steady.
                self.mm.cancel(&user, &id);
            }
        }
        took
    }
}

fn report() {
    let mut bench = Bench::new();
    let mut times: Vec<Duration> = (0..20_000).map(|_| bench.probe()).collect();
    times.sort_unstable();
    let pct = |p: f64| times[((times.len() as f64 * p) as usize).min(times.len() - 1)];
    let formed_before = bench
        .metrics
        .service_events(citadel_server::metrics::ServiceEvent::MatchmakerTicketsFormed);
    let started = Instant::now();
    let mut probes = 0u64;
    while started.elapsed() < Duration::from_secs(3) {
        bench.probe();
        probes += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let formed = bench
        .metrics
        .service_events(citadel_server::metrics::ServiceEvent::MatchmakerTicketsFormed)
        - formed_before;
    println!(
        "matchmaker, {} queued: add->MATCHED p50 {:?} p99 {:?} max {:?}; sustained {:.0} tickets formed/s ({:.0} matches/s, {} probes in {:.1}s, one thread)",
        bench.mm.queued(),
        pct(0.50),
        pct(0.99),
        times[times.len() - 1],
        formed as f64 / elapsed,
        formed as f64 / 2.0 / elapsed,
        probes,
        elapsed
    );
}

fn add_and_form(c: &mut Criterion) {
    report();
    let mut bench = Bench::new();
    let mut group = c.benchmark_group("matchmaker_10k_queued");
    group.sample_size(20);
    group.bench_function("add_to_matched_pair", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| bench.probe()).sum())
    });
    group.finish();
}

criterion_group!(benches, add_and_form);
criterion_main!(benches);
