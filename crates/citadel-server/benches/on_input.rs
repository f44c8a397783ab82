//! The cost of a Lua `citadel.on_input` hook per input bundle, on one core:
//! the VM invocation alone (a trivial handler that accepts, and one that
//! returns a correction table) over a staged batch of 1 or 4 frames, and
//! the whole judged path of one bundle (stage in the actor core, the VM
//! call, apply) next to today's built-in path (`handle_input`). Reported
//! per bundle; the element throughput is frames per second. Not included:
//! the hop to the VM thread and back (one bounded-queue send and one
//! oneshot reply per bundle) and the lock, which the node adds.
//!
//! Run: `cargo bench -p citadel-server --bench on_input`.

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;

use citadel_netcode::actors::{ActorConfig, ActorServer, MovementBatch, Tick};
use citadel_netcode::rewind::RewindParams;
use citadel_server::place::Place;
use citadel_server::runtime::{Caller, Limits, Vm};
use citadel_wire::actor::{NaPresence, NaTransform};
use citadel_wire::tsync::{HelloParams, InputBundle, InputFrame};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const ACCEPT: &str = "citadel.on_input(function(ctx, frame) end)";
const CORRECT: &str = "citadel.on_input(function(ctx, frame) \
    return { position = frame.position, velocity = frame.velocity } end)";
const BUDGET: Duration = Duration::from_millis(2);

/// A core with one predicted owner (participant 1) and its object id.
fn owner_core() -> (ActorServer<u8>, u32) {
    let mut core = ActorServer::new(ActorConfig {
        hello: HelloParams::default(),
        budget: 0,
        interest: None,
        predicted_archetypes: vec![7],
        input_max_speed: 2_000.0,
        input_max_dt: 0.1,
        rewind_history_ticks: 0,
        rewind: RewindParams::default(),
    })
    .expect("default HELLO bounds make a codec");
    core.handle_hello(1, 0, Tick(0));
    let presence = NaPresence {
        archetype_id: 7,
        transform: NaTransform::IDENTITY,
    };
    let id = core
        .handle_presence(1, &presence, Tick(0))
        .expect("a predicted presence");
    while core.poll_output().is_some() {}
    (core, id)
}

/// The next `n` frames of `object_id` after `seq` (circling at 600 cm/s).
fn bundle(object_id: u32, seq: &mut u32, n: u32) -> InputBundle {
    let frames = (0..n)
        .map(|_| {
            *seq += 1;
            let angle = *seq as f32 * 0.05;
            InputFrame {
                input_seq: *seq,
                sim_tick: *seq,
                dt: 1.0 / 60.0,
                object_id,
                ownership_epoch: 1,
                move_velocity: [600.0 * angle.cos(), 600.0 * angle.sin(), 0.0],
                ..InputFrame::default()
            }
        })
        .collect();
    InputBundle {
        acked_snapshot_id: 0,
        last_seen_snapshot_id: 0,
        frames,
    }
}

/// One staged batch of `n` frames (never applied).
fn staged(n: u32) -> MovementBatch {
    let (mut core, id) = owner_core();
    let mut seq = 0;
    let (_, batch) = core.handle_input_staged(1, &bundle(id, &mut seq, n), Tick(1));
    batch.into_iter().next().expect("n frames released")
}

fn load_vm(source: &str) -> Vm {
    let limits = Limits {
        deadline: Duration::from_millis(100),
        tick_deadline: Duration::from_millis(20),
        memory_bytes: 64 * 1024 * 1024,
        scripts_dir: PathBuf::from("."),
    };
    Vm::load_source(&limits, source.as_bytes(), "=bench").expect("the bench script loads")
}

fn bench(c: &mut Criterion) {
    let caller = Caller {
        participant_id: 1,
        user_id: None,
        place: Place::Default,
    };
    let mut group = c.benchmark_group("on_input");
    for (name, source) in [("vm_accept", ACCEPT), ("vm_correct", CORRECT)] {
        let vm = load_vm(source);
        for n in [1u32, 4] {
            let batch = staged(n);
            group.throughput(Throughput::Elements(u64::from(n)));
            group.bench_function(format!("{name}/{n}_frames"), |b| {
                b.iter(|| {
                    let out = vm.on_input(&caller, black_box(&batch), BUDGET);
                    assert!(matches!(out.result, Ok(Ok(_))));
                })
            });
        }
    }
    let vm = load_vm(ACCEPT);
    group.throughput(Throughput::Elements(4));
    let (mut core, id) = owner_core();
    let mut seq = 0;
    group.bench_function("builtin_bundle/4_frames", |b| {
        b.iter(|| {
            let out = core.handle_input(1, &bundle(id, &mut seq, 4), Tick(1));
            assert_eq!(out.applied, 4);
        })
    });
    let (mut core, id) = owner_core();
    let mut seq = 0;
    group.bench_function("judged_bundle/4_frames", |b| {
        b.iter(|| {
            let (_, batch) = core.handle_input_staged(1, &bundle(id, &mut seq, 4), Tick(1));
            let batch = batch.into_iter().next().expect("4 frames released");
            let out = vm.on_input(&caller, &batch, BUDGET);
            let verdicts = match out.result {
                Ok(Ok(v)) => v,
                _ => panic!("the trivial hook accepts"),
            };
            let moved = core.handle_movement(&batch, Some(&verdicts), Tick(1));
            assert_eq!(moved.input.applied, 4);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
