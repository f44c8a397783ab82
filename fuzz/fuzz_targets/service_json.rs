//! JSON service kinds 26-28: matchmaker handoff, notification, chat event.
//! The first byte picks the kind (`26 + byte % 3`), the rest is the body.
//!
//! Key order and whitespace are not normative, so bytes are not compared:
//! an accepted body must re-encode to JSON that decodes to the same value.
#![no_main]

mod common;

use citadel_wire::service::{ChatEvent, MatchmakerMatched, Notification};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match 26 + selector % 3 {
        26 => common::json::<MatchmakerMatched>(body),
        27 => common::json::<Notification>(body),
        _ => common::json::<ChatEvent>(body),
    }
});
