//! The table of live handles.
//!
//! What it is: a process-wide map from handle value to client. A
//! `CitadelClient*` handed to foreign code is not a real pointer but a
//! unique, never reused id (shifted so it looks aligned), so a null, forged,
//! stale or already freed handle is found missing and reported as
//! `CITADEL_STATUS_INVALID_ARGUMENT` instead of being dereferenced. Each
//! client sits behind its own mutex, so concurrent calls on one handle are
//! serialised rather than racing (the poll-loop contract still asks for one
//! owner).
//!
//! What it is not: a pool or a cache; removing a handle is the only way a
//! client is dropped.
//!
//! Call order: `insert` after connecting → `get` on every call → `remove`
//! once, on free.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::client::Client;

/// A shared, lockable client.
pub type Shared = Arc<Mutex<Client>>;

static HANDLES: Mutex<BTreeMap<usize, Shared>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicUsize = AtomicUsize::new(1);

/// Handle values step by this much, so they never look like small integers.
const HANDLE_STRIDE: usize = 16;

fn table() -> MutexGuard<'static, BTreeMap<usize, Shared>> {
    HANDLES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Registers `client`; returns its handle value (never 0, never reused
/// within the process: ids are `usize`, wrapping is not reachable).
pub fn insert(client: Client) -> usize {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let handle = id.wrapping_mul(HANDLE_STRIDE);
    table().insert(handle, Arc::new(Mutex::new(client)));
    handle
}

/// The client registered under `handle`, if it is live.
pub fn get(handle: usize) -> Option<Shared> {
    table().get(&handle).cloned()
}

/// Unregisters `handle`, returning its client (the caller closes it).
pub fn remove(handle: usize) -> Option<Shared> {
    table().remove(&handle)
}

/// Locks a client, recovering from a poisoned lock (a panic inside a call
/// was already reported as `CITADEL_STATUS_INTERNAL`).
pub fn lock(client: &Shared) -> MutexGuard<'_, Client> {
    client.lock().unwrap_or_else(|e| e.into_inner())
}
