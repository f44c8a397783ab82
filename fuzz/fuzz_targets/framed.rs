//! Envelope framing: `decode_framed` on a stream buffer, then `decode_datagram`.
//!
//! The input is a stream: frames are decoded until `Ok(None)` (which must
//! consume nothing) or `Err`. Every decoded envelope must re-encode
//! (`encode_framed`) to exactly the bytes it consumed. The same input read as
//! one datagram must, if accepted, re-encode (`encode_datagram`) to itself.
#![no_main]

use bytes::BytesMut;
use citadel_wire::{decode_datagram, decode_framed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    let mut offset = 0;
    loop {
        let before = buf.len();
        match decode_framed(&mut buf) {
            Ok(Some(envelope)) => {
                let consumed = &data[offset..offset + (before - buf.len())];
                assert_eq!(
                    &envelope.encode_framed()[..],
                    consumed,
                    "frame at offset {offset}"
                );
                offset += consumed.len();
            }
            Ok(None) => {
                assert_eq!(buf.len(), before, "Ok(None) consumed bytes");
                break;
            }
            Err(_) => break,
        }
    }

    if let Ok(envelope) = decode_datagram(data) {
        assert_eq!(&envelope.encode_datagram()[..], data);
    }
});
