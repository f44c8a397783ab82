//! Server-side bunch encoding, split so the values section can be shared.
//!
//! A bunch is `header ‖ values`: the header (`object_id`, `is_full`,
//! `result_id`, identity or `base_id`, changed mask) is per receiver, the
//! values section depends only on (full/delta, base state, new state,
//! visibility, layout version). The header's bit length is always
//! `≡ 1 + field_count (mod 8)` (varints grow in 8-bit groups), so a values
//! section can be encoded once at that bit phase and spliced after any
//! receiver's header with one OR and one copy; the result is byte-identical
//! to encoding the whole bunch in one pass (§6.5), which [`encode_direct`]
//! does and the tests compare against.
//!
//! What it is not: policy (when to send, which base): see `server`.
//! Call order: [`plan`], then [`encode_direct`] or [`values_section`] once
//! plus [`assemble`] per receiver.

use std::sync::Arc;

use citadel_wire::bits::BitWriter;
use citadel_wire::netpeer::{BunchBase, ClassSchema, FieldValue};
use citadel_wire::varint::write_varint;

use crate::class::FieldSpec;
use crate::value::{Value, collection_delta, collection_full, delta_ops};

/// The state of an object at one revision, shared by every pair that sent
/// or acknowledged it.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Object-local revision (increases on every committed change).
    pub rev: u64,
    /// One value per current field.
    pub values: Vec<Value>,
}

/// What one bunch carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Full bunch (else a delta against the pair's acked base).
    pub full: bool,
    /// Set field ids, ascending.
    pub fields: Vec<u16>,
    /// Pre-built collection blocks, by field id, in `fields` order.
    pub blocks: Vec<(u16, FieldValue)>,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// The receiver already holds this state.
    Nothing,
    /// Send this plan.
    Send(Plan),
    /// A collection delta exceeded the collection cap: send this full plan.
    ForcedFull(Plan),
}

/// Plans a bunch of `cur` for a receiver whose acked base is `base` (`None`
/// = full). `fields` are the class's field specs; only the first
/// `field_count` (the receiver's layout version) are considered.
pub fn plan(
    fields: &[FieldSpec],
    field_count: usize,
    base: Option<&Snapshot>,
    cur: &Snapshot,
    owner: bool,
    collection_cap: usize,
) -> Planned {
    match base {
        None => Planned::Send(full_plan(fields, field_count, cur, owner)),
        Some(base) => {
            let mut p = Plan {
                full: false,
                fields: Vec::new(),
                blocks: Vec::new(),
            };
            for (i, spec) in fields.iter().enumerate().take(field_count) {
                if !spec.cond.visible(owner, false) {
                    continue;
                }
                let (b, c) = (&base.values[i], &cur.values[i]);
                if b.same(c) {
                    continue;
                }
                if let (Value::Collection(bi), Value::Collection(ci)) = (b, c) {
                    let d = collection_delta(bi, ci);
                    if delta_ops(&d) > collection_cap {
                        return Planned::ForcedFull(full_plan(fields, field_count, cur, owner));
                    }
                    p.blocks.push((i as u16, FieldValue::Collection(d)));
                }
                p.fields.push(i as u16);
            }
            if p.fields.is_empty() {
                Planned::Nothing
            } else {
                Planned::Send(p)
            }
        }
    }
}

fn full_plan(fields: &[FieldSpec], field_count: usize, cur: &Snapshot, owner: bool) -> Plan {
    let mut p = Plan {
        full: true,
        fields: Vec::new(),
        blocks: Vec::new(),
    };
    for (i, spec) in fields.iter().enumerate().take(field_count) {
        if !spec.cond.visible(owner, true) {
            continue;
        }
        if let Value::Collection(items) = &cur.values[i] {
            p.blocks
                .push((i as u16, FieldValue::Collection(collection_full(items))));
        }
        p.fields.push(i as u16);
    }
    p
}

/// Bit phase of the values section of `schema`'s bunches.
pub fn phase(schema: &ClassSchema) -> u32 {
    ((1 + schema.fields().len()) % 8) as u32
}

fn write_header(
    w: &mut BitWriter,
    schema: &ClassSchema,
    object_id: u32,
    result_id: u64,
    base: BunchBase,
    set: &[u16],
) {
    w.write_bits(u64::from(object_id), 32);
    match base {
        BunchBase::Full => {
            w.write_bool(true);
            write_varint(w, result_id);
            w.write_bytes(schema.schema_hash());
            w.write_bits(u64::from(schema.layout_version()), 32);
        }
        BunchBase::Delta(base_id) => {
            w.write_bool(false);
            write_varint(w, result_id);
            write_varint(w, base_id);
        }
    }
    let mut next = set.iter().peekable();
    for i in 0..schema.fields().len() {
        let on = next.peek().is_some_and(|&&f| usize::from(f) == i);
        if on {
            next.next();
        }
        w.write_bool(on);
    }
}

fn write_values(
    w: &mut BitWriter,
    schema: &ClassSchema,
    plan: &Plan,
    cur: &Snapshot,
) -> Result<(), citadel_wire::EncodeError> {
    let mut blocks = plan.blocks.iter();
    for &f in &plan.fields {
        let codec = &schema.fields()[usize::from(f)];
        match &cur.values[usize::from(f)] {
            Value::Plain(v) => codec.write(w, v)?,
            Value::Collection(_) => {
                let (_, block) = blocks
                    .next()
                    .ok_or(citadel_wire::EncodeError::InvalidValue("missing block"))?;
                codec.write(w, block)?;
            }
        }
    }
    Ok(())
}

/// Encodes one whole bunch in one pass (the default path).
pub fn encode_direct(
    schema: &ClassSchema,
    object_id: u32,
    result_id: u64,
    base: BunchBase,
    plan: &Plan,
    cur: &Snapshot,
) -> Result<Vec<u8>, citadel_wire::EncodeError> {
    let mut w = BitWriter::with_capacity(32 + schema.fields().len() / 8);
    write_header(&mut w, schema, object_id, result_id, base, &plan.fields);
    write_values(&mut w, schema, plan, cur)?;
    Ok(w.into_bytes())
}

/// A values section encoded once, at the schema's phase.
#[derive(Debug, Clone)]
pub struct SharedValues {
    /// The plan it encodes.
    pub plan: Arc<Plan>,
    /// Bytes: `phase` zero bits, the values, zero padding.
    pub bytes: bytes::Bytes,
}

/// Encodes `plan`'s values once for sharing.
pub fn values_section(
    schema: &ClassSchema,
    plan: Plan,
    cur: &Snapshot,
) -> Result<SharedValues, citadel_wire::EncodeError> {
    let mut w = BitWriter::with_capacity(16);
    w.write_bits(0, phase(schema));
    write_values(&mut w, schema, &plan, cur)?;
    Ok(SharedValues {
        plan: Arc::new(plan),
        bytes: bytes::Bytes::from(w.into_bytes()),
    })
}

/// One receiver's bunch: its own header, then the shared values.
pub fn assemble(
    schema: &ClassSchema,
    object_id: u32,
    result_id: u64,
    base: BunchBase,
    shared: &SharedValues,
) -> Vec<u8> {
    let mut w = BitWriter::with_capacity(24 + schema.fields().len() / 8);
    write_header(
        &mut w,
        schema,
        object_id,
        result_id,
        base,
        &shared.plan.fields,
    );
    let mut out = w.into_bytes();
    out.reserve(shared.bytes.len());
    let values = &shared.bytes[..];
    if phase(schema) == 0 {
        out.extend_from_slice(values);
    } else if let (Some(last), Some((first, rest))) = (out.last_mut(), values.split_first()) {
        *last |= *first;
        out.extend_from_slice(rest);
    }
    out
}
