//! Keyed writes of server-owned collections: insert or update one item by
//! its application key (`rep_key`), remove one by key, read the items.
//!
//! What it is: trusted code's per-item API on top of
//! [`Authority::set_items`], so every write still goes through the same
//! quantization and `MaxItems` check and replicates as the keyed delta
//! against each receiver's acked base. A new key takes the lowest free slot
//! index (generation 0); an existing key keeps its slot. The delta against
//! a receiver's acked state is exact whichever slot a key takes, so no
//! generation history is kept.
//!
//! What it is not: a client path (collections cannot be ClientOwned).
//! Call order: any time after `spawn`, like `set`.

use citadel_wire::netpeer::{FieldValue, RepId};

use crate::server::{ApiError, Authority};
use crate::value::{Items, Value, ValueError};

/// The lowest slot index no item uses.
fn free_slot(items: &Items) -> RepId {
    let mut index = 0u32;
    for id in items.keys() {
        if id.index > index {
            break;
        }
        if id.index == index {
            index = index.saturating_add(1);
        }
    }
    RepId {
        index,
        generation: 0,
    }
}

impl Authority {
    /// The items of a collection field.
    pub fn items(&self, object_id: u32, field: u16) -> Result<&Items, ApiError> {
        match self
            .values(object_id)
            .ok_or(ApiError::UnknownObject)?
            .get(usize::from(field))
            .ok_or(ApiError::UnknownField)?
        {
            Value::Collection(items) => Ok(items),
            Value::Plain(_) => Err(ApiError::Value(ValueError::Type)),
        }
    }

    /// Inserts the item `rep_key` or replaces its value; returns its slot.
    /// Refused (nothing written) past `MaxItems` or for a value the item
    /// codec does not take.
    pub fn upsert_item(
        &mut self,
        object_id: u32,
        field: u16,
        rep_key: u64,
        value: FieldValue,
    ) -> Result<RepId, ApiError> {
        let mut items = self.items(object_id, field)?.clone();
        let id = items
            .iter()
            .find(|(_, (key, _))| *key == rep_key)
            .map_or_else(|| free_slot(&items), |(id, _)| *id);
        items.insert(id, (rep_key, value));
        self.set_items(object_id, field, items)?;
        Ok(id)
    }

    /// Removes the item `rep_key`; `false` when there is none.
    pub fn remove_item(
        &mut self,
        object_id: u32,
        field: u16,
        rep_key: u64,
    ) -> Result<bool, ApiError> {
        let mut items = self.items(object_id, field)?.clone();
        let before = items.len();
        items.retain(|_, (key, _)| *key != rep_key);
        if items.len() == before {
            return Ok(false);
        }
        self.set_items(object_id, field, items)?;
        Ok(true)
    }
}
