//! The class registry's building blocks: what trusted code declares for a
//! class (fields with codec, condition, authority, cooldown; evolution
//! policy) and the compiled form the authority and the session use (one
//! `ClassSchema` per accepted layout version, each with its BLAKE3-128
//! identity from `citadel_wire::schema`).
//!
//! What it is not: a registry of objects, or anything a client can reach.
//! Call order: build a [`ClassSpec`], then [`Class::compile`].
//!
//! Identity choices where the spec is silent (realtime-wire §3.10):
//! codecs without a published codec id (IntRange, Bytes, Collection) hash
//! with `codec_id = 0`; a collection hashes with its item's type tag and
//! `MaxItems` bounds; Vector3 and quaternion parameters contribute no bounds
//! (base shape 0), as the spec defines no bounds variant for them.

use citadel_wire::netpeer::{ClassSchema, FieldCodec};
use citadel_wire::schema::{FieldBounds, SchemaFieldIdentity, bounds_shape, schema_hash};

/// Largest number of fields a class may declare.
pub const MAX_CLASS_FIELDS: usize = 4_096;

/// Replication condition of a field (the `cond` byte of the identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cond {
    /// Sent to every relevant receiver.
    None = 0,
    /// Sent to the owner only, never to peers.
    OwnerOnly = 1,
    /// Sent to peers, not to the owner.
    SkipOwner = 2,
    /// Sent only in full bunches (spawn, relevance entry, re-baseline).
    InitialOnly = 3,
    /// Sent to peers (simulated proxies), not to the owner.
    SimulatedOnly = 4,
    /// Sent to the owner (autonomous proxy) only.
    AutonomousOnly = 5,
    /// Application-decided; with no per-receiver hook it fails closed:
    /// never sent.
    Custom = 6,
    /// Never sent.
    Never = 7,
}

impl Cond {
    /// Whether a receiver sees the field: `owner` says whether the receiver
    /// owns the object, `full` whether the bunch is a full one.
    pub fn visible(self, owner: bool, full: bool) -> bool {
        match self {
            Cond::None => true,
            Cond::OwnerOnly | Cond::AutonomousOnly => owner,
            Cond::SkipOwner | Cond::SimulatedOnly => !owner,
            Cond::InitialOnly => full,
            Cond::Custom | Cond::Never => false,
        }
    }
}

/// Who may write a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Authority {
    /// Only trusted server code writes it.
    ServerOnly = 0,
    /// The object's owner may propose it (kind 13 from the client).
    ClientOwned = 1,
}

/// Type tag of the identity (realtime-wire §3.10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TypeTag {
    /// 1.
    Bool = 1,
    /// 2.
    Int = 2,
    /// 3.
    Uint = 3,
    /// 4.
    Scalar = 4,
    /// 5.
    Vector3 = 5,
    /// 6.
    Quat = 6,
    /// 7.
    Bytes = 7,
    /// 8.
    Enum = 8,
}

/// One declared field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    /// Property name (enters the identity through `bounds_shape`).
    pub name: String,
    /// Wire codec.
    pub codec: FieldCodec,
    /// Type tag; `None` derives it from the codec (IntRange is `Int`).
    pub type_tag: Option<TypeTag>,
    /// Replication condition.
    pub cond: Cond,
    /// Write authority.
    pub authority: Authority,
    /// Minimum time between two accepted proposals of this field by one
    /// connection (ms); `None` uses the connection limit's default.
    pub cooldown_ms: Option<u64>,
}

impl FieldSpec {
    /// A server-only field visible to everyone.
    pub fn new(name: impl Into<String>, codec: FieldCodec) -> Self {
        FieldSpec {
            name: name.into(),
            codec,
            type_tag: None,
            cond: Cond::None,
            authority: Authority::ServerOnly,
            cooldown_ms: None,
        }
    }
    /// Sets the condition.
    pub fn cond(mut self, cond: Cond) -> Self {
        self.cond = cond;
        self
    }
    /// Makes the field proposable by the owner.
    pub fn client_owned(mut self) -> Self {
        self.authority = Authority::ClientOwned;
        self
    }
    /// Overrides the type tag.
    pub fn type_tag(mut self, tag: TypeTag) -> Self {
        self.type_tag = Some(tag);
        self
    }
    /// Sets a per-field proposal cooldown.
    pub fn cooldown_ms(mut self, ms: u64) -> Self {
        self.cooldown_ms = Some(ms);
        self
    }

    fn identity(&self, field_id: u16) -> SchemaFieldIdentity {
        let (tag, codec_id, bounds) = codec_identity(&self.codec);
        SchemaFieldIdentity {
            field_id,
            type_tag: self.type_tag.map_or(tag, |t| t as u16),
            codec_id,
            cond: self.cond as u8,
            authority: self.authority as u8,
            bounds_shape: bounds_shape(&self.name, &bounds),
        }
    }

    /// Whether the field is a collection.
    pub fn is_collection(&self) -> bool {
        matches!(self.codec, FieldCodec::Collection { .. })
    }
}

fn codec_identity(codec: &FieldCodec) -> (u16, u16, FieldBounds) {
    match codec {
        FieldCodec::Bool => (TypeTag::Bool as u16, 1, FieldBounds::None),
        FieldCodec::IntRange { min, max } => (
            TypeTag::Int as u16,
            0,
            FieldBounds::IntRange {
                min: *min,
                max: *max,
            },
        ),
        FieldCodec::Scalar(c) => (
            TypeTag::Scalar as u16,
            2,
            FieldBounds::ScalarRange {
                min: c.min(),
                max: c.max(),
                values_per_unit: c.values_per_unit(),
            },
        ),
        FieldCodec::Vector3(_) => (TypeTag::Vector3 as u16, 3, FieldBounds::None),
        FieldCodec::Quat(mode) => (TypeTag::Quat as u16, mode.codec_id(), FieldBounds::None),
        FieldCodec::Bytes { max_len } => (
            TypeTag::Bytes as u16,
            0,
            FieldBounds::MaxByteLength(*max_len),
        ),
        FieldCodec::Collection { item, max_items } => {
            let (tag, _, _) = codec_identity(item);
            (tag, 0, FieldBounds::MaxItems(*max_items))
        }
    }
}

/// Schema evolution policy (§6.4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Evolution {
    /// Only the current layout version is accepted.
    #[default]
    Strict,
    /// Older versions whose field tables are prefixes of the current one.
    Compatible {
        /// `(layout_version, field_count)` of each accepted older version.
        older: Vec<(u32, usize)>,
        /// Lowest accepted version (downgrade floor).
        min_version: u32,
    },
}

/// What trusted code registers.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassSpec {
    /// Application class id (kind 15 `class_id`).
    pub class_id: u32,
    /// Current layout version.
    pub layout_version: u32,
    /// Fields in id order.
    pub fields: Vec<FieldSpec>,
    /// Evolution policy.
    pub evolution: Evolution,
    /// A Vector3 field whose value places the object in the interest grid.
    pub position_field: Option<u16>,
}

/// Why a registration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassError {
    /// The class id is taken.
    Duplicate,
    /// A field table or policy is invalid (reason).
    Invalid(&'static str),
}

impl std::fmt::Display for ClassError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClassError::Duplicate => f.write_str("class id already registered"),
            ClassError::Invalid(why) => write!(f, "invalid class: {why}"),
        }
    }
}

impl std::error::Error for ClassError {}

/// One accepted layout version.
#[derive(Debug, Clone)]
pub struct Version {
    /// Exact schema of this version (a prefix of the current fields).
    pub schema: ClassSchema,
}

/// A compiled class.
#[derive(Debug, Clone)]
pub struct Class {
    spec: ClassSpec,
    /// Index 0 is the current version, then the older accepted ones.
    versions: Vec<Version>,
    min_version: u32,
}

impl Class {
    /// Validates `spec` and computes each accepted version's identity.
    pub fn compile(spec: ClassSpec) -> Result<Class, ClassError> {
        if spec.fields.is_empty() || spec.fields.len() > MAX_CLASS_FIELDS {
            return Err(ClassError::Invalid("a class has 1 to 4096 fields"));
        }
        if let Some(p) = spec.position_field {
            match spec.fields.get(usize::from(p)) {
                Some(f) if matches!(f.codec, FieldCodec::Vector3(_)) => {}
                _ => return Err(ClassError::Invalid("position field must be a Vector3")),
            }
        }
        for f in &spec.fields {
            if f.is_collection() && f.authority == Authority::ClientOwned {
                return Err(ClassError::Invalid("a collection cannot be client-owned"));
            }
        }
        let mut prefixes = vec![(spec.layout_version, spec.fields.len())];
        let min_version = match &spec.evolution {
            Evolution::Strict => spec.layout_version,
            Evolution::Compatible { older, min_version } => {
                for &(v, n) in older {
                    if v >= spec.layout_version || n == 0 || n > spec.fields.len() {
                        return Err(ClassError::Invalid(
                            "an older version must be lower and a non-empty prefix",
                        ));
                    }
                    if prefixes.iter().any(|(pv, _)| *pv == v) {
                        return Err(ClassError::Invalid("a version is listed twice"));
                    }
                    prefixes.push((v, n));
                }
                if *min_version > spec.layout_version {
                    return Err(ClassError::Invalid("minimum above the current version"));
                }
                *min_version
            }
        };
        let mut versions = Vec::with_capacity(prefixes.len());
        for (v, n) in prefixes {
            let identities: Vec<SchemaFieldIdentity> = spec.fields[..n]
                .iter()
                .enumerate()
                .map(|(i, f)| f.identity(i as u16))
                .collect();
            let hash = schema_hash(v, &identities).map_err(|_| ClassError::Invalid("identity"))?;
            let codecs = spec.fields[..n].iter().map(|f| f.codec.clone()).collect();
            let schema = ClassSchema::new(codecs, hash, v)
                .map_err(|_| ClassError::Invalid("field codec parameters"))?;
            versions.push(Version { schema });
        }
        Ok(Class {
            spec,
            versions,
            min_version,
        })
    }

    /// The registered spec.
    pub fn spec(&self) -> &ClassSpec {
        &self.spec
    }
    /// The class id.
    pub fn id(&self) -> u32 {
        self.spec.class_id
    }
    /// The current schema.
    pub fn current(&self) -> &ClassSchema {
        &self.versions[0].schema
    }
    /// Accepted versions (index 0 = current).
    pub fn versions(&self) -> &[Version] {
        &self.versions
    }
    /// Field specs.
    pub fn fields(&self) -> &[FieldSpec] {
        &self.spec.fields
    }
    /// Index of an accepted layout version at or above the floor.
    pub fn version_index(&self, layout_version: u32) -> Option<usize> {
        if layout_version < self.min_version {
            return None;
        }
        self.versions
            .iter()
            .position(|v| v.schema.layout_version() == layout_version)
    }
}
