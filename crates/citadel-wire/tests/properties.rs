//! Property tests: every body type round-trips encode → decode, and every
//! decoder survives arbitrary bytes without panicking.

use bytes::{Bytes, BytesMut};
use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState, NaTransform};
use citadel_wire::netpeer::{
    BunchBase, ClassSchema, CollectionDelta, CollectionItem, DeltaBunch, FieldCodec, FieldValue,
    RepAck, RepAckEntry, RepId, RepSchema, RepSchemaEntry,
};
use citadel_wire::protocol::{
    AuthRequest, AuthResult, PeerPosition, Position, RpcRequest, RpcResponse,
};
use citadel_wire::room::{RoomCreate, RoomJoin, RoomJoined, RoomLeave, RoomMapReady};
use citadel_wire::service::{ChatEvent, MatchmakerMatched, Notification};
use citadel_wire::tsync::{
    FireCommand, HelloParams, InputBundle, InputFrame, Rewind, Role, RoleChange, RoleEvent,
    Snapshot, SnapshotUpdate, TsyncAck,
};
use citadel_wire::{Envelope, WireBody, decode_datagram, decode_framed};
use proptest::prelude::*;

fn round_trip<T: WireBody + PartialEq + std::fmt::Debug>(value: &T) {
    let bytes = value.to_bytes();
    let back = T::decode_body(&bytes).unwrap_or_else(|e| panic!("{value:?}: {e:?}"));
    assert_eq!(&back, value);
}

fn finite() -> impl Strategy<Value = f32> {
    -1.0e6f32..1.0e6f32
}

fn transform() -> impl Strategy<Value = NaTransform> {
    (
        prop::array::uniform3(finite()),
        prop::array::uniform4(finite()),
        prop::array::uniform3(finite()),
    )
        .prop_map(|(position, rotation, velocity)| NaTransform {
            position,
            rotation,
            velocity,
        })
}

fn spawn() -> impl Strategy<Value = NaSpawn> {
    (any::<u32>(), any::<u16>(), any::<u64>(), transform()).prop_map(
        |(object_id, archetype_id, owner, transform)| NaSpawn {
            object_id,
            archetype_id,
            owner,
            transform,
        },
    )
}

fn frame() -> impl Strategy<Value = InputFrame> {
    (
        (
            any::<u32>(),
            any::<u32>(),
            finite(),
            any::<u32>(),
            any::<u32>(),
        ),
        prop::array::uniform3(finite()),
        any::<u8>(),
        prop::collection::vec(any::<u8>(), 0..40),
        prop::option::of((
            prop::array::uniform3(finite()),
            prop::array::uniform3(finite()),
        )),
    )
        .prop_map(
            |(
                (input_seq, sim_tick, dt, object_id, ownership_epoch),
                move_velocity,
                flags,
                payload,
                fire,
            )| {
                let fire = fire.map(|(origin, direction)| FireCommand { origin, direction });
                InputFrame {
                    input_seq,
                    sim_tick,
                    dt,
                    object_id,
                    ownership_epoch,
                    move_velocity,
                    flags: (flags & !1) | u8::from(fire.is_some()),
                    payload: Bytes::from(payload),
                    fire,
                }
            },
        )
}

fn example_schema() -> ClassSchema {
    ClassSchema::new(
        vec![
            FieldCodec::Bool,
            FieldCodec::IntRange {
                min: -50,
                max: 1000,
            },
            FieldCodec::Bytes { max_len: 64 },
            FieldCodec::Collection {
                item: Box::new(FieldCodec::IntRange { min: 0, max: 1000 }),
                max_items: 16,
            },
            FieldCodec::IntRange {
                min: i64::MIN,
                max: i64::MAX,
            },
        ],
        [9; 16],
        3,
    )
    .unwrap()
}

fn field_values() -> impl Strategy<Value = Vec<(u16, FieldValue)>> {
    let item = (any::<u32>(), any::<u32>(), any::<u64>(), 0i64..=1000)
        .prop_map(|(index, generation, rep_key, v)| (RepId { index, generation }, rep_key, v));
    (
        prop::option::of(any::<bool>()),
        prop::option::of(-50i64..=1000),
        prop::option::of(prop::collection::vec(any::<u8>(), 0..=64)),
        prop::option::of(prop::collection::vec(item, 0..12)),
        prop::option::of(any::<i64>()),
    )
        .prop_map(|(b, i, bytes, items, wide)| {
            let mut out = Vec::new();
            if let Some(b) = b {
                out.push((0, FieldValue::Bool(b)));
            }
            if let Some(i) = i {
                out.push((1, FieldValue::Int(i)));
            }
            if let Some(bytes) = bytes {
                out.push((2, FieldValue::Bytes(bytes)));
            }
            if let Some(mut items) = items {
                items.sort_by_key(|(id, _, _)| *id);
                items.dedup_by_key(|(id, _, _)| *id);
                let mut delta = CollectionDelta::default();
                for (n, (id, rep_key, v)) in items.into_iter().enumerate() {
                    match n % 3 {
                        0 => delta.removed.push(id),
                        1 => delta.added.push(CollectionItem {
                            id,
                            rep_key,
                            value: FieldValue::Int(v),
                        }),
                        _ => delta.changed.push(CollectionItem {
                            id,
                            rep_key,
                            value: FieldValue::Int(v),
                        }),
                    }
                }
                out.push((3, FieldValue::Collection(delta)));
            }
            if let Some(w) = wide {
                out.push((4, FieldValue::Int(w)));
            }
            out
        })
}

proptest! {
    #[test]
    fn framed_round_trip(kind in any::<u16>(), body in prop::collection::vec(any::<u8>(), 0..300), split in 0usize..400) {
        let env = Envelope::new(kind, body);
        let bytes = env.encode_framed();
        let cut = split.min(bytes.len());
        let mut buf = BytesMut::from(&bytes[..cut]);
        if cut < bytes.len() {
            prop_assert_eq!(decode_framed(&mut buf).unwrap(), None);
            buf.extend_from_slice(&bytes[cut..]);
        }
        prop_assert_eq!(decode_framed(&mut buf).unwrap(), Some(env.clone()));
        prop_assert_eq!(decode_datagram(&env.encode_datagram()).unwrap(), env);
    }

    #[test]
    fn session_bodies_round_trip(id in any::<u64>(), method in ".{0,40}", payload in prop::collection::vec(any::<u8>(), 0..64),
                                 status in any::<u8>(), x in any::<f32>(), y in any::<f32>(), user in ".{0,30}", reason in any::<u8>()) {
        round_trip(&RpcRequest { request_id: id, method: method.clone(), payload: Bytes::from(payload.clone()) });
        round_trip(&RpcResponse { request_id: id, status, payload: Bytes::from(payload.clone()) });
        round_trip(&PeerPosition { sender_id: id, payload: Bytes::from(payload) });
        round_trip(&AuthRequest { token: user.clone() });
        round_trip(&AuthResult::Authenticated { user_id: user });
        round_trip(&AuthResult::Rejected { reason_class: reason });
        round_trip(&AuthResult::Guest);
        let p = Position::decode(&Position { x, y }.encode()).unwrap();
        prop_assert_eq!((p.x.to_bits(), p.y.to_bits()), (x.to_bits(), y.to_bits()));
    }

    #[test]
    fn actor_and_room_bodies_round_trip(s in spawn(), spawns in prop::collection::vec(spawn(), 0..5), t in transform(),
                                        room_id in any::<u64>(), map in ".{0,20}", mode in ".{0,10}", params in prop::collection::vec(any::<u8>(), 0..50)) {
        round_trip(&s);
        round_trip(&NaSpawnBatch { spawns });
        round_trip(&NaPresence { archetype_id: s.archetype_id, transform: t });
        round_trip(&NaState { object_id: s.object_id, transform: t });
        round_trip(&NaDespawn { object_id: s.object_id });
        round_trip(&RoomCreate { params });
        round_trip(&RoomJoin { room_id });
        round_trip(&RoomLeave { room_id });
        round_trip(&RoomMapReady { room_id });
        round_trip(&RoomJoined { room_id, map, mode });
    }

    #[test]
    fn tsync_bodies_round_trip(frames in prop::collection::vec(frame(), 0..6), acked in any::<u32>(), seen in any::<u32>(),
                               history in any::<u32>(), role in 0u8..4, event in 0u8..4, owner in any::<u64>(),
                               hit in prop::array::uniform3(finite()), send in any::<u8>(), sim in any::<u8>()) {
        round_trip(&InputBundle { acked_snapshot_id: acked, last_seen_snapshot_id: seen, frames });
        round_trip(&TsyncAck { acked_snapshot_id: acked | 1, history });
        round_trip(&RoleChange {
            object_id: acked, role: Role::from_byte(role).unwrap(), owner, ownership_epoch: seen,
            gen_epoch: 7, event: RoleEvent::from_byte(event).unwrap(),
        });
        round_trip(&Rewind { input_seq: acked, flags: 1, object_id: seen, hit_point: hit, rewind_tick: 9 });
        round_trip(&HelloParams { send_rate_hz: send, sim_rate_hz: sim, ..HelloParams::default() });
    }

    #[test]
    fn snapshot_round_trips_within_quantization(
        objects in prop::collection::vec((any::<u32>(), any::<u16>(), prop::array::uniform3(-200_000f32..200_000f32),
                                          prop::array::uniform3(-30_000f32..30_000f32), any::<bool>(), prop::option::of(any::<u32>())), 0..40),
        removed in prop::collection::vec(any::<u32>(), 0..20),
    ) {
        let codec = HelloParams::default().codec().unwrap();
        let updates: Vec<SnapshotUpdate> = objects.iter().map(|(id, gen_epoch, p, v, with_vel, seq)| SnapshotUpdate {
            object_id: *id, gen_epoch: *gen_epoch,
            position: Some(codec.position.quantize(*p).unwrap()),
            rotation: Some([0.0, 0.0, 0.0, 1.0]),
            velocity: with_vel.then(|| codec.velocity.quantize(*v).unwrap()),
            last_input_seq: *seq,
        }).collect();
        let snap = Snapshot { server_tick: 5, snapshot_id: 6, base_snapshot_id: 4, send_rate_hz: 20, removed, updates };
        let bytes = snap.encode(&codec).unwrap();
        prop_assert_eq!(bytes.len(), snap.bit_len(&codec).div_ceil(8));
        let back = Snapshot::decode(&bytes, &codec).unwrap();
        prop_assert_eq!(back.encode(&codec).unwrap(), bytes);
        prop_assert_eq!(back.removed, snap.removed);
        for (a, b) in back.updates.iter().zip(&snap.updates) {
            prop_assert_eq!(a.position, b.position);
            prop_assert_eq!(a.velocity, b.velocity);
            prop_assert_eq!(a.last_input_seq, b.last_input_seq);
        }
    }

    #[test]
    fn delta_bunch_round_trips(values in field_values(), object_id in any::<u32>(), result_id in 1u64.., base in prop::option::of(1u64..)) {
        let schema = example_schema();
        let bunch = DeltaBunch { object_id, result_id, base: base.map_or(BunchBase::Full, BunchBase::Delta), values };
        let bytes = bunch.encode(&schema).unwrap();
        prop_assert_eq!(DeltaBunch::decode(&bytes, &schema).unwrap(), bunch);
    }

    #[test]
    fn tables_round_trip(acks in prop::collection::vec((any::<u32>(), any::<u64>(), any::<u32>()), 0..30),
                         schemas in prop::collection::vec((any::<u32>(), any::<[u8; 16]>(), any::<u32>()), 0..10)) {
        round_trip(&RepAck { entries: acks.into_iter().map(|(object_id, acked_result_id, history)| RepAckEntry { object_id, acked_result_id, history }).collect() });
        round_trip(&RepSchema { entries: schemas.into_iter().map(|(class_id, schema_hash, layout_version)| RepSchemaEntry { class_id, schema_hash, layout_version }).collect() });
    }

    #[test]
    fn json_bodies_round_trip(ticket in "[A-Za-z0-9_-]{1,24}", id in any::<u32>(), text in ".{0,30}") {
        round_trip(&MatchmakerMatched { ticket_id: ticket.clone(), match_id: u64::from(id), join_token: text.clone(), expires_at: 1_735_689_630_000 });
        round_trip(&Notification {
            id: ticket, code: i64::from(id), subject: text.clone(), content: serde_json::json!({"k": text}),
            sender: "server".into(), created_at_unix_ms: 5, read_at_unix_ms: Some(9),
        });
    }

    #[test]
    fn decoders_never_panic(kind in 1u16..=28, body in prop::collection::vec(any::<u8>(), 0..200)) {
        let codec = HelloParams::default().codec().unwrap();
        let schema = example_schema();
        let _ = match kind {
            1 => Position::decode_body(&body).map(|_| ()),
            2 => PeerPosition::decode_body(&body).map(|_| ()),
            3 => RpcRequest::decode_body(&body).map(|_| ()),
            4 => RpcResponse::decode_body(&body).map(|_| ()),
            5 => AuthRequest::decode_body(&body).map(|_| ()),
            6 => AuthResult::decode_body(&body).map(|_| ()),
            7 => HelloParams::decode_body(&body).map(|_| ()),
            8 => Snapshot::decode(&body, &codec).map(|_| ()),
            9 => InputBundle::decode_body(&body).map(|_| ()),
            10 => TsyncAck::decode_body(&body).map(|_| ()),
            11 => RoleChange::decode_body(&body).map(|_| ()),
            12 => Rewind::decode_body(&body).map(|_| ()),
            13 => DeltaBunch::decode(&body, &schema).map(|_| ()),
            14 => RepAck::decode_body(&body).map(|_| ()),
            15 => RepSchema::decode_body(&body).map(|_| ()),
            16 => NaPresence::decode_body(&body).map(|_| ()),
            17 => NaSpawn::decode_body(&body).map(|_| ()),
            18 => NaSpawnBatch::decode_body(&body).map(|_| ()),
            19 => NaDespawn::decode_body(&body).map(|_| ()),
            20 => NaState::decode_body(&body).map(|_| ()),
            21 => RoomCreate::decode_body(&body).map(|_| ()),
            22 => RoomJoin::decode_body(&body).map(|_| ()),
            23 => RoomJoined::decode_body(&body).map(|_| ()),
            24 => RoomLeave::decode_body(&body).map(|_| ()),
            25 => RoomMapReady::decode_body(&body).map(|_| ()),
            26 => MatchmakerMatched::decode_body(&body).map(|_| ()),
            27 => Notification::decode_body(&body).map(|_| ()),
            _ => ChatEvent::decode_body(&body).map(|_| ()),
        };
        let mut buf = BytesMut::from(&body[..]);
        while let Ok(Some(_)) = decode_framed(&mut buf) {}
        let _ = decode_datagram(&body);
    }
}

/// A stream of mostly valid frames with hostile prefixes mixed in.
fn hostile_stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            4 => (any::<u16>(), prop::collection::vec(any::<u8>(), 0..80))
                .prop_map(|(kind, body)| Envelope::new(kind, body).encode_framed().to_vec()),
            1 => any::<[u8; 4]>().prop_map(|prefix| prefix.to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..12),
        ],
        0..12,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    /// Whatever the limit and however the stream is cut, the decoder returns
    /// exactly the frames `decode_framed` finds before the first malformed or
    /// over-limit one, then that error; drained, it holds less than one
    /// frame within the limit.
    #[test]
    fn frame_decoder_agrees_with_decode_framed(
        stream in hostile_stream(),
        max in 0usize..128,
        step in 1usize..40,
    ) {
        let mut decoder = citadel_wire::FrameDecoder::new(max);
        let mut got = Vec::new();
        let mut failed = false;
        for chunk in stream.chunks(step) {
            decoder.handle_bytes(chunk);
            loop {
                match decoder.poll_envelope() {
                    Ok(Some(envelope)) => got.push(envelope),
                    Ok(None) => break,
                    Err(_) => { failed = true; break; }
                }
            }
            if failed { break; }
            prop_assert!(decoder.buffered() < 4 + max);
        }
        let mut buf = BytesMut::from(&stream[..]);
        let mut want = Vec::new();
        let mut bad = false;
        loop {
            match citadel_wire::peek_frame_len(&buf) {
                Ok(Some(len)) if len > max => { bad = true; break; }
                Err(_) => { bad = true; break; }
                _ => {}
            }
            match decode_framed(&mut buf) {
                Ok(Some(envelope)) => want.push(envelope),
                Ok(None) => break,
                Err(_) => { bad = true; break; }
            }
        }
        prop_assert_eq!(got, want);
        prop_assert_eq!(failed, bad);
    }
}
