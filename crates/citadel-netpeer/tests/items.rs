//! Keyed collection writes by trusted code (`upsert_item`, `remove_item`):
//! keys keep their slot, new keys take the lowest free one, `MaxItems` and
//! the item codec refuse a write without changing anything, and a session
//! that applies and acks every bunch converges through inserts, updates and
//! removals sent as keyed deltas.

mod common;

use citadel_netpeer::{ApiError, Authority, AuthorityConfig, NetworkPeerSession, Value};
use citadel_wire::netpeer::{DeltaBunch, FieldValue, RepId};
use common::*;

const CONN: u64 = 1;

fn slot(index: u32) -> RepId {
    RepId {
        index,
        generation: 0,
    }
}

/// One tick: the session applies and acks everything it gets; returns
/// whether the bunches were deltas only.
fn exchange(s: &mut Authority, session: &mut NetworkPeerSession, now: u64) -> bool {
    s.tick(now);
    let mut deltas_only = true;
    while let Some(out) = s.poll_output() {
        let schema = s.class(SHIP).expect("class").current();
        let bunch = DeltaBunch::decode(out.body(), schema).expect("decodes");
        deltas_only &= bunch.base != citadel_wire::netpeer::BunchBase::Full;
        session.handle_bunch(out.body()).expect("applies");
    }
    while let Some(ack) = session.poll_ack() {
        s.handle_ack(CONN, &ack);
    }
    deltas_only
}

#[test]
fn keyed_item_writes_keep_slots_respect_bounds_and_converge() -> TestResult {
    let mut s = Authority::new(AuthorityConfig::default())?;
    s.register_class(ship_spec())?;
    s.connect(CONN, false, 0);
    let obj = s.spawn(SHIP, 0, Some(CONN), false)?;
    let mut session = ship_session(&s);
    exchange(&mut s, &mut session, 0);

    assert_eq!(s.upsert_item(obj, CARGO, 100, FieldValue::Int(1))?, slot(0));
    assert_eq!(s.upsert_item(obj, CARGO, 200, FieldValue::Int(2))?, slot(1));
    assert_eq!(s.upsert_item(obj, CARGO, 300, FieldValue::Int(3))?, slot(2));
    assert!(
        exchange(&mut s, &mut session, 50),
        "inserts travel as a delta"
    );
    assert_converged(&s, CONN, &session);

    // An update keeps the slot; a removal frees it for the next new key.
    assert_eq!(
        s.upsert_item(obj, CARGO, 200, FieldValue::Int(22))?,
        slot(1)
    );
    assert!(s.remove_item(obj, CARGO, 100)?);
    assert!(!s.remove_item(obj, CARGO, 100)?, "already gone");
    assert!(exchange(&mut s, &mut session, 100));
    assert_converged(&s, CONN, &session);
    assert_eq!(s.upsert_item(obj, CARGO, 400, FieldValue::Int(4))?, slot(0));
    assert!(exchange(&mut s, &mut session, 150));
    assert_converged(&s, CONN, &session);
    let items = s.items(obj, CARGO)?;
    assert_eq!(items.get(&slot(0)), Some(&(400, FieldValue::Int(4))));
    assert_eq!(items.get(&slot(1)), Some(&(200, FieldValue::Int(22))));
    assert_eq!(items.len(), 3);

    // Out-of-range item values are clamped like any IntRange write.
    s.upsert_item(obj, CARGO, 500, FieldValue::Int(5_000))?;
    assert_eq!(
        s.items(obj, CARGO)?.get(&slot(3)),
        Some(&(500, FieldValue::Int(1_000)))
    );
    // Refusals write nothing.
    let before = s.values(obj).map(<[Value]>::to_vec);
    assert!(matches!(
        s.upsert_item(obj, CARGO, 9, FieldValue::Bool(true)),
        Err(ApiError::Value(_))
    ));
    assert!(matches!(
        s.upsert_item(obj, HEALTH, 9, FieldValue::Int(1)),
        Err(ApiError::Value(_))
    ));
    assert_eq!(
        s.upsert_item(obj, 99, 9, FieldValue::Int(1)),
        Err(ApiError::UnknownField)
    );
    assert_eq!(s.remove_item(999, CARGO, 9), Err(ApiError::UnknownObject));
    for key in 0..60 {
        s.upsert_item(obj, CARGO, 1_000 + key, FieldValue::Int(0))?;
    }
    assert_eq!(s.items(obj, CARGO)?.len(), 64, "at MaxItems");
    let full = s.values(obj).map(<[Value]>::to_vec);
    assert_ne!(full, before);
    assert!(matches!(
        s.upsert_item(obj, CARGO, 9_999, FieldValue::Int(0)),
        Err(ApiError::Value(_))
    ));
    assert_eq!(s.values(obj).map(<[Value]>::to_vec), full);
    exchange(&mut s, &mut session, 200);
    assert_converged(&s, CONN, &session);
    Ok(())
}
