//! Transform sync, kinds 7-12: negotiation (HELLO), the quantized snapshot
//! bitstream, owner input bundles, acknowledgements, role transitions and
//! rewind results.
//!
//! Only bodies live here; the server world, baselines, interest and the
//! client reconstruction are in `citadel-netcode`. The snapshot needs the
//! [`TransformCodec`] negotiated by HELLO to encode or decode.

mod hello;
mod input;
mod role;
mod snapshot;

pub use hello::{HELLO_BYTES, HelloParams, TransformCodec};
pub use input::{FireCommand, INPUT_FLAG_FIRE, InputBundle, InputFrame, MAX_INPUT_FRAMES};
pub use role::{
    REWIND_BYTES, ROLE_BYTES, Rewind, Role, RoleChange, RoleEvent, TSYNC_ACK_BYTES, TsyncAck,
};
pub use snapshot::{
    CHANGED_LAST_INPUT_SEQ, CHANGED_POSITION, CHANGED_ROTATION, CHANGED_VELOCITY, QuantizedUpdate,
    SNAPSHOT_HEADER_BITS, Snapshot, SnapshotHeader, SnapshotUpdate, encode_quantized,
};
