//! Wire benchmarks: framed decode of small envelopes, snapshot encode and
//! decode with 256 changed objects, DeltaBunch encode and decode.
//!
//! Run: `cargo bench -p citadel-wire --bench wire`.

use bytes::BytesMut;
use citadel_wire::netpeer::{BunchBase, ClassSchema, DeltaBunch, FieldCodec, FieldValue};
use citadel_wire::quant::{ScalarCodec, Vector3Codec};
use citadel_wire::quat::QuatMode;
use citadel_wire::tsync::{HelloParams, Snapshot, SnapshotUpdate};
use citadel_wire::{Envelope, decode_framed};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn framed_decode(c: &mut Criterion) {
    const N: usize = 1024;
    let mut stream = BytesMut::new();
    for i in 0..N {
        Envelope::new(1, vec![i as u8; 16]).encode_framed_into(&mut stream);
    }
    let stream = stream.freeze();
    let mut group = c.benchmark_group("framed");
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function("decode_1024x16B", |b| {
        b.iter(|| {
            let mut buf = BytesMut::from(&stream[..]);
            let mut n = 0;
            while let Ok(Some(env)) = decode_framed(&mut buf) {
                n += env.body.len();
            }
            black_box(n)
        })
    });
    group.bench_function("encode_1024x16B", |b| {
        let env = Envelope::new(2, vec![7u8; 16]);
        b.iter(|| {
            let mut out = BytesMut::with_capacity(N * 22);
            for _ in 0..N {
                env.encode_framed_into(&mut out);
            }
            black_box(out.len())
        })
    });
    group.finish();
}

fn snapshot(c: &mut Criterion) {
    let codec = HelloParams::default()
        .codec()
        .unwrap_or_else(|e| panic!("{e}"));
    let updates = (0..256u32)
        .map(|i| SnapshotUpdate {
            object_id: i + 1,
            gen_epoch: 1,
            position: Some([i as f32 * 10.5, -(i as f32) * 3.25, 120.0]),
            rotation: Some([0.0, (i as f32 * 0.01).sin(), 0.0, (i as f32 * 0.01).cos()]),
            velocity: Some([150.0, -20.0, 0.0]),
            last_input_seq: (i % 8 == 0).then_some(i * 3),
        })
        .collect();
    let snap = Snapshot {
        server_tick: 1000,
        snapshot_id: 50,
        base_snapshot_id: 49,
        send_rate_hz: 20,
        removed: vec![3, 9, 27],
        updates,
    };
    let bytes = snap.encode(&codec).unwrap_or_default();
    let mut group = c.benchmark_group("snapshot_256");
    group.bench_function("encode", |b| b.iter(|| black_box(snap.encode(&codec))));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(Snapshot::decode(&bytes, &codec)))
    });
    group.finish();
}

fn delta_bunch(c: &mut Criterion) {
    let schema = ClassSchema::new(
        vec![
            FieldCodec::Bool,
            FieldCodec::IntRange { min: 0, max: 100 },
            FieldCodec::Scalar(
                ScalarCodec::new(-1000.0, 1000.0, 4).unwrap_or_else(|e| panic!("{e}")),
            ),
            FieldCodec::Vector3(
                Vector3Codec::new([-1000.0; 3], [1000.0; 3], 4).unwrap_or_else(|e| panic!("{e}")),
            ),
            FieldCodec::Quat(QuatMode::Bits10),
            FieldCodec::Bytes { max_len: 32 },
        ],
        [7; 16],
        1,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bunch = DeltaBunch {
        object_id: 42,
        result_id: 900,
        base: BunchBase::Delta(899),
        values: vec![
            (0, FieldValue::Bool(true)),
            (1, FieldValue::Int(73)),
            (2, FieldValue::Scalar(12.5)),
            (3, FieldValue::Vector3([1.0, 2.0, 3.0])),
            (4, FieldValue::Quat([0.0, 0.0, 0.0, 1.0])),
            (5, FieldValue::Bytes(b"hello".to_vec())),
        ],
    };
    let bytes = bunch.encode(&schema).unwrap_or_default();
    let mut group = c.benchmark_group("delta_bunch");
    group.bench_function("encode", |b| b.iter(|| black_box(bunch.encode(&schema))));
    group.bench_function("decode", |b| {
        b.iter(|| black_box(DeltaBunch::decode(&bytes, &schema)))
    });
    group.finish();
}

criterion_group!(benches, framed_decode, snapshot, delta_bunch);
criterion_main!(benches);
