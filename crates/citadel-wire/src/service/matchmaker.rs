//! Kind 26: the matchmaker handoff `{ticket_id, match_id, join_token,
//! expires_at}`. The join token is a short-lived capability: it never
//! appears in `Debug` output.

use serde::{Deserialize, Serialize};

use super::{parse_json, write_json};
use crate::body::wire_body;
use crate::error::DecodeError;
use crate::protocol::KIND_MATCHMAKER_MATCHED;

/// A formed match handed to one ticket owner.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchmakerMatched {
    /// The ticket that formed.
    pub ticket_id: String,
    /// Room id allocated for the match (never authorises entry alone).
    pub match_id: u64,
    /// One-time capability to redeem through `matchmaker.accept`.
    pub join_token: String,
    /// Expiry, Unix milliseconds.
    pub expires_at: u64,
}

impl std::fmt::Debug for MatchmakerMatched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatchmakerMatched")
            .field("ticket_id", &self.ticket_id)
            .field("match_id", &self.match_id)
            .field("join_token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl MatchmakerMatched {
    /// Appends the JSON body.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        write_json(self, out);
    }
    /// Decodes the JSON body.
    pub fn decode(body: &[u8]) -> Result<Self, DecodeError> {
        parse_json(body, &[])
    }
}
wire_body!(MatchmakerMatched, KIND_MATCHMAKER_MATCHED);
