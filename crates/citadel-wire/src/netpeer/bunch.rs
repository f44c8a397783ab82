//! Kind 13: one DeltaBunch per envelope.
//!
//! Layout (bitstream): `object_id:32 | is_full:1 | result_id:varint`, then
//! for a full bunch `schema_hash:128 | layout_version:32`, for a delta
//! `base_id:varint`; then the changed mask (one bit per schema field, field 0
//! first) and the set fields' values in ascending field order. Zero
//! `result_id`, zero `base_id` on a delta, or a full bunch naming another
//! schema identity rejects the whole bunch. Canonical end applies.

use crate::bits::{BitReader, BitWriter};
use crate::error::{CodecError, DecodeError, EncodeError};
use crate::netpeer::field::{ALLOCATION_BUDGET, FieldCodec, FieldValue};
use crate::schema::SCHEMA_HASH_BYTES;
use crate::varint::{read_varint, write_varint};

/// A class's field list plus its identity.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSchema {
    fields: Vec<FieldCodec>,
    schema_hash: [u8; SCHEMA_HASH_BYTES],
    layout_version: u32,
}

impl ClassSchema {
    /// Builds a schema; at most 65 536 fields, no nested collections.
    pub fn new(
        fields: Vec<FieldCodec>,
        schema_hash: [u8; SCHEMA_HASH_BYTES],
        layout_version: u32,
    ) -> Result<Self, CodecError> {
        if fields.len() > usize::from(u16::MAX) + 1 {
            return Err(CodecError::Schema("too many fields"));
        }
        for f in &fields {
            f.validate()?;
        }
        Ok(ClassSchema {
            fields,
            schema_hash,
            layout_version,
        })
    }
    /// Field codecs in id order.
    pub fn fields(&self) -> &[FieldCodec] {
        &self.fields
    }
    /// The 128-bit identity digest.
    pub fn schema_hash(&self) -> &[u8; SCHEMA_HASH_BYTES] {
        &self.schema_hash
    }
    /// The layout version.
    pub fn layout_version(&self) -> u32 {
        self.layout_version
    }
}

/// Whether a bunch is a full frame or a delta against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BunchBase {
    /// Full frame carrying the schema identity.
    Full,
    /// Delta against the receiver's baseline `base_id` (non-zero).
    Delta(u64),
}

/// A decoded kind-13 body.
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaBunch {
    /// The replicated object.
    pub object_id: u32,
    /// Server-issued result token (non-zero).
    pub result_id: u64,
    /// Full or delta.
    pub base: BunchBase,
    /// Set fields in strictly ascending id order.
    pub values: Vec<(u16, FieldValue)>,
}

/// Reads the object id from the first 4 bytes without a schema.
pub fn peek_object_id(body: &[u8]) -> Option<u32> {
    body.first_chunk::<4>().map(|b| u32::from_be_bytes(*b))
}

/// What a bunch's header names about its base, read without a schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderBase {
    /// A full frame and the schema identity it carries.
    Full {
        /// The 128-bit schema digest.
        schema_hash: [u8; SCHEMA_HASH_BYTES],
        /// The layout version.
        layout_version: u32,
    },
    /// A delta against `base_id` (non-zero).
    Delta(u64),
}

/// The header of a kind-13 body (object id, tokens, identity), everything
/// before the changed mask. Reading it needs no schema, so a receiver can
/// pick the schema (or skip the body) before decoding values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BunchHeader {
    /// The replicated object.
    pub object_id: u32,
    /// The result token (non-zero).
    pub result_id: u64,
    /// Full with its identity, or delta with its base.
    pub base: HeaderBase,
}

impl BunchHeader {
    /// Reads the header at the start of `body`; zero tokens are refused.
    pub fn peek(body: &[u8]) -> Result<Self, DecodeError> {
        Self::read(&mut BitReader::new(body))
    }

    fn read(r: &mut BitReader<'_>) -> Result<Self, DecodeError> {
        let object_id = r.read_u32()?;
        let is_full = r.read_bool()?;
        let result_id = read_varint(r)?;
        if result_id == 0 {
            return Err(DecodeError::InvalidValue("zero result_id"));
        }
        let base = if is_full {
            let schema_hash = r.read_array::<SCHEMA_HASH_BYTES>()?;
            let layout_version = r.read_u32()?;
            HeaderBase::Full {
                schema_hash,
                layout_version,
            }
        } else {
            let base_id = read_varint(r)?;
            if base_id == 0 {
                return Err(DecodeError::InvalidValue("zero base_id on a delta"));
            }
            HeaderBase::Delta(base_id)
        };
        Ok(BunchHeader {
            object_id,
            result_id,
            base,
        })
    }
}

impl DeltaBunch {
    /// Encodes against `schema`.
    pub fn encode(&self, schema: &ClassSchema) -> Result<Vec<u8>, EncodeError> {
        if self.result_id == 0 {
            return Err(EncodeError::InvalidValue("result_id must be non-zero"));
        }
        if self.values.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(EncodeError::InvalidValue(
                "field ids must be strictly ascending",
            ));
        }
        let mut mask = vec![false; schema.fields.len()];
        for (id, _) in &self.values {
            *mask
                .get_mut(usize::from(*id))
                .ok_or(EncodeError::InvalidValue("field id outside the schema"))? = true;
        }
        let mut w = BitWriter::with_capacity(16 + schema.fields.len() / 8);
        w.write_bits(u64::from(self.object_id), 32);
        match self.base {
            BunchBase::Full => {
                w.write_bool(true);
                write_varint(&mut w, self.result_id);
                w.write_bytes(&schema.schema_hash);
                w.write_bits(u64::from(schema.layout_version), 32);
            }
            BunchBase::Delta(base_id) => {
                if base_id == 0 {
                    return Err(EncodeError::InvalidValue("base_id must be non-zero"));
                }
                w.write_bool(false);
                write_varint(&mut w, self.result_id);
                write_varint(&mut w, base_id);
            }
        }
        for bit in &mask {
            w.write_bool(*bit);
        }
        for (id, value) in &self.values {
            let codec = schema
                .fields
                .get(usize::from(*id))
                .ok_or(EncodeError::InvalidValue("field id outside the schema"))?;
            codec.write(&mut w, value)?;
        }
        Ok(w.into_bytes())
    }

    /// Decodes against `schema`; any failure rejects the whole bunch.
    pub fn decode(body: &[u8], schema: &ClassSchema) -> Result<Self, DecodeError> {
        let mut r = BitReader::new(body);
        let BunchHeader {
            object_id,
            result_id,
            base,
        } = BunchHeader::read(&mut r)?;
        let base = match base {
            HeaderBase::Full {
                schema_hash,
                layout_version,
            } => {
                if schema_hash != schema.schema_hash || layout_version != schema.layout_version {
                    return Err(DecodeError::SchemaMismatch);
                }
                BunchBase::Full
            }
            HeaderBase::Delta(base_id) => BunchBase::Delta(base_id),
        };
        if schema.fields.len() > r.remaining_bits() {
            return Err(DecodeError::Truncated);
        }
        let mut set = Vec::new();
        for id in 0..schema.fields.len() {
            if r.read_bool()? {
                set.push(id);
            }
        }
        let mut budget = ALLOCATION_BUDGET;
        let mut values = Vec::with_capacity(set.len());
        for id in set {
            let codec = schema.fields.get(id).ok_or(DecodeError::Truncated)?;
            values.push((id as u16, codec.read(&mut r, &mut budget)?));
        }
        r.finish()?;
        Ok(DeltaBunch {
            object_id,
            result_id,
            base,
            values,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{ScalarCodec, Vector3Codec};
    use crate::quat::QuatMode;
    type TestResult = Result<(), Box<dyn std::error::Error>>;

    fn example_schema(hash: [u8; 16]) -> Result<ClassSchema, CodecError> {
        ClassSchema::new(
            vec![
                FieldCodec::Bool,
                FieldCodec::IntRange { min: 0, max: 100 },
                FieldCodec::Scalar(ScalarCodec::new(-1000.0, 1000.0, 4)?),
                FieldCodec::Vector3(Vector3Codec::new([-1000.0; 3], [1000.0; 3], 4)?),
                FieldCodec::Quat(QuatMode::Bits10),
                FieldCodec::Bytes { max_len: 32 },
            ],
            hash,
            1,
        )
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn worked_examples_from_the_spec() -> TestResult {
        let hash: [u8; 16] = std::array::from_fn(|i| i as u8);
        let schema = example_schema(hash)?;
        let delta = DeltaBunch {
            object_id: 42,
            result_id: 7,
            base: BunchBase::Delta(3),
            values: vec![
                (0, FieldValue::Bool(true)),
                (1, FieldValue::Int(73)),
                (5, FieldValue::Bytes(b"hi".to_vec())),
            ],
        };
        let bytes = delta.encode(&schema)?;
        assert_eq!(hex(&bytes), "0000002a0381e39204d0d2");
        assert_eq!(DeltaBunch::decode(&bytes, &schema)?, delta);

        let full = DeltaBunch {
            object_id: 1,
            result_id: 1,
            base: BunchBase::Full,
            values: vec![(1, FieldValue::Int(100))],
        };
        let bytes = full.encode(&schema)?;
        assert_eq!(
            hex(&bytes),
            "00000001808000810182028303840485058606870780000000a190"
        );
        assert_eq!(
            DeltaBunch::decode(&bytes, &example_schema([0xEE; 16])?),
            Err(DecodeError::SchemaMismatch)
        );
        Ok(())
    }

    #[test]
    fn the_header_reads_without_a_schema_and_refuses_zero_tokens() -> TestResult {
        let hash: [u8; 16] = std::array::from_fn(|i| i as u8);
        let schema = example_schema(hash)?;
        let full = DeltaBunch {
            object_id: 9,
            result_id: 300,
            base: BunchBase::Full,
            values: vec![(1, FieldValue::Int(5))],
        }
        .encode(&schema)?;
        let header = BunchHeader::peek(&full)?;
        assert_eq!((header.object_id, header.result_id), (9, 300));
        assert_eq!(
            header.base,
            HeaderBase::Full {
                schema_hash: hash,
                layout_version: 1
            }
        );
        let delta = DeltaBunch {
            object_id: 9,
            result_id: 301,
            base: BunchBase::Delta(300),
            values: vec![],
        }
        .encode(&schema)?;
        assert_eq!(BunchHeader::peek(&delta)?.base, HeaderBase::Delta(300));
        // Every truncation of the header is an error, never a panic.
        for cut in 0..7 {
            assert!(BunchHeader::peek(&delta[..cut.min(delta.len())]).is_err());
        }
        // Zero tokens: object 1, delta bit, result 0 / result 1 with base 0.
        assert!(BunchHeader::peek(&[0, 0, 0, 1, 0x00, 0x00]).is_err());
        assert!(BunchHeader::peek(&[0, 0, 0, 1, 0x00, 0x80, 0x00]).is_err());
        Ok(())
    }
}
