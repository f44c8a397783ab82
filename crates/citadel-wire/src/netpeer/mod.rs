//! NetworkPeer replication, kinds 13-15: the DeltaBunch (one standalone
//! bunch per kind-13 envelope, as the server path and existing clients use
//! it), the baseline acknowledgement table and the optional schema table.
//!
//! What it is not: replication policy (authority, conditions, rates) lives
//! in `citadel-netcode`. The optional coalesced multi-bunch framing that the
//! older docs mention is not used by any examined server or client and is
//! deliberately not implemented.

mod bunch;
mod field;
mod tables;

pub use bunch::{BunchBase, BunchHeader, ClassSchema, DeltaBunch, HeaderBase, peek_object_id};
pub use field::{
    ALLOCATION_BUDGET, CollectionDelta, CollectionItem, FieldCodec, FieldValue,
    MAX_BYTES_FIELD_LEN, MAX_COLLECTION_OPS, RepId,
};
pub use tables::{MAX_TABLE_ENTRIES, RepAck, RepAckEntry, RepSchema, RepSchemaEntry};
