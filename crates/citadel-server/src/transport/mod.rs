//! Transports adapt bytes to envelopes and back. They know framing, not
//! kinds: every decoded envelope goes to the gateway's connection, every
//! outbound batch comes from its lanes.

pub mod ws;
