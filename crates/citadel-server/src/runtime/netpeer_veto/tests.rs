//! The handler's return value as a verdict, on a VM attached to a real
//! driver: true / nil / false, `{ veto = { names } }` as positions in the
//! request (class fields the proposal does not change are ignored), and
//! every malformed shape as an error (the driver vetoes it all).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use citadel_wire::netpeer::FieldValue;

use super::verdict_of;
use crate::config::NetworkPeerConfig;
use crate::metrics::Metrics;
use crate::netpeer::{NetPeerNode, Verdict, VetoRequest};
use crate::realm::Places;
use crate::router::LocalRouter;
use crate::runtime::vm::{Limits, Vm};

/// A VM whose handler returns what `reply` (a Lua expression over `p`)
/// evaluates to, attached to a driver that knows the Ship class.
fn vm(reply: &str) -> Vm {
    let source = format!(
        r#"
citadel.netpeer_register_class{{
  class_id = 5,
  fields = {{
    {{ name = "hp", type = "int", min = 0, max = 100 }},
    {{ name = "ammo", type = "int", min = 0, max = 100, client_owned = true }},
    {{ name = "fuel", type = "int", min = 0, max = 100, client_owned = true }},
  }},
}}
citadel.netpeer_on_proposal(function(ctx, p) return {reply} end)
"#
    );
    let limits = Limits {
        deadline: Duration::from_millis(100),
        tick_deadline: Duration::from_millis(20),
        memory_bytes: 16 * 1024 * 1024,
        scripts_dir: PathBuf::from("."),
    };
    let vm = match Vm::load_source(&limits, source.as_bytes(), "=veto") {
        Ok(vm) => vm,
        Err(e) => panic!("script loads: {e}"),
    };
    let config = NetworkPeerConfig {
        enabled: true,
        ..NetworkPeerConfig::default()
    };
    let router = Arc::new(LocalRouter::new(Arc::new(Places::default())));
    match NetPeerNode::new(&config, Arc::new(Metrics::default()), router) {
        Ok(node) => vm.install_netpeer(Arc::new(node)),
        Err(e) => panic!("config: {e}"),
    }
    vm
}

/// The verdict on a proposal of ammo then fuel.
fn judge(reply: &str) -> Verdict {
    let request = VetoRequest {
        participant_id: 1,
        user_id: None,
        object_id: 1,
        class_id: 5,
        fields: vec![
            ("ammo".to_owned(), FieldValue::Int(3)),
            ("fuel".to_owned(), FieldValue::Int(4)),
        ],
        deadline: Instant::now() + Duration::from_secs(5),
    };
    match vm(reply).netpeer_veto(&request) {
        Some(out) => verdict_of(out.result),
        None => panic!("the deadline passed before the call"),
    }
}

#[test]
fn booleans_and_nil_allow_or_veto_everything() {
    assert_eq!(judge("nil"), Verdict::Allow);
    assert_eq!(judge("true"), Verdict::Allow);
    assert_eq!(judge("false"), Verdict::Veto);
    assert_eq!(judge("p.fuel > 3"), Verdict::Allow);
}

#[test]
fn a_veto_list_names_the_refused_fields() {
    assert_eq!(judge(r#"{ veto = { "fuel" } }"#), Verdict::Refuse(vec![1]));
    assert_eq!(
        judge(r#"{ veto = { "fuel", "ammo", "fuel" } }"#),
        Verdict::Refuse(vec![1, 0, 1])
    );
    // Empty, or only class fields the proposal does not change: allowed.
    assert_eq!(judge("{ veto = {} }"), Verdict::Allow);
    assert_eq!(judge(r#"{ veto = { "hp" } }"#), Verdict::Allow);
    assert_eq!(
        judge(r#"{ veto = { "hp", "ammo" } }"#),
        Verdict::Refuse(vec![0])
    );
}

#[test]
fn a_malformed_reply_is_an_error() {
    for reply in [
        // A name the class does not have (even next to good ones).
        r#"{ veto = { "nope" } }"#,
        r#"{ veto = { "ammo", "helth" } }"#,
        // Not a list of strings.
        r#"{ veto = "ammo" }"#,
        r#"{ veto = { 1 } }"#,
        r#"{ veto = { ammo = true } }"#,
        r#"{ veto = { "ammo", nil, "fuel" } }"#,
        r#"{ veto = { "ammo", extra = "fuel" } }"#,
        // A table of something else.
        r#"{ "ammo" }"#,
        "{}",
        r#"{ veto = { "ammo" }, also = 1 }"#,
        r#"{ Veto = { "ammo" } }"#,
        // Read raw: a metatable does not make a reply.
        r#"setmetatable({}, { __index = { veto = { "ammo" } } })"#,
        // Other types.
        "42",
        r#""ammo""#,
        "function() end",
    ] {
        assert_eq!(judge(reply), Verdict::Error, "{reply}");
    }
    // A list longer than any class can be.
    let long = format!("{{ veto = {{ {} }} }}", vec![r#""ammo""#; 4_097].join(", "));
    assert_eq!(judge(&long), Verdict::Error);
}
