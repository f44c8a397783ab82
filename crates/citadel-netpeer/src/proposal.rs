//! The client → server trust boundary (§6.3): one inbound kind-13 body runs
//! the pipeline cheapest checks first, and any failure is the same silent
//! drop, counted by its typed [`Rejection`] reason.
//!
//! Order: size, bunch and byte buckets (charged even if rejected later),
//! object and match, schema selection (strict: current; compatible: the
//! version a full bunch names, or the connection's binding), header and mask
//! (≤ the per-bunch field cap), ownership (owner, guest on a persistent
//! object, every field ClientOwned and not a collection), binding and
//! `result_id` order, the field bucket, value decoding and bounds, cooldown;
//! then the veto hook, the apply, a correction full bunch for a vetoed owner
//! and the rebroadcast to relevant peers within the proposer's byte budget.
//!
//! Two phases for a verdict that comes later (a script on another thread):
//! [`Authority::validate_proposal`] runs steps 1-7 and returns a
//! [`Pending`] without applying; [`Authority::commit_proposal`] re-checks it
//! against the current state (a change in between is [`Rejection::Stale`])
//! and applies what the verdict allows. [`Authority::handle_proposal`] is
//! both with a synchronous [`VetoHook`] in between, minus the re-check
//! (nothing can change in between).
//!
//! What it is not: a reply path. Nothing here answers the client.

use std::panic::{AssertUnwindSafe, catch_unwind};

use citadel_wire::DecodeError;
use citadel_wire::bits::BitReader;
use citadel_wire::netpeer::{DeltaBunch, FieldValue};
use citadel_wire::schema::SCHEMA_HASH_BYTES;
use citadel_wire::varint::read_varint;

use crate::class::Authority as FieldAuthority;
use crate::server::{Authority, Cause, ConnId, SendParts, send_pair};
use crate::value::Value;

/// Why a proposal was dropped (one counter each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rejection {
    /// The sender is not a connected receiver.
    UnknownConnection = 0,
    /// Body above the per-bunch byte cap.
    Oversize,
    /// Bunch bucket empty.
    RateBunches,
    /// Byte bucket empty.
    RateBytes,
    /// Body does not parse.
    Malformed,
    /// No such object.
    UnknownObject,
    /// Object in another match.
    CrossMatch,
    /// Full bunch names an unaccepted or mismatching schema identity.
    Schema,
    /// More changed fields than the per-bunch cap.
    TooManyFields,
    /// The sender is not the recorded owner.
    NotOwner,
    /// A guest proposing on a persistent object.
    GuestPersistent,
    /// A masked field is ServerOnly or a collection.
    NotClientOwned,
    /// A delta with no full-bunch binding at this layout version.
    NoBinding,
    /// `result_id` not above the highest applied one.
    StaleResultId,
    /// Field bucket empty.
    RateFields,
    /// A value outside the field's bounds.
    OutOfBounds,
    /// A field proposed again within its cooldown.
    Cooldown,
    /// The object, its owner, its match or the binding changed between
    /// [`Authority::validate_proposal`] and [`Authority::commit_proposal`]
    /// (a proposal that waited for an asynchronous veto verdict).
    Stale,
}

impl Rejection {
    /// Every reason, in counter order.
    pub const ALL: [Rejection; 18] = [
        Rejection::UnknownConnection,
        Rejection::Oversize,
        Rejection::RateBunches,
        Rejection::RateBytes,
        Rejection::Malformed,
        Rejection::UnknownObject,
        Rejection::CrossMatch,
        Rejection::Schema,
        Rejection::TooManyFields,
        Rejection::NotOwner,
        Rejection::GuestPersistent,
        Rejection::NotClientOwned,
        Rejection::NoBinding,
        Rejection::StaleResultId,
        Rejection::RateFields,
        Rejection::OutOfBounds,
        Rejection::Cooldown,
        Rejection::Stale,
    ];

    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::UnknownConnection => "unknown_connection",
            Rejection::Oversize => "oversize",
            Rejection::RateBunches => "rate_bunches",
            Rejection::RateBytes => "rate_bytes",
            Rejection::Malformed => "malformed",
            Rejection::UnknownObject => "unknown_object",
            Rejection::CrossMatch => "cross_match",
            Rejection::Schema => "schema",
            Rejection::TooManyFields => "too_many_fields",
            Rejection::NotOwner => "not_owner",
            Rejection::GuestPersistent => "guest_persistent",
            Rejection::NotClientOwned => "not_client_owned",
            Rejection::NoBinding => "no_binding",
            Rejection::StaleResultId => "stale_result_id",
            Rejection::RateFields => "rate_fields",
            Rejection::OutOfBounds => "out_of_bounds",
            Rejection::Cooldown => "cooldown",
            Rejection::Stale => "stale",
        }
    }
}

/// What the veto hook sees.
#[derive(Debug)]
pub struct Proposal<'a> {
    /// Proposer.
    pub conn: ConnId,
    /// Object.
    pub object_id: u32,
    /// Its class.
    pub class_id: u32,
    /// Decoded, bounds-checked values.
    pub fields: &'a [(u16, FieldValue)],
}

/// A proposal that passed steps 1-7 and waits for its veto verdict: what
/// [`Authority::validate_proposal`] returns and
/// [`Authority::commit_proposal`] consumes. Only the core builds one, so
/// a driver cannot forge a proposal past the checks.
#[derive(Debug, PartialEq)]
pub struct Pending {
    conn: ConnId,
    object_id: u32,
    class_id: u32,
    match_id: u32,
    owner_epoch: u32,
    version: usize,
    full: bool,
    result_id: u64,
    /// In mask order: the ids are the changed mask.
    values: Vec<(u16, FieldValue)>,
}

impl Pending {
    /// What the veto hook sees.
    pub fn proposal(&self) -> Proposal<'_> {
        Proposal {
            conn: self.conn,
            object_id: self.object_id,
            class_id: self.class_id,
            fields: &self.values,
        }
    }

    /// Every proposed field id (the verdict that vetoes everything).
    pub fn field_ids(&self) -> Vec<u16> {
        self.values.iter().map(|(f, _)| *f).collect()
    }

    /// Runs a synchronous hook: the field ids it vetoes (all of them when
    /// it panics).
    pub fn judge(&self, hook: &mut dyn VetoHook) -> Vec<u16> {
        match catch_unwind(AssertUnwindSafe(|| hook.veto(&self.proposal()))) {
            Ok(v) => v,
            Err(_) => self.field_ids(),
        }
    }
}

/// Trusted code's optional veto: returns the field ids it refuses. A hook
/// that panics vetoes everything.
pub trait VetoHook {
    /// Field ids to refuse.
    fn veto(&mut self, proposal: &Proposal<'_>) -> Vec<u16>;
}

/// The hook that accepts everything.
pub struct NoVeto;

impl VetoHook for NoVeto {
    fn veto(&mut self, _: &Proposal<'_>) -> Vec<u16> {
        Vec::new()
    }
}

/// An applied proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Fields written.
    pub applied: Vec<u16>,
    /// Fields the hook vetoed (the owner got a correction).
    pub vetoed: Vec<u16>,
    /// Peers the change was rebroadcast to now.
    pub rebroadcast: usize,
}

struct Header {
    full: Option<u32>,
    hash: [u8; SCHEMA_HASH_BYTES],
    result_id: u64,
}

fn read_header(body: &[u8]) -> Result<Header, DecodeError> {
    let mut r = BitReader::new(body);
    r.read_u32()?;
    let is_full = r.read_bool()?;
    let result_id = read_varint(&mut r)?;
    if is_full {
        let hash = r.read_array::<SCHEMA_HASH_BYTES>()?;
        let version = r.read_u32()?;
        Ok(Header {
            full: Some(version),
            hash,
            result_id,
        })
    } else {
        Ok(Header {
            full: None,
            hash: [0; SCHEMA_HASH_BYTES],
            result_id,
        })
    }
}

/// Reads the changed mask of a body whose header is `schema`-shaped.
fn read_mask(body: &[u8], full: bool, field_count: usize) -> Result<Vec<u16>, DecodeError> {
    let mut r = BitReader::new(body);
    r.read_u32()?;
    r.read_bool()?;
    read_varint(&mut r)?;
    if full {
        r.read_array::<SCHEMA_HASH_BYTES>()?;
        r.read_u32()?;
    } else {
        read_varint(&mut r)?;
    }
    if field_count > r.remaining_bits() {
        return Err(DecodeError::Truncated);
    }
    let mut set = Vec::new();
    for i in 0..field_count {
        if r.read_bool()? {
            set.push(i as u16);
        }
    }
    Ok(set)
}

/// Step 6: a delta needs a binding at this version; `result_id` must be
/// above the highest applied one.
fn check_binding(
    full: bool,
    binding: Option<&crate::server::Binding>,
    version: usize,
    result_id: u64,
) -> Result<(), Rejection> {
    match (full, binding) {
        (false, None) => Err(Rejection::NoBinding),
        (false, Some(b)) if b.version != version => Err(Rejection::NoBinding),
        (_, Some(b)) if result_id <= b.last_result => Err(Rejection::StaleResultId),
        _ => Ok(()),
    }
}

/// Step 7's cooldown: no proposed field within its cooldown.
fn check_cooldowns(
    pending: &Pending,
    class: &crate::class::Class,
    conn: &crate::server::Conn,
    default_ms: u64,
    now_ms: u64,
) -> Result<(), Rejection> {
    for (f, _) in &pending.values {
        let cooldown = class.fields()[usize::from(*f)]
            .cooldown_ms
            .unwrap_or(default_ms);
        if cooldown > 0
            && conn
                .cooldowns
                .get(&(pending.object_id, *f))
                .is_some_and(|&at| now_ms < at.saturating_add(cooldown))
        {
            return Err(Rejection::Cooldown);
        }
    }
    Ok(())
}

impl Authority {
    /// Runs one inbound kind-13 body through the pipeline. `Err` is a
    /// silent drop (counted); nothing is sent to the proposer except a
    /// correction when the hook vetoed fields. The same as
    /// [`Authority::validate_proposal`], the hook, then
    /// [`Authority::commit_proposal`] without its re-check (nothing can
    /// change in between).
    pub fn handle_proposal(
        &mut self,
        conn: ConnId,
        body: &[u8],
        now_ms: u64,
        hook: &mut dyn VetoHook,
    ) -> Result<Applied, Rejection> {
        let pending = self.validate_proposal(conn, body, now_ms)?;
        let vetoed = pending.judge(hook);
        // Nothing can change between the validation and the apply here
        // (the hook has no access to the authority): no re-check.
        let r = self.apply(pending, &vetoed, now_ms);
        self.count_commit(&r);
        r
    }

    /// Steps 1-7 of the pipeline without applying anything: the buckets
    /// are charged, nothing else changes. `Ok` is what the veto hook
    /// judges; hand it to [`Authority::commit_proposal`] with the verdict.
    pub fn validate_proposal(
        &mut self,
        conn: ConnId,
        body: &[u8],
        now_ms: u64,
    ) -> Result<Pending, Rejection> {
        let r = self.validate(conn, body, now_ms);
        if let Err(why) = &r {
            self.counters.rejected[*why as usize] += 1;
        }
        r
    }

    /// Steps 8-9 for a validated proposal: re-checks it against the
    /// current state (object, match, class, owner and owner epoch, the
    /// binding and `result_id` order, cooldowns; a change since
    /// [`Authority::validate_proposal`] is [`Rejection::Stale`]), then
    /// applies every field not in `vetoed`, sends the owner a correction
    /// when a proposed field was vetoed, and rebroadcasts.
    pub fn commit_proposal(
        &mut self,
        pending: Pending,
        vetoed: &[u16],
        now_ms: u64,
    ) -> Result<Applied, Rejection> {
        let r = self
            .recheck(&pending, now_ms)
            .and_then(|()| self.apply(pending, vetoed, now_ms));
        self.count_commit(&r);
        r
    }

    fn count_commit(&mut self, r: &Result<Applied, Rejection>) {
        match r {
            Ok(_) => self.counters.proposals_applied += 1,
            Err(why) => self.counters.rejected[*why as usize] += 1,
        }
    }

    fn validate(
        &mut self,
        conn_id: ConnId,
        body: &[u8],
        now_ms: u64,
    ) -> Result<Pending, Rejection> {
        let limits = self.config.limits;
        // 1. size, then the buckets.
        let conn = self
            .conns
            .get_mut(&conn_id)
            .ok_or(Rejection::UnknownConnection)?;
        if body.len() > limits.max_bunch_bytes as usize {
            return Err(Rejection::Oversize);
        }
        if !conn.buckets.bunches.take(1, now_ms) {
            return Err(Rejection::RateBunches);
        }
        if !conn.buckets.bytes.take(body.len() as u64, now_ms) {
            return Err(Rejection::RateBytes);
        }
        // 2. object and match.
        let object_id = citadel_wire::netpeer::peek_object_id(body).ok_or(Rejection::Malformed)?;
        let obj = self
            .objects
            .get(&object_id)
            .ok_or(Rejection::UnknownObject)?;
        if obj.match_id != conn.match_id {
            return Err(Rejection::CrossMatch);
        }
        let class = self
            .classes
            .get(&obj.class)
            .ok_or(Rejection::UnknownObject)?;
        // 3. schema selection.
        let header = read_header(body).map_err(|_| Rejection::Malformed)?;
        let binding = conn
            .bindings
            .get(&object_id)
            .filter(|b| b.owner_epoch == obj.owner_epoch);
        let version = match header.full {
            Some(v) => {
                let idx = class.version_index(v).ok_or(Rejection::Schema)?;
                if class.versions()[idx].schema.schema_hash() != &header.hash {
                    return Err(Rejection::Schema);
                }
                idx
            }
            None if class.versions().len() == 1 => 0,
            None => binding.ok_or(Rejection::NoBinding)?.version,
        };
        let schema = &class.versions()[version].schema;
        // 4. header and mask.
        let set = read_mask(body, header.full.is_some(), schema.fields().len())
            .map_err(|_| Rejection::Malformed)?;
        if set.len() > limits.max_fields_per_bunch as usize {
            return Err(Rejection::TooManyFields);
        }
        // 5. ownership and field authority.
        if obj.owner != Some(conn_id) {
            return Err(Rejection::NotOwner);
        }
        if conn.guest && obj.persistent {
            return Err(Rejection::GuestPersistent);
        }
        for &f in &set {
            let spec = &class.fields()[usize::from(f)];
            if spec.authority != FieldAuthority::ClientOwned || spec.is_collection() {
                return Err(Rejection::NotClientOwned);
            }
        }
        // 6. binding and result_id order.
        check_binding(header.full.is_some(), binding, version, header.result_id)?;
        // 7. field bucket, values and bounds, cooldown.
        if !conn.buckets.fields.take(set.len() as u64, now_ms) {
            return Err(Rejection::RateFields);
        }
        let bunch = DeltaBunch::decode(body, schema).map_err(|e| match e {
            DecodeError::InvalidValue(_) | DecodeError::CountTooLarge { .. } => {
                Rejection::OutOfBounds
            }
            _ => Rejection::Malformed,
        })?;
        for (_, v) in &bunch.values {
            if let FieldValue::Scalar(x) = v
                && !x.is_finite()
            {
                return Err(Rejection::OutOfBounds);
            }
        }
        let pending = Pending {
            conn: conn_id,
            object_id,
            class_id: obj.class,
            match_id: obj.match_id,
            owner_epoch: obj.owner_epoch,
            version,
            full: header.full.is_some(),
            result_id: header.result_id,
            values: bunch.values,
        };
        check_cooldowns(&pending, class, conn, limits.cooldown_ms, now_ms)?;
        Ok(pending)
    }

    /// Step 8 on the asynchronous path: re-checks what may have changed
    /// since the validation (a change is [`Rejection::Stale`]; a cooldown
    /// that started meanwhile is [`Rejection::Cooldown`]).
    fn recheck(&self, pending: &Pending, now_ms: u64) -> Result<(), Rejection> {
        let object_id = pending.object_id;
        let conn_id = pending.conn;
        let conn = self.conns.get(&conn_id).ok_or(Rejection::Stale)?;
        let obj = self.objects.get(&object_id).ok_or(Rejection::Stale)?;
        let class = self.classes.get(&obj.class).ok_or(Rejection::Stale)?;
        if obj.class != pending.class_id
            || obj.match_id != pending.match_id
            || conn.match_id != pending.match_id
            || obj.owner != Some(conn_id)
            || obj.owner_epoch != pending.owner_epoch
        {
            return Err(Rejection::Stale);
        }
        let binding = conn
            .bindings
            .get(&object_id)
            .filter(|b| b.owner_epoch == obj.owner_epoch);
        check_binding(pending.full, binding, pending.version, pending.result_id)
            .map_err(|_| Rejection::Stale)?;
        check_cooldowns(pending, class, conn, self.config.limits.cooldown_ms, now_ms)
    }

    /// Steps 8-9 for a proposal known to be current (validated just now,
    /// or re-checked): the apply, the correction and the rebroadcast.
    fn apply(
        &mut self,
        pending: Pending,
        vetoed: &[u16],
        now_ms: u64,
    ) -> Result<Applied, Rejection> {
        let default_cooldown = self.config.limits.cooldown_ms;
        let object_id = pending.object_id;
        let conn_id = pending.conn;
        // Present: validated or re-checked with no change in between.
        let conn = self.conns.get_mut(&conn_id).ok_or(Rejection::Stale)?;
        let class = self
            .classes
            .get(&pending.class_id)
            .ok_or(Rejection::Stale)?;
        let Pending {
            version,
            result_id,
            owner_epoch,
            values,
            ..
        } = pending;
        let vetoed: Vec<u16> = values
            .iter()
            .map(|(f, _)| *f)
            .filter(|f| vetoed.contains(f))
            .collect();
        conn.bindings.insert(
            object_id,
            crate::server::Binding {
                version,
                last_result: result_id,
                owner_epoch,
            },
        );
        if let Some(mut pair) = conn.pairs.get_mut(object_id) {
            // A client speaking another accepted version re-baselines in it.
            pair.rebind_version(version);
        }
        let mut applied = Vec::new();
        let mut writes = Vec::new();
        for (f, v) in values {
            if vetoed.contains(&f) {
                continue;
            }
            let cooldown = class.fields()[usize::from(f)]
                .cooldown_ms
                .unwrap_or(default_cooldown);
            if cooldown > 0 {
                conn.cooldowns.insert((object_id, f), now_ms);
            }
            applied.push(f);
            writes.push((f, v));
        }
        for (f, v) in writes {
            // The field index was checked against the class above.
            let _ = self.put(object_id, f, Value::Plain(v));
        }
        if !vetoed.is_empty() {
            self.send_now(object_id, conn_id, now_ms, Cause::Correction);
        }
        // 9. rebroadcast within the proposer's byte budget.
        let rebroadcast = if applied.is_empty() {
            0
        } else {
            self.rebroadcast(object_id, conn_id, now_ms)
        };
        Ok(Applied {
            applied,
            vetoed,
            rebroadcast,
        })
    }

    /// Sends one pair now (correction or rebroadcast); returns its length.
    fn send_now(&mut self, object_id: u32, conn_id: ConnId, now_ms: u64, cause: Cause) -> usize {
        let SendParts {
            classes,
            objects,
            conns,
            mut ctx,
        } = self.send_parts();
        let (Some(obj), Some(conn)) = (objects.get_mut(&object_id), conns.get_mut(&conn_id)) else {
            return 0;
        };
        let (Some(class), Some(pair)) = (classes.get(&obj.class), conn.pairs.get_mut(object_id))
        else {
            return 0;
        };
        send_pair(
            &mut ctx,
            class,
            obj,
            object_id,
            conn_id,
            (pair, &mut conn.fulls_left),
            now_ms,
            cause,
        )
    }

    fn rebroadcast(&mut self, object_id: u32, proposer: ConnId, now_ms: u64) -> usize {
        let Some((match_id, rev)) = self
            .objects
            .get(&object_id)
            .map(|o| (o.match_id, o.cur.rev))
        else {
            return 0;
        };
        let peers: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(id, c)| {
                **id != proposer
                    && c.match_id == match_id
                    && c.pairs
                        .hot(object_id)
                        .is_some_and(|p| p.last_sent_rev() < rev)
            })
            .map(|(id, _)| *id)
            .collect();
        let Some(mut budget) = self.conns.get(&proposer).map(|c| c.buckets.bytes) else {
            return 0;
        };
        let mut sent = 0;
        for peer in peers {
            let len = self.send_now(object_id, peer, now_ms, Cause::Normal);
            if len == 0 {
                continue;
            }
            sent += 1;
            if !budget.take(len as u64, now_ms) {
                self.counters.rebroadcast_budget_stops += 1;
                break;
            }
        }
        if let Some(c) = self.conns.get_mut(&proposer) {
            c.buckets.bytes = budget;
        }
        sent
    }
}
