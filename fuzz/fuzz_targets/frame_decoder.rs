//! `FrameDecoder`: the stream reader every transport uses.
//!
//! Input: two bytes of limit (big-endian), one byte of chunk size (1-256),
//! then the stream. The stream is fed in chunks of that size. Whatever the
//! split, the envelopes returned must be exactly those `decode_framed` finds
//! in the whole stream before its first frame that is malformed or over the
//! limit; after the decoder has been drained it never holds more than one
//! unfinished frame within the limit (the bound a hostile peer can make it
//! buffer), and an error, once returned, repeats.
#![no_main]

use bytes::BytesMut;
use citadel_wire::protocol::LENGTH_PREFIX_BYTES;
use citadel_wire::{FrameDecoder, decode_framed, peek_frame_len};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((head, stream)) = data.split_first_chunk::<3>() else {
        return;
    };
    let max = usize::from(u16::from_be_bytes([head[0], head[1]]));
    let step = usize::from(head[2]) + 1;

    let mut decoder = FrameDecoder::new(max);
    let mut got = Vec::new();
    let mut failed = None;
    'chunks: for chunk in stream.chunks(step) {
        decoder.handle_bytes(chunk);
        loop {
            match decoder.poll_envelope() {
                Ok(Some(envelope)) => got.push(envelope),
                Ok(None) => break,
                Err(error) => {
                    failed = Some(error);
                    break 'chunks;
                }
            }
        }
        assert!(
            decoder.buffered() < LENGTH_PREFIX_BYTES + decoder.max_len(),
            "holds {} bytes under a limit of {max}",
            decoder.buffered()
        );
    }
    if let Some(error) = failed {
        decoder.handle_bytes(stream);
        assert_eq!(decoder.poll_envelope(), Err(error), "errors are sticky");
    }

    let mut buf = BytesMut::from(stream);
    let mut want = Vec::new();
    loop {
        match peek_frame_len(&buf) {
            Ok(Some(len)) if len > max => break,
            Err(_) => break,
            _ => {}
        }
        match decode_framed(&mut buf) {
            Ok(Some(envelope)) => want.push(envelope),
            _ => break,
        }
    }
    assert_eq!(got, want);
});
