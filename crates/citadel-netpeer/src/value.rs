//! Replicated state values: a plain field value or a keyed collection, the
//! quantization trusted writes go through (so the server holds exactly what a
//! receiver reconstructs), and the collection diff/apply of the wire's keyed
//! delta block.
//!
//! What it is not: a codec (citadel-wire owns the bits). Call order: trusted
//! writes call [`quantize`]; the encoder calls [`collection_delta`]; the
//! session calls [`apply_collection`].

use std::collections::BTreeMap;
use std::sync::Arc;

use citadel_wire::netpeer::{
    CollectionDelta, CollectionItem, FieldCodec, FieldValue, MAX_BYTES_FIELD_LEN, RepId,
};
use citadel_wire::quat::quantize_quat;

/// Items of a collection: slot identity to `(rep_key, value)`.
pub type Items = BTreeMap<RepId, (u64, FieldValue)>;

/// The state of one field.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A non-collection value.
    Plain(FieldValue),
    /// A collection (shared until written).
    Collection(Arc<Items>),
}

impl Value {
    /// Cheap equality: collections compare by pointer first.
    pub fn same(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Collection(a), Value::Collection(b)) => Arc::ptr_eq(a, b) || a == b,
            (a, b) => a == b,
        }
    }
}

/// Why a trusted write was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueError {
    /// The value's type does not match the field codec.
    Type,
    /// Not a finite number, or a length/count over the codec cap.
    Domain,
}

fn quantize_plain(codec: &FieldCodec, value: &FieldValue) -> Result<FieldValue, ValueError> {
    Ok(match (codec, value) {
        (FieldCodec::Bool, FieldValue::Bool(b)) => FieldValue::Bool(*b),
        (FieldCodec::IntRange { min, max }, FieldValue::Int(v)) => {
            FieldValue::Int((*v).clamp(*min, *max))
        }
        (FieldCodec::Scalar(c), FieldValue::Scalar(v)) => {
            FieldValue::Scalar(c.quantize(*v).map_err(|_| ValueError::Domain)?)
        }
        (FieldCodec::Vector3(c), FieldValue::Vector3(v)) => {
            let mut out = [0.0; 3];
            for (i, axis) in c.axes().iter().enumerate() {
                out[i] = axis.quantize(v[i]).map_err(|_| ValueError::Domain)?;
            }
            FieldValue::Vector3(out)
        }
        (FieldCodec::Quat(mode), FieldValue::Quat(q)) => {
            // Settle on a value whose own round trip is itself when one
            // exists (near-equal largest components can make re-compression
            // alternate between two values; receivers then decode the
            // other one, within one code step).
            let mut v = quantize_quat(*mode, *q);
            for _ in 0..8 {
                let next = quantize_quat(*mode, v);
                if next == v {
                    break;
                }
                v = next;
            }
            FieldValue::Quat(v)
        }
        (FieldCodec::Bytes { max_len }, FieldValue::Bytes(b)) => {
            if b.len() > (*max_len).min(MAX_BYTES_FIELD_LEN) as usize {
                return Err(ValueError::Domain);
            }
            FieldValue::Bytes(b.clone())
        }
        _ => return Err(ValueError::Type),
    })
}

/// Quantizes a trusted write of a plain field.
pub fn quantize(codec: &FieldCodec, value: &FieldValue) -> Result<Value, ValueError> {
    if matches!(codec, FieldCodec::Collection { .. }) {
        return Err(ValueError::Type);
    }
    quantize_plain(codec, value).map(Value::Plain)
}

/// Quantizes a trusted write of a whole collection.
pub fn quantize_items(codec: &FieldCodec, items: Items) -> Result<Value, ValueError> {
    let FieldCodec::Collection { item, max_items } = codec else {
        return Err(ValueError::Type);
    };
    if items.len() > *max_items as usize {
        return Err(ValueError::Domain);
    }
    let mut out = Items::new();
    for (id, (key, v)) in items {
        out.insert(id, (key, quantize_plain(item, &v)?));
    }
    Ok(Value::Collection(Arc::new(out)))
}

/// The default value of a field (false, clamped 0, range minimum, identity,
/// empty).
pub fn default_value(codec: &FieldCodec) -> Value {
    match codec {
        FieldCodec::Bool => Value::Plain(FieldValue::Bool(false)),
        FieldCodec::IntRange { min, max } => Value::Plain(FieldValue::Int(0i64.clamp(*min, *max))),
        FieldCodec::Scalar(c) => {
            Value::Plain(FieldValue::Scalar(c.quantize(0.0).unwrap_or(c.min())))
        }
        FieldCodec::Vector3(c) => {
            let mut v = [0.0; 3];
            for (i, axis) in c.axes().iter().enumerate() {
                v[i] = axis.quantize(0.0).unwrap_or(axis.min());
            }
            Value::Plain(FieldValue::Vector3(v))
        }
        FieldCodec::Quat(mode) => {
            Value::Plain(FieldValue::Quat(quantize_quat(*mode, [0.0, 0.0, 0.0, 1.0])))
        }
        FieldCodec::Bytes { .. } => Value::Plain(FieldValue::Bytes(Vec::new())),
        FieldCodec::Collection { .. } => Value::Collection(Arc::new(Items::new())),
    }
}

/// All items as additions (a full bunch's block).
pub fn collection_full(items: &Items) -> CollectionDelta {
    CollectionDelta {
        removed: Vec::new(),
        added: items
            .iter()
            .map(|(id, (key, v))| CollectionItem {
                id: *id,
                rep_key: *key,
                value: v.clone(),
            })
            .collect(),
        changed: Vec::new(),
    }
}

/// The keyed delta from `base` to `cur`.
pub fn collection_delta(base: &Items, cur: &Items) -> CollectionDelta {
    let mut d = CollectionDelta::default();
    for id in base.keys() {
        if !cur.contains_key(id) {
            d.removed.push(*id);
        }
    }
    for (id, (key, v)) in cur {
        let item = || CollectionItem {
            id: *id,
            rep_key: *key,
            value: v.clone(),
        };
        match base.get(id) {
            None => d.added.push(item()),
            Some(old) if old != &(*key, v.clone()) => d.changed.push(item()),
            Some(_) => {}
        }
    }
    d
}

/// Operation count of a delta block.
pub fn delta_ops(d: &CollectionDelta) -> usize {
    d.removed.len() + d.added.len() + d.changed.len()
}

/// Applies a received block onto `base`: removing or changing a missing
/// slot, adding a present one, or growing past `max_items` is an error.
pub fn apply_collection(
    base: &Items,
    delta: &CollectionDelta,
    max_items: u32,
) -> Result<Items, &'static str> {
    let mut out = base.clone();
    for id in &delta.removed {
        out.remove(id).ok_or("removal of a missing slot")?;
    }
    for it in &delta.added {
        if out.insert(it.id, (it.rep_key, it.value.clone())).is_some() {
            return Err("addition of a present slot");
        }
    }
    for it in &delta.changed {
        let slot = out.get_mut(&it.id).ok_or("change of a missing slot")?;
        *slot = (it.rep_key, it.value.clone());
    }
    if out.len() > max_items as usize {
        return Err("collection above its item cap");
    }
    Ok(out)
}
