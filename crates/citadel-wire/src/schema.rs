//! NetworkPeer class identity: the BLAKE3-128 schema hash
//! (`blake3-128/citadel.schema.v1`) and the FNV-1a `bounds_shape` fold.
//!
//! The preimage is little-endian, unlike every wire field: domain tag,
//! `layout_version u32`, field count `u32`, then per field (strictly
//! ascending ids) `field_id u16`, `type_tag u16`, `codec_id u16`, `cond u8`,
//! `authority u8`, `bounds_shape u64` (realtime-wire §3.10).

use crate::error::CodecError;

/// Algorithm name published with the digest.
pub const SCHEMA_HASH_ALGORITHM: &str = "blake3-128/citadel.schema.v1";
/// Domain-separation tag at the start of the preimage.
pub const SCHEMA_DOMAIN_TAG: &[u8; 17] = b"citadel.schema.v1";
/// Digest width in bytes.
pub const SCHEMA_HASH_BYTES: usize = 16;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// One field's contribution to the schema identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SchemaFieldIdentity {
    /// Position of the field in the class (0-based).
    pub field_id: u16,
    /// Type tag (Bool 1, Int 2, Uint 3, Scalar 4, Vector3 5, Quat 6, Bytes 7, Enum 8).
    pub type_tag: u16,
    /// Codec id (Bool 1, Scalar 2, Vector3 3, Quat 4/5/6).
    pub codec_id: u16,
    /// Replication condition (None 0 … Never 7).
    pub cond: u8,
    /// Authority (ServerOnly 0, ClientOwned 1).
    pub authority: u8,
    /// The folded bounds shape ([`bounds_shape`]).
    pub bounds_shape: u64,
}

/// Computes the 16-byte schema digest. Fields must be strictly ascending by
/// `field_id`.
pub fn schema_hash(
    layout_version: u32,
    fields: &[SchemaFieldIdentity],
) -> Result<[u8; SCHEMA_HASH_BYTES], CodecError> {
    if fields.windows(2).any(|w| w[0].field_id >= w[1].field_id) {
        return Err(CodecError::Schema("field ids must be strictly ascending"));
    }
    let count = u32::try_from(fields.len()).map_err(|_| CodecError::Schema("too many fields"))?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(SCHEMA_DOMAIN_TAG);
    hasher.update(&layout_version.to_le_bytes());
    hasher.update(&count.to_le_bytes());
    for f in fields {
        hasher.update(&f.field_id.to_le_bytes());
        hasher.update(&f.type_tag.to_le_bytes());
        hasher.update(&f.codec_id.to_le_bytes());
        hasher.update(&[f.cond, f.authority]);
        hasher.update(&f.bounds_shape.to_le_bytes());
    }
    let digest = hasher.finalize();
    let mut out = [0u8; SCHEMA_HASH_BYTES];
    out.copy_from_slice(&digest.as_bytes()[..SCHEMA_HASH_BYTES]);
    Ok(out)
}

/// 64-bit FNV-1a over `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The bounds of a field as they enter its identity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldBounds {
    /// No bounds.
    None,
    /// Integer range (discriminant 1).
    IntRange {
        /// Inclusive minimum.
        min: i64,
        /// Inclusive maximum.
        max: i64,
    },
    /// Scalar range (discriminant 2).
    ScalarRange {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
        /// Codes per unit.
        values_per_unit: u32,
    },
    /// Maximum byte length (discriminant 3).
    MaxByteLength(u32),
    /// Maximum item count (discriminant 4).
    MaxItems(u32),
}

impl FieldBounds {
    /// The base shape: discriminant in the top byte, FNV-1a of the payload in
    /// the low 56 bits (0 for no bounds).
    pub fn base_shape(&self) -> u64 {
        let (disc, payload): (u64, Vec<u8>) = match *self {
            FieldBounds::None => return 0,
            FieldBounds::IntRange { min, max } => {
                (1, [min.to_le_bytes(), max.to_le_bytes()].concat())
            }
            FieldBounds::ScalarRange {
                min,
                max,
                values_per_unit,
            } => (
                2,
                [
                    min.to_bits().to_le_bytes(),
                    max.to_bits().to_le_bytes(),
                    values_per_unit.to_le_bytes(),
                ]
                .concat(),
            ),
            FieldBounds::MaxByteLength(n) => (3, n.to_le_bytes().to_vec()),
            FieldBounds::MaxItems(n) => (4, n.to_le_bytes().to_vec()),
        };
        (disc << 56) | (fnv1a64(&payload) & 0x00FF_FFFF_FFFF_FFFF)
    }
}

/// The full `bounds_shape` of a named field: FNV-1a over the base shape and
/// the FNV-1a key of the property name (both `u64` little-endian).
pub fn bounds_shape(property_name: &str, bounds: &FieldBounds) -> u64 {
    let key = fnv1a64(property_name.as_bytes());
    let mut preimage = [0u8; 16];
    preimage[..8].copy_from_slice(&bounds.base_shape().to_le_bytes());
    preimage[8..].copy_from_slice(&key.to_le_bytes());
    fnv1a64(&preimage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_example_from_the_spec() {
        let b = FieldBounds::IntRange { min: 0, max: 100 };
        assert_eq!(b.base_shape(), 0x01dc_2273_d758_f7c1);
        assert_eq!(fnv1a64(b"health"), 0x7f69_d4b5_288b_a9cf);
        assert_eq!(bounds_shape("health", &b), 0x2274_df58_bde5_25e0);
    }

    #[test]
    fn rejects_unordered_fields() {
        let f = SchemaFieldIdentity {
            field_id: 1,
            type_tag: 1,
            codec_id: 1,
            cond: 0,
            authority: 0,
            bounds_shape: 0,
        };
        assert!(schema_hash(1, &[f, f]).is_err());
    }
}
