//! Loading and validation: both transform-sync spellings, unknown keys,
//! ranges named by their full dotted key, environment overrides.

use super::*;

fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let dir = std::env::temp_dir().join(format!("citadel-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|source| ConfigError::Read {
        path: dir.clone(),
        source,
    })?;
    // One file per call: tests run in parallel in one process.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = dir.join(format!("{n}.toml"));
    std::fs::write(&file, text).map_err(|source| ConfigError::Read {
        path: file.clone(),
        source,
    })?;
    let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
    Config::load(Some(&file), env, &CliOverrides::default()).map(|(c, _)| c)
}

#[test]
fn transform_sync_accepts_both_spellings_but_not_both_at_once() {
    let top = load("[transform_sync]\nsend_rate_hz = 30\n", &[]).unwrap();
    assert_eq!(top.transform_sync.hello.send_rate_hz, 30);
    let nested = load(
        "[transport.transform_sync]\nsend_rate_hz = 31\npredicted_authoritative_archetypes = [3]\n",
        &[],
    )
    .unwrap();
    assert_eq!(nested.transform_sync.hello.send_rate_hz, 31);
    assert_eq!(
        nested.transform_sync.predicted_authoritative_archetypes,
        vec![3]
    );
    let both = load(
        "[transform_sync]\nsim_hz = 30\n[transport.transform_sync]\nsim_hz = 30\n",
        &[],
    )
    .unwrap_err();
    assert!(
        both.to_string().contains("transport.transform_sync"),
        "{both}"
    );
    let bad = load("[transform_sync]\nquat_mode = 11\n", &[]).unwrap_err();
    assert!(
        bad.to_string().contains("transform_sync.quat_mode"),
        "{bad}"
    );
}

#[test]
fn defaults_are_valid() {
    Config::default().validate().unwrap();
    assert_eq!(Config::from_toml_str("").unwrap(), Config::default());
}

#[test]
fn unknown_keys_are_named() {
    let err = load("[transport.websocket]\nbindd = \"x\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("bindd"), "{err}");
    let err = load("[nope]\n", &[]).unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn ranges_are_named() {
    let err = load("[transport.limits]\nmessages_per_second = 0\n", &[])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("transport.limits.messages_per_second"),
        "{err}"
    );
    let err = load("[http]\nbind = \"localhost\"\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("http.bind"), "{err}");
}

#[test]
fn udp_transport_and_tls_keys_are_validated_by_name() {
    let c = load("[transport.webtransport]\nenabled = true\n", &[]).unwrap();
    assert_eq!(
        c.webtransport_addr().unwrap().port(),
        7353,
        "section default"
    );
    assert_eq!(c.quic_addr().unwrap().port(), 7351);
    for (toml, key) in [
        (
            "[transport.quic]\nkeep_alive_interval_ms = 40000\n",
            "transport.quic.keep_alive_interval_ms",
        ),
        (
            "[transport.webtransport]\npath = \"citadel\"\n",
            "transport.webtransport.path",
        ),
        (
            "[transport.quic]\nmax_client_streams = 0\n",
            "transport.quic.max_client_streams",
        ),
        (
            "[http]\ncors_allowed_origins = [\"https://game.example/path\"]\n",
            "http.cors_allowed_origins",
        ),
        (
            "[http]\ncors_allowed_origins = [\"game.example\"]\n",
            "http.cors_allowed_origins",
        ),
        (
            "[transport.quic]\ndatagram_send_buffer_bytes = 1000\n",
            "transport.quic.datagram_send_buffer_bytes",
        ),
        (
            "[transport.quic]\nudp_socket_buffer_bytes = 4096\n",
            "transport.quic.udp_socket_buffer_bytes",
        ),
        (
            "[transport.webtransport]\ndatagram_receive_buffer_bytes = 0\n",
            "transport.webtransport.datagram_receive_buffer_bytes",
        ),
        (
            "[transport.tls]\ncertificate_file = \"c.pem\"\n",
            "transport.tls.private_key_file",
        ),
        (
            "[transport.tls]\ndata_dir = \"\"\n",
            "transport.tls.data_dir",
        ),
    ] {
        let err = load(toml, &[]).unwrap_err().to_string();
        assert!(err.contains(key), "{toml}: {err}");
    }
}

#[test]
fn runtime_keys_are_validated_by_name() {
    let c = load("[runtime]\ntick_hz = 30\nhot_reload = true\n", &[]).unwrap();
    assert_eq!(c.runtime.tick_hz, 30);
    assert_eq!(c.runtime.effective_tick_deadline_ms(), 16);
    for (text, key) in [
        ("[runtime]\ndeadline_ms = 0\n", "runtime.deadline_ms"),
        (
            "[runtime]\ntick_deadline_ms = 0\n",
            "runtime.tick_deadline_ms",
        ),
        (
            "[runtime]\nmemory_limit_mb = 0\n",
            "runtime.memory_limit_mb",
        ),
        ("[runtime]\nqueue_capacity = 0\n", "runtime.queue_capacity"),
        (
            "[runtime]\non_input_budget_ms = 0\n",
            "runtime.on_input_budget_ms",
        ),
        (
            "[runtime]\non_input_budget_ms = 5\non_input_wait_ms = 4\n",
            "runtime.on_input_wait_ms",
        ),
        (
            "[runtime]\nhot_reload_poll_ms = 1\n",
            "runtime.hot_reload_poll_ms",
        ),
        ("[runtime]\nscripts = \"x\"\n", "scripts"),
    ] {
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains(key), "{err}");
    }
    let c = load("", &[("CITADEL_RUNTIME_TICK_HZ", "20")]).unwrap();
    assert_eq!(c.runtime.tick_hz, 20);
}

#[test]
fn connection_limits_have_defaults_and_are_checked() {
    let c = load("", &[]).unwrap();
    assert_eq!(c.http.header_read_timeout_ms, 10_000);
    assert_eq!(c.http.max_header_bytes, 32_768);
    assert_eq!(c.http.body_read_timeout_ms, 10_000);
    assert_eq!(c.http.max_connections_per_ip, 256);
    assert_eq!(c.transport.limits.max_connections_per_ip, 0);
    let c = load(
        "[http]\nmax_connections_per_ip = 0\n[transport.limits]\nmax_connections_per_ip = 8\n",
        &[("CITADEL_HTTP_MAX_CONNECTIONS", "64")],
    )
    .unwrap();
    assert_eq!(c.http.max_connections, 64);
    assert_eq!(c.http.max_connections_per_ip, 0);
    assert_eq!(c.transport.limits.max_connections_per_ip, 8);
    for bad in [
        "[http]\nmax_connections = 0\n",
        "[http]\nheader_read_timeout_ms = 0\n",
        "[http]\nkeep_alive_timeout_ms = 0\n",
        "[http]\nbody_read_timeout_ms = 0\n",
        "[http]\nmax_header_bytes = 8191\n",
        "[http]\nmax_header_bytes = 1048577\n",
    ] {
        let err = load(bad, &[]).unwrap_err().to_string();
        let key = bad.lines().nth(1).unwrap().split(' ').next().unwrap();
        assert!(err.contains(&format!("http.{key}")), "{err}");
    }
}

#[test]
fn env_overrides_file_and_aliases_work() {
    let c = load(
        "[transport.auth]\nallow_guests = true\n",
        &[
            ("CITADEL_TRANSPORT_AUTH_ALLOW_GUESTS", "false"),
            ("CITADEL_NODE_ID", "node-7"),
            ("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS", "12"),
            ("CITADEL_REQUIRE_SERVICES", "1"),
        ],
    )
    .unwrap();
    assert!(!c.transport.auth.allow_guests);
    assert_eq!(c.server.node_id, "node-7");
    assert_eq!(c.transport.limits.max_connections, 12);
    let err = load("", &[("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS", "many")]).unwrap_err();
    assert!(
        err.to_string()
            .contains("CITADEL_TRANSPORT_LIMITS_MAX_CONNECTIONS"),
        "{err}"
    );
}

#[test]
fn transform_sync_keeps_its_flat_keys_and_defaults() {
    // The keys users write (and their environment names) are unchanged by
    // holding the HELLO parameters as one `HelloParams`.
    let table = toml::Value::try_from(TransformSyncConfig::default()).unwrap();
    let mut keys: Vec<&str> = table
        .as_table()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "budget",
            "demo_movers",
            "enabled",
            "fire_origin_tolerance",
            "hit_radius",
            "input_max_dt",
            "input_max_speed",
            "interest_cell_size",
            "interest_enabled",
            "interest_inner",
            "interest_outer",
            "lag_comp_rtt_cutoff_ms",
            "player_slots",
            "position_max",
            "position_min",
            "position_values_per_unit",
            "predicted_authoritative_archetypes",
            "quat_mode",
            "rewind_history_ticks",
            "rewind_max_unlag",
            "send_rate_hz",
            "sim_hz",
            "velocity_max",
            "velocity_min",
            "velocity_values_per_unit",
        ]
    );
    assert_eq!(table["quat_mode"].as_integer(), Some(10));
    assert_eq!(table["sim_hz"].as_integer(), Some(60));
    assert_eq!(table["send_rate_hz"].as_integer(), Some(20));
    let c = load(
        "[transport.transform_sync]\nquat_mode = 15\n",
        &[("CITADEL_TRANSFORM_SYNC_SIM_HZ", "30")],
    )
    .unwrap();
    assert_eq!(c.transform_sync.hello.quat_mode.wire_byte(), 15);
    assert_eq!(c.transform_sync.hello.sim_rate_hz, 30);
    let c = load("", &[("CITADEL_TRANSFORM_SYNC_QUAT_MODE", "9")]).unwrap();
    assert_eq!(c.transform_sync.hello.quat_mode.wire_byte(), 9);
}

#[test]
fn transform_sync_bounds_are_named_by_key() {
    for (text, key) in [
        (
            "[transform_sync]\nposition_values_per_unit = 0\n",
            "transform_sync.position_values_per_unit",
        ),
        (
            "[transform_sync]\ninput_max_speed = 0.0\n",
            "transform_sync.input_max_speed",
        ),
        (
            "[transform_sync]\ninput_max_dt = 5.0\n",
            "transform_sync.input_max_dt",
        ),
        (
            "[transform_sync]\nrewind_history_ticks = 5000\n",
            "transform_sync.rewind_history_ticks",
        ),
        (
            "[transform_sync]\nrewind_max_unlag = 2000\n",
            "transform_sync.rewind_max_unlag",
        ),
        (
            "[transform_sync]\nlag_comp_rtt_cutoff_ms = -1.0\n",
            "transform_sync.lag_comp_rtt_cutoff_ms",
        ),
        (
            "[transform_sync]\nhit_radius = 0.0\n",
            "transform_sync.hit_radius",
        ),
        (
            "[transform_sync]\nfire_origin_tolerance = -1.0\n",
            "transform_sync.fire_origin_tolerance",
        ),
        (
            "[transform_sync]\nvelocity_max = [-40000.0, 0.0, 0.0]\n",
            "transform_sync.velocity_max",
        ),
        (
            "[transform_sync]\nposition_min = [-1e39, 0.0, 0.0]\n",
            "transform_sync.position_min",
        ),
        ("[transform_sync]\nsim_hz = 0\n", "transform_sync.sim_hz"),
        (
            "[transport.transform_sync]\nquat_mode = 0\n",
            "transform_sync.quat_mode",
        ),
        (
            "[transform_sync]\ninterest_enabled = true\ninterest_cell_size = 0.0\n",
            "transform_sync.interest_*",
        ),
    ] {
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}

#[test]
fn lane_keys_stay_flat_in_every_transport_section() {
    let c = load(
        "[transport.websocket]\noutbound_queue_capacity = 7\nmax_coalesced_bytes = 2048\n\
         [transport.quic]\nunreliable_queue_capacity = 9\n\
         [transport.webtransport]\noutbound_queue_max_bytes = 4096\n",
        &[("CITADEL_TRANSPORT_QUIC_MAX_COALESCED_BYTES", "8192")],
    )
    .unwrap();
    let ws = &c.transport.websocket.lanes;
    assert_eq!(
        (ws.outbound_queue_capacity, ws.max_coalesced_bytes),
        (7, 2048)
    );
    assert_eq!(
        ws.unreliable_queue_capacity, 256,
        "unset keys keep defaults"
    );
    let quic = &c.transport.quic.lanes;
    assert_eq!(
        (quic.unreliable_queue_capacity, quic.max_coalesced_bytes),
        (9, 8192)
    );
    assert_eq!(
        c.transport.webtransport.lanes.outbound_queue_max_bytes,
        4096
    );
    for (text, needle) in [
        (
            "[transport.quic]\noutbound_queue_capacityy = 1\n",
            "outbound_queue_capacityy",
        ),
        (
            "[transport.websocket]\nmax_coalesced = 1\n",
            "max_coalesced",
        ),
        (
            "[transport.webtransport]\nmax_coalesced_bytes = 10\n",
            "transport.webtransport.max_coalesced_bytes",
        ),
        (
            "[transport.websocket]\nunreliable_queue_capacity = 0\n",
            "transport.websocket.unreliable_queue_capacity",
        ),
        (
            "[transport.quic]\noutbound_queue_max_bytes = 1\n",
            "transport.quic.outbound_queue_max_bytes",
        ),
    ] {
        let err = load(text, &[]).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn network_peer_keys_defaults_env_and_bounds() {
    let d = Config::default().transport.network_peer;
    assert!(!d.enabled, "off by default");
    assert!(!d.shared_quantized_state);
    assert_eq!(
        (d.interest_cell_size, d.interest_inner, d.interest_outer),
        (100.0, 100.0, 125.0)
    );
    assert_eq!(
        (d.pending_cap, d.collection_cap, d.ack_timeout_ms),
        (64, 4_096, 1_000)
    );
    assert_eq!(d.bootstrap_per_tick, 256);
    assert_eq!((d.max_bunches_per_sec, d.max_bytes_per_sec), (240, 262_144));
    assert_eq!((d.max_bunch_bytes, d.max_fields_per_bunch), (65_536, 1_024));
    assert_eq!((d.veto_budget_ms, d.veto_max_in_flight), (5, 16));
    assert_eq!(d.lane_reserve, 64);
    let c = load(
        "[transport.network_peer]\nenabled = true\nack_timeout_ms = 250\n",
        &[("CITADEL_TRANSPORT_NETWORK_PEER_MAX_BUNCHES_PER_SEC", "12")],
    )
    .unwrap();
    let np = &c.transport.network_peer;
    assert!(np.enabled);
    assert_eq!(np.ack_timeout_ms, 250);
    assert_eq!(np.authority().limits.bunches_per_sec, 12);
    for (text, key) in [
        (
            "ack_timeout_ms = 0",
            "transport.network_peer.ack_timeout_ms",
        ),
        ("pending_cap = 0", "transport.network_peer.pending_cap"),
        (
            "bootstrap_per_tick = 0",
            "transport.network_peer.bootstrap_per_tick",
        ),
        (
            "bootstrap_per_tick = 65537",
            "transport.network_peer.bootstrap_per_tick",
        ),
        (
            "lane_reserve = 65537",
            "transport.network_peer.lane_reserve",
        ),
        (
            "max_bunch_bytes = 0",
            "transport.network_peer.max_bunch_bytes",
        ),
        ("tick_hz = 0", "transport.network_peer.tick_hz"),
        (
            "veto_budget_ms = 0",
            "transport.network_peer.veto_budget_ms",
        ),
        (
            "veto_max_in_flight = 0",
            "transport.network_peer.veto_max_in_flight",
        ),
        (
            "interest_cell_size = -1.0",
            "transport.network_peer.interest_cell_size",
        ),
    ] {
        let err = load(&format!("[transport.network_peer]\n{text}\n"), &[])
            .and_then(|c| c.validate().map(|_| c))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
    assert!(load("[transport.network_peer]\nbogus = 1\n", &[]).is_err());
}

#[test]
fn flush_delay_has_a_default_and_a_named_bound() {
    assert_eq!(
        load("", &[]).unwrap().transport.websocket.flush_delay_us,
        1_000
    );
    for ok in [0, 50_000] {
        let c = load(
            &format!("[transport.websocket]\nflush_delay_us = {ok}\n"),
            &[],
        )
        .unwrap();
        assert_eq!(c.transport.websocket.flush_delay_us, ok);
    }
    let c = load(
        "",
        &[("CITADEL_TRANSPORT_WEBSOCKET_FLUSH_DELAY_US", "40000")],
    )
    .unwrap();
    assert_eq!(c.transport.websocket.flush_delay_us, 40_000);
    let err = load("[transport.websocket]\nflush_delay_us = 50001\n", &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("transport.websocket.flush_delay_us"), "{err}");
    assert!(err.contains("50000"), "{err}");
}
