//! The matchmaker's query parser (`services.md` §3.3), compiled from the
//! server's own source file. Any input may be refused, but parsing must not
//! panic or overflow the stack, and an accepted query must print to text
//! that parses back to the same AST.
#![no_main]

#[path = "../../crates/citadel-server/src/services/matchmaker/query.rs"]
#[allow(dead_code)]
mod query;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let limits = query::Limits {
        max_bytes: 1024,
        max_depth: 16,
    };
    let Ok(Some(expr)) = query::parse(text, limits) else {
        return;
    };
    let printed = expr.to_string();
    // Printed numbers may be longer than the input; only nesting is bounded.
    let wide = query::Limits {
        max_bytes: usize::MAX,
        max_depth: 16,
    };
    let again = query::parse(&printed, wide).expect("printed query parses");
    assert_eq!(again, Some(expr), "round trip of {printed:?}");
    let props = query::Props::new();
    let _ = again.map(|e| e.matches(&props));
});
