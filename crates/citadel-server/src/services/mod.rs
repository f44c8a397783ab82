//! Plain async services over the store, with no transport knowledge:
//! accounts and sessions (`accounts`), token formats (`tokens`), field
//! rules (`validation`), the live-connection index used for revocation
//! (`live`), durable player notifications (`notifications`), the friend graph
//! (`friends`), groups and their roles (`groups`), durable chat (`chat`). HTTP handlers and the realtime handshake call into them.

pub mod accounts;
pub mod chat;
pub mod friends;
pub mod groups;
pub mod live;
pub mod matchmaker;
pub mod notifications;
pub mod party;
pub mod revocation;
pub mod tokens;
pub mod validation;

pub use accounts::{AccountService, ServiceError, TokenPair};
