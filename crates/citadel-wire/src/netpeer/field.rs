//! Field codecs of a NetworkPeer class and the values they carry.
//!
//! Encodings inside the bitstream: Bool 1 bit; IntRange `clamp(v) - min` in
//! `ceil_log2(span + 1)` bits; Scalar/Vector3/Quat as the transform codecs;
//! Bytes as a bit-varint length then bytes (cap `min(max_len, 1 MiB)`);
//! Collection as a keyed delta block (removed, added, changed lists, each
//! capped at `min(max_items, 65 536)`, items may not be collections).
//! Decoding charges lengths and item counts to a per-envelope allocation
//! budget before allocating.

use crate::bits::{BitReader, BitWriter, ceil_log2};
use crate::error::{CodecError, DecodeError, EncodeError};
use crate::quant::{ScalarCodec, Vector3Codec};
use crate::quat::{QuatMode, read_quat, write_quat};
use crate::varint::{read_varint, read_varint_u32, write_varint};

/// Largest byte-field length on the wire.
pub const MAX_BYTES_FIELD_LEN: u32 = 1_048_576;
/// Largest number of operations in one collection list (and in total).
pub const MAX_COLLECTION_OPS: u32 = 65_536;
/// Allocation units (bytes + items) one envelope may claim.
pub const ALLOCATION_BUDGET: u64 = 4_194_304;

/// How one field is encoded.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldCodec {
    /// One bit.
    Bool,
    /// An integer clamped to an inclusive range.
    IntRange {
        /// Inclusive minimum.
        min: i64,
        /// Inclusive maximum.
        max: i64,
    },
    /// Bounded scalar.
    Scalar(ScalarCodec),
    /// Bounded vector.
    Vector3(Vector3Codec),
    /// Smallest-three quaternion.
    Quat(QuatMode),
    /// Length-prefixed bytes.
    Bytes {
        /// Largest length (further capped at 1 MiB).
        max_len: u32,
    },
    /// Keyed collection of items (depth 1).
    Collection {
        /// Codec of each item (not a collection).
        item: Box<FieldCodec>,
        /// Largest list length (further capped at 65 536).
        max_items: u32,
    },
}

impl FieldCodec {
    /// Checks the codec's own parameters.
    pub fn validate(&self) -> Result<(), CodecError> {
        match self {
            FieldCodec::IntRange { min, max } if min > max => {
                Err(CodecError::Schema("int range min above max"))
            }
            FieldCodec::Collection { item, .. } => match item.as_ref() {
                FieldCodec::Collection { .. } => Err(CodecError::Schema("collections cannot nest")),
                other => other.validate(),
            },
            _ => Ok(()),
        }
    }

    fn int_span(min: i64, max: i64) -> u64 {
        (i128::from(max) - i128::from(min)).clamp(0, i128::from(u64::MAX)) as u64
    }

    fn int_bits(min: i64, max: i64) -> u32 {
        let span = Self::int_span(min, max);
        if span == u64::MAX {
            64
        } else {
            ceil_log2(u128::from(span) + 1)
        }
    }

    /// Writes `value`; a value of the wrong type is the caller's error.
    pub fn write(&self, w: &mut BitWriter, value: &FieldValue) -> Result<(), EncodeError> {
        match (self, value) {
            (FieldCodec::Bool, FieldValue::Bool(b)) => w.write_bool(*b),
            (FieldCodec::IntRange { min, max }, FieldValue::Int(v)) => {
                if min > max {
                    return Err(EncodeError::InvalidValue("int range min above max"));
                }
                let code = (i128::from((*v).clamp(*min, *max)) - i128::from(*min)) as u64;
                w.write_bits(code, Self::int_bits(*min, *max));
            }
            (FieldCodec::Scalar(c), FieldValue::Scalar(v)) => c.write(w, *v)?,
            (FieldCodec::Vector3(c), FieldValue::Vector3(v)) => c.write(w, *v)?,
            (FieldCodec::Quat(mode), FieldValue::Quat(q)) => write_quat(w, *mode, *q),
            (FieldCodec::Bytes { max_len }, FieldValue::Bytes(bytes)) => {
                let cap = (*max_len).min(MAX_BYTES_FIELD_LEN) as usize;
                if bytes.len() > cap {
                    return Err(EncodeError::TooMany {
                        what: "bytes field",
                        count: bytes.len(),
                        max: cap,
                    });
                }
                write_varint(w, bytes.len() as u64);
                w.write_bytes(bytes);
            }
            (FieldCodec::Collection { item, max_items }, FieldValue::Collection(delta)) => {
                delta.write(w, item, *max_items)?;
            }
            _ => {
                return Err(EncodeError::InvalidValue(
                    "value type does not match its codec",
                ));
            }
        }
        Ok(())
    }

    /// Reads one value, charging allocations to `budget`.
    pub fn read(&self, r: &mut BitReader<'_>, budget: &mut u64) -> Result<FieldValue, DecodeError> {
        Ok(match self {
            FieldCodec::Bool => FieldValue::Bool(r.read_bool()?),
            FieldCodec::IntRange { min, max } => {
                let code = r.read_bits(Self::int_bits(*min, *max))?;
                if code > Self::int_span(*min, *max) {
                    return Err(DecodeError::InvalidValue("int code above the range"));
                }
                FieldValue::Int((i128::from(*min) + i128::from(code)) as i64)
            }
            FieldCodec::Scalar(c) => FieldValue::Scalar(c.read(r)?),
            FieldCodec::Vector3(c) => FieldValue::Vector3(c.read(r)?),
            FieldCodec::Quat(mode) => FieldValue::Quat(read_quat(r, *mode)?),
            FieldCodec::Bytes { max_len } => {
                let len = read_varint(r)?;
                let cap = u64::from((*max_len).min(MAX_BYTES_FIELD_LEN));
                if len > cap {
                    return Err(DecodeError::CountTooLarge {
                        count: len,
                        max: cap,
                    });
                }
                charge(budget, len)?;
                FieldValue::Bytes(r.read_bytes(len as usize)?)
            }
            FieldCodec::Collection { item, max_items } => {
                if matches!(item.as_ref(), FieldCodec::Collection { .. }) {
                    return Err(DecodeError::InvalidValue("nested collection"));
                }
                FieldValue::Collection(CollectionDelta::read(r, item, *max_items, budget)?)
            }
        })
    }
}

fn charge(budget: &mut u64, units: u64) -> Result<(), DecodeError> {
    *budget = budget
        .checked_sub(units)
        .ok_or(DecodeError::CountTooLarge {
            count: units,
            max: ALLOCATION_BUDGET,
        })?;
    Ok(())
}

/// A replicated value.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// Bool field.
    Bool(bool),
    /// IntRange field.
    Int(i64),
    /// Scalar field.
    Scalar(f32),
    /// Vector3 field.
    Vector3([f32; 3]),
    /// Quaternion field (x y z w).
    Quat([f32; 4]),
    /// Bytes field.
    Bytes(Vec<u8>),
    /// Collection delta.
    Collection(CollectionDelta),
}

/// Identity of a collection slot: index plus generation (a reused slot is a
/// new generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepId {
    /// Slot index.
    pub index: u32,
    /// Slot generation.
    pub generation: u32,
}

/// An added or changed collection item.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionItem {
    /// Slot identity.
    pub id: RepId,
    /// Application key of the item.
    pub rep_key: u64,
    /// Item value (item codec).
    pub value: FieldValue,
}

/// The keyed delta block of one collection field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CollectionDelta {
    /// Removed slots.
    pub removed: Vec<RepId>,
    /// New items.
    pub added: Vec<CollectionItem>,
    /// Changed items.
    pub changed: Vec<CollectionItem>,
}

impl CollectionDelta {
    fn cap(max_items: u32) -> usize {
        max_items.min(MAX_COLLECTION_OPS) as usize
    }

    fn write(
        &self,
        w: &mut BitWriter,
        item: &FieldCodec,
        max_items: u32,
    ) -> Result<(), EncodeError> {
        let cap = Self::cap(max_items);
        let total = self.removed.len() + self.added.len() + self.changed.len();
        for (what, len, max) in [
            ("collection removals", self.removed.len(), cap),
            ("collection additions", self.added.len(), cap),
            ("collection changes", self.changed.len(), cap),
            ("collection operations", total, MAX_COLLECTION_OPS as usize),
        ] {
            if len > max {
                return Err(EncodeError::TooMany {
                    what,
                    count: len,
                    max,
                });
            }
        }
        write_varint(w, self.removed.len() as u64);
        for id in &self.removed {
            write_varint(w, u64::from(id.index));
            write_varint(w, u64::from(id.generation));
        }
        for list in [&self.added, &self.changed] {
            write_varint(w, list.len() as u64);
            for it in list {
                write_varint(w, u64::from(it.id.index));
                write_varint(w, u64::from(it.id.generation));
                write_varint(w, it.rep_key);
                item.write(w, &it.value)?;
            }
        }
        Ok(())
    }

    fn read_count(
        r: &mut BitReader<'_>,
        cap: usize,
        budget: &mut u64,
    ) -> Result<usize, DecodeError> {
        let count = read_varint(r)?;
        if count > cap as u64 {
            return Err(DecodeError::CountTooLarge {
                count,
                max: cap as u64,
            });
        }
        charge(budget, count)?;
        Ok(count as usize)
    }

    fn read_id(r: &mut BitReader<'_>) -> Result<RepId, DecodeError> {
        Ok(RepId {
            index: read_varint_u32(r)?,
            generation: read_varint_u32(r)?,
        })
    }

    fn read(
        r: &mut BitReader<'_>,
        item: &FieldCodec,
        max_items: u32,
        budget: &mut u64,
    ) -> Result<Self, DecodeError> {
        let cap = Self::cap(max_items);
        let mut seen = std::collections::HashSet::new();
        let mut total = 0usize;
        let removed_count = Self::read_count(r, cap, budget)?;
        total += removed_count;
        // Each removal needs at least 16 bits: reject impossible counts early.
        if removed_count * 16 > r.remaining_bits() {
            return Err(DecodeError::Truncated);
        }
        let mut removed = Vec::with_capacity(removed_count);
        for _ in 0..removed_count {
            let id = Self::read_id(r)?;
            if !seen.insert(id) {
                return Err(DecodeError::InvalidValue("duplicate collection slot"));
            }
            removed.push(id);
        }
        let mut lists: [Vec<CollectionItem>; 2] = [Vec::new(), Vec::new()];
        for list in &mut lists {
            let count = Self::read_count(r, cap, budget)?;
            total += count;
            if total > MAX_COLLECTION_OPS as usize {
                return Err(DecodeError::CountTooLarge {
                    count: total as u64,
                    max: u64::from(MAX_COLLECTION_OPS),
                });
            }
            if count * 24 > r.remaining_bits() {
                return Err(DecodeError::Truncated);
            }
            list.reserve(count);
            for _ in 0..count {
                let id = Self::read_id(r)?;
                if !seen.insert(id) {
                    return Err(DecodeError::InvalidValue("duplicate collection slot"));
                }
                let rep_key = read_varint(r)?;
                let value = item.read(r, budget)?;
                list.push(CollectionItem { id, rep_key, value });
            }
        }
        let [added, changed] = lists;
        Ok(CollectionDelta {
            removed,
            added,
            changed,
        })
    }
}
