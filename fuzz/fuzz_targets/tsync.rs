//! Transform-sync kinds 7-12. The first byte picks the kind (`7 + byte % 6`),
//! the rest is the body.
//!
//! Kinds 7, 9, 10, 11 and 12 are fixed layouts that ignore trailing bytes:
//! the re-encoding is a prefix of the input. Kind 8 (snapshot bitstream,
//! default HELLO codec) re-encodes to exactly the input unless it carries a
//! rotation: re-compressing a decoded quaternion may pick another dropped
//! component (ties, or kept components larger than the dropped one), so then
//! only the length must match, and decoding the re-encoding must give the
//! same snapshot with every rotation within 2e-3 per component (up to sign).
#![no_main]

mod common;

use std::sync::LazyLock;

use citadel_wire::tsync::{
    HelloParams, InputBundle, Rewind, RoleChange, Snapshot, TransformCodec, TsyncAck,
};
use libfuzzer_sys::fuzz_target;

static CODEC: LazyLock<TransformCodec> = LazyLock::new(|| {
    HelloParams::default()
        .codec()
        .expect("the default HELLO builds a codec")
});

/// The snapshot with every rotation zeroed (presence kept).
fn without_rotations(snapshot: &Snapshot) -> Snapshot {
    let mut s = snapshot.clone();
    for u in &mut s.updates {
        u.rotation = u.rotation.map(|_| [0.0; 4]);
    }
    s
}

fn snapshot(body: &[u8]) {
    let Ok(decoded) = Snapshot::decode(body, &CODEC) else {
        return;
    };
    let out = decoded
        .encode(&CODEC)
        .expect("a decoded snapshot re-encodes");
    if decoded.updates.iter().all(|u| u.rotation.is_none()) {
        assert_eq!(out, body);
        return;
    }
    assert_eq!(out.len(), body.len(), "re-encoded length");
    let back = Snapshot::decode(&out, &CODEC).expect("a re-encoded snapshot decodes");
    assert_eq!(without_rotations(&back), without_rotations(&decoded));
    for (a, b) in decoded.updates.iter().zip(&back.updates) {
        if let (Some(qa), Some(qb)) = (a.rotation, b.rotation) {
            assert!(
                common::same_rotation(qa, qb),
                "object {}: {qa:?} came back as {qb:?}",
                a.object_id
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match 7 + selector % 6 {
        7 => common::prefix::<HelloParams>(body),
        8 => snapshot(body),
        9 => common::prefix::<InputBundle>(body),
        10 => common::prefix::<TsyncAck>(body),
        11 => common::prefix::<RoleChange>(body),
        _ => common::prefix::<Rewind>(body),
    }
});
