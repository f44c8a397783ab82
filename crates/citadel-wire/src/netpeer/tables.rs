//! Kinds 14 and 15: the NetworkPeer acknowledgement table and the optional
//! schema table. Both are bitstreams starting with a bit-varint entry count
//! capped at 8 192, with the canonical-end rule.
//!
//! REP_ACK entry: `object_id:32 | acked_result_id:varint | history:32`.
//! REP_SCHEMA entry: `class_id:32 | schema_hash:128 | layout_version:32`.

use crate::bits::{BitReader, BitWriter};
use crate::body::wire_body;
use crate::error::DecodeError;
use crate::protocol::{KIND_REP_ACK, KIND_REP_SCHEMA};
use crate::schema::SCHEMA_HASH_BYTES;
use crate::varint::{read_varint, write_varint};

/// Cap on entries in either table.
pub const MAX_TABLE_ENTRIES: usize = 8_192;

fn read_count(r: &mut BitReader<'_>, min_entry_bits: usize) -> Result<usize, DecodeError> {
    let count = read_varint(r)?;
    if count > MAX_TABLE_ENTRIES as u64 {
        return Err(DecodeError::CountTooLarge {
            count,
            max: MAX_TABLE_ENTRIES as u64,
        });
    }
    let count = count as usize;
    if count * min_entry_bits > r.remaining_bits() {
        return Err(DecodeError::Truncated);
    }
    Ok(count)
}

/// One acknowledged object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepAckEntry {
    /// The object.
    pub object_id: u32,
    /// Newest applied result id (0 = nothing yet).
    pub acked_result_id: u64,
    /// Older applied ids relative to `acked_result_id`.
    pub history: u32,
}

/// Kind 14: baseline acknowledgements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepAck {
    /// Entries (at most 8 192 are encoded).
    pub entries: Vec<RepAckEntry>,
}

impl RepAck {
    /// Appends the body (entries past the cap are not written).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let entries = &self.entries[..self.entries.len().min(MAX_TABLE_ENTRIES)];
        let mut w = BitWriter::with_capacity(2 + entries.len() * 12);
        write_varint(&mut w, entries.len() as u64);
        for e in entries {
            w.write_bits(u64::from(e.object_id), 32);
            write_varint(&mut w, e.acked_result_id);
            w.write_bits(u64::from(e.history), 32);
        }
        out.extend_from_slice(&w.into_bytes());
    }
    /// Decodes; over-cap counts, truncation and non-canonical ends fail.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = BitReader::new(body);
        let count = read_count(&mut r, 72)?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(RepAckEntry {
                object_id: r.read_u32()?,
                acked_result_id: read_varint(&mut r)?,
                history: r.read_u32()?,
            });
        }
        r.finish()?;
        Ok(RepAck { entries })
    }
}
wire_body!(RepAck, KIND_REP_ACK);

/// One class identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepSchemaEntry {
    /// Application class id.
    pub class_id: u32,
    /// BLAKE3-128 schema digest.
    pub schema_hash: [u8; SCHEMA_HASH_BYTES],
    /// Layout version.
    pub layout_version: u32,
}

/// Kind 15: the optional schema table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RepSchema {
    /// Entries (at most 8 192 are encoded).
    pub entries: Vec<RepSchemaEntry>,
}

impl RepSchema {
    /// Appends the body (entries past the cap are not written).
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let entries = &self.entries[..self.entries.len().min(MAX_TABLE_ENTRIES)];
        let mut w = BitWriter::with_capacity(2 + entries.len() * 24);
        write_varint(&mut w, entries.len() as u64);
        for e in entries {
            w.write_bits(u64::from(e.class_id), 32);
            w.write_bytes(&e.schema_hash);
            w.write_bits(u64::from(e.layout_version), 32);
        }
        out.extend_from_slice(&w.into_bytes());
    }
    /// Decodes; over-cap counts, truncation and non-canonical ends fail.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        let mut r = BitReader::new(body);
        let count = read_count(&mut r, 192)?;
        let mut entries = Vec::with_capacity(count);
        for _ in 0..count {
            entries.push(RepSchemaEntry {
                class_id: r.read_u32()?,
                schema_hash: r.read_array()?,
                layout_version: r.read_u32()?,
            });
        }
        r.finish()?;
        Ok(RepSchema { entries })
    }
}
wire_body!(RepSchema, KIND_REP_SCHEMA);

#[cfg(test)]
mod tests {
    use super::*;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn ack_example_from_the_spec() -> TestResult {
        let ack = RepAck {
            entries: vec![RepAckEntry {
                object_id: 1,
                acked_result_id: 5,
                history: 0,
            }],
        };
        let body = ack.encode();
        assert_eq!(body, [0x01, 0, 0, 0, 1, 0x05, 0, 0, 0, 0]);
        assert_eq!(RepAck::decode(&body)?, ack);
        let mut trailing = body.clone();
        trailing.push(0);
        assert_eq!(RepAck::decode(&trailing), Err(DecodeError::TrailingBytes));
        Ok(())
    }

    #[test]
    fn over_cap_counts_fail() {
        // 8193 as a varint: 0x81 0x40.
        assert!(matches!(
            RepAck::decode(&[0x81, 0x40]),
            Err(DecodeError::CountTooLarge { .. })
        ));
        assert!(matches!(
            RepSchema::decode(&[0x81, 0x40]),
            Err(DecodeError::CountTooLarge { .. })
        ));
    }
}
