//! Body-level decode and encode errors shared by every kind's codec.
//!
//! This is not the framing error (see [`crate::WireError`]): framing decides
//! where an envelope ends, these errors say why a body inside a well-framed
//! envelope was refused. Every variant has a short stable [`DecodeError::code`]
//! that language-neutral fixtures (`tests/vectors/kinds.json`) refer to.

use thiserror::Error;

/// Why a body could not be decoded. Coarse on purpose: callers map it to a
/// drop, a rejection or a counter; they never echo details to peers.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Shorter than a fixed layout, a length or count overruns the data, or a
    /// bitstream read ran past the end.
    #[error("body truncated")]
    Truncated,
    /// Bytes remain after the last field where the layout forbids them.
    #[error("trailing bytes after the last field")]
    TrailingBytes,
    /// A bitstream ended with non-zero pad bits.
    #[error("non-zero padding bits")]
    NonZeroPadding,
    /// A string field is not valid UTF-8.
    #[error("invalid UTF-8 in a string field")]
    InvalidUtf8,
    /// A count is above its documented cap.
    #[error("count {count} exceeds the cap of {max}")]
    CountTooLarge {
        /// The count read from the wire.
        count: u64,
        /// The documented maximum.
        max: u64,
    },
    /// A field holds a value outside its domain.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// A bit-varint is overlong or overflows 64 bits.
    #[error("malformed varint")]
    Varint,
    /// A full NetworkPeer bunch names a different schema identity.
    #[error("schema identity mismatch")]
    SchemaMismatch,
    /// A JSON body (kinds 26-28) does not match its schema.
    #[error("invalid JSON body: {0}")]
    Json(String),
}

impl DecodeError {
    /// The stable short code used by the fixture files.
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::Truncated => "truncated",
            DecodeError::TrailingBytes => "trailing",
            DecodeError::NonZeroPadding => "padding",
            DecodeError::InvalidUtf8 => "utf8",
            DecodeError::CountTooLarge { .. } => "count",
            DecodeError::InvalidValue(_) => "value",
            DecodeError::Varint => "varint",
            DecodeError::SchemaMismatch => "schema",
            DecodeError::Json(_) => "json",
        }
    }
}

/// Why a value could not be encoded (the caller's bug, never the peer's).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// A quantizer was given NaN.
    #[error("cannot quantize NaN")]
    NotANumber,
    /// More items than the layout can count.
    #[error("{what}: {count} exceeds the encodable maximum {max}")]
    TooMany {
        /// Which list overflowed.
        what: &'static str,
        /// Items supplied.
        count: usize,
        /// Maximum allowed.
        max: usize,
    },
    /// A value does not fit the field's codec or the schema.
    #[error("invalid value for encoding: {0}")]
    InvalidValue(&'static str),
}

/// Why a codec could not be built from its parameters (bad HELLO values,
/// a bad schema).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum CodecError {
    /// A bound is NaN or infinite.
    #[error("bounds must be finite")]
    NonFiniteBounds,
    /// `max <= min` on some axis.
    #[error("max must be greater than min")]
    EmptyRange,
    /// `values_per_unit` is zero.
    #[error("values_per_unit must be at least 1")]
    ZeroResolution,
    /// The range needs more than 64 bits.
    #[error("range needs more than 64 bits")]
    TooWide,
    /// An unsupported quaternion mode byte.
    #[error("quaternion mode must be 9, 10 or 15")]
    QuatMode,
    /// Schema fields not strictly ascending, or otherwise invalid.
    #[error("invalid schema: {0}")]
    Schema(&'static str),
}
