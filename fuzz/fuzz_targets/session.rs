//! Session kinds 1-6: position, peer position, RPC request and response,
//! auth request and result. The first byte picks the kind (`1 + byte % 6`),
//! the rest is the body.
//!
//! Kind 1 is strict: an accepted body re-encodes to exactly the input.
//! Kinds 2-6 ignore trailing bytes: the re-encoding is a prefix of the input
//! (a kind-6 Guest keeps only its status byte). Exception: a kind-6 Rejected
//! without a reason byte reads as reason 0 and re-encodes with that 0 added.
#![no_main]

mod common;

use citadel_wire::WireBody;
use citadel_wire::protocol::{
    AUTH_REASON_AUTH_FAILED, AUTH_STATUS_REJECTED, AuthRequest, AuthResult, PeerPosition, Position,
    RpcRequest, RpcResponse,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match 1 + selector % 6 {
        1 => common::exact::<Position>(body),
        2 => common::prefix::<PeerPosition>(body),
        3 => common::prefix::<RpcRequest>(body),
        4 => common::prefix::<RpcResponse>(body),
        5 => common::prefix::<AuthRequest>(body),
        _ if body == [AUTH_STATUS_REJECTED] => {
            let result = AuthResult::decode_body(body).expect("a bare Rejected status decodes");
            assert_eq!(
                result.to_bytes(),
                [AUTH_STATUS_REJECTED, AUTH_REASON_AUTH_FAILED]
            );
        }
        _ => common::prefix::<AuthResult>(body),
    }
});
