//! Networked-actor kinds 16-20 and room kinds 21-25. The first byte picks the
//! kind (`16 + byte % 10`), the rest is the body.
//!
//! All ten are fixed layouts that ignore trailing bytes: an accepted body
//! re-encodes to a prefix of the input (raw `f32` keep their bit patterns).
#![no_main]

mod common;

use citadel_wire::actor::{NaDespawn, NaPresence, NaSpawn, NaSpawnBatch, NaState};
use citadel_wire::room::{RoomCreate, RoomJoin, RoomJoined, RoomLeave, RoomMapReady};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match 16 + selector % 10 {
        16 => common::prefix::<NaPresence>(body),
        17 => common::prefix::<NaSpawn>(body),
        18 => common::prefix::<NaSpawnBatch>(body),
        19 => common::prefix::<NaDespawn>(body),
        20 => common::prefix::<NaState>(body),
        21 => common::prefix::<RoomCreate>(body),
        22 => common::prefix::<RoomJoin>(body),
        23 => common::prefix::<RoomJoined>(body),
        24 => common::prefix::<RoomLeave>(body),
        _ => common::prefix::<RoomMapReady>(body),
    }
});
