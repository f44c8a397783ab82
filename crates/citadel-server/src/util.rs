//! Small shared types that belong to no one layer.
//!
//! What it is: [`BoxFuture`], the return type of every object-safe async
//! seam (stores, RPC handlers, room policy, session validation). What it is
//! not: a place for logic; a helper that grows behaviour belongs to the
//! module that uses it.

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;
