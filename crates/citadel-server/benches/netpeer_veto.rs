//! The cost of the Lua NetworkPeer veto hook over real sockets: C WebSocket
//! clients, each alone in its own match with one object it owns, send N
//! proposals (one int field each) back to back; the run ends when the node
//! has accounted for all of them (applied, rejected or dropped). With
//! `CITADEL_NPV_LUA=1` the script registers `netpeer_on_proposal` (a
//! trivial check that allows), so every proposal is validated, judged on
//! the VM thread and committed; with `0` the same script has no handler
//! and proposals take the synchronous path. Prints proposals per second and
//! the veto outcomes.
//!
//! Run: `cargo bench -p citadel-server --bench netpeer_veto`
//! (`CITADEL_NPV_LUA` (1), `CITADEL_NPV_CLIENTS` (8), `CITADEL_NPV_PROPOSALS`
//! (5000 per client)). Build first and run the binary under
//! `flock -o /tmp/citadel-cargo.lock` so no build competes with it. The
//! node and the clients share this process. Rate limits and the veto
//! budget (1 s) and in-flight bound (4096) are raised so the figure is the
//! path's throughput, not a limit tripping.

use std::sync::Arc;
use std::time::{Duration, Instant};

use citadel_client::WsClient;
use citadel_client::netpeer::NetworkPeerSession;
use citadel_netpeer::{Class, ClassSpec, FieldSpec, Rejection};
use citadel_server::config::Config;
use citadel_server::netpeer::VetoOutcome;
use citadel_server::{NodeBuilder, RunningNode};
use citadel_wire::Envelope;
use citadel_wire::netpeer::{FieldCodec, FieldValue};
use citadel_wire::protocol::KIND_REP_DELTA;

const AMMO_MAX: i64 = 1_000_000;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn script(lua_veto: bool) -> String {
    format!(
        r#"
VETO = {lua_veto}
citadel.netpeer_register_class{{
  class_id = 1,
  fields = {{ {{ name = "ammo", type = "int", min = 0, max = {AMMO_MAX}, client_owned = true }} }},
}}
citadel.on_rpc("spawn", function(ctx, body)
  citadel.netpeer_move_connection(ctx.sender, ctx.sender)
  return tostring(citadel.netpeer_spawn(1, {{ match = ctx.sender, owner = ctx.sender }}))
end)
if VETO then
  citadel.netpeer_on_proposal(function(ctx, p) return p.ammo ~= nil and p.ammo >= 0 end)
end
"#
    )
}

fn session() -> anyhow::Result<NetworkPeerSession> {
    let spec = ClassSpec {
        class_id: 1,
        layout_version: 1,
        fields: vec![
            FieldSpec::new(
                "ammo",
                FieldCodec::IntRange {
                    min: 0,
                    max: AMMO_MAX,
                },
            )
            .client_owned(),
        ],
        evolution: Default::default(),
        position_field: None,
    };
    let class = Class::compile(spec).map_err(|e| anyhow::anyhow!("class: {e}"))?;
    let mut s = NetworkPeerSession::default();
    s.register(class.current().clone());
    Ok(s)
}

/// Connects, spawns its object, waits for the full bunch; returns the
/// client, its session and the object id.
async fn ready(url: &str) -> anyhow::Result<(WsClient, NetworkPeerSession, u32)> {
    let (mut client, _) = WsClient::connect_as_guest(url).await?;
    let id: u32 = String::from_utf8_lossy(&client.call_rpc("spawn", b"").await?).parse()?;
    let mut s = session()?;
    while s.state(id).is_none() {
        let env = client
            .recv()
            .await?
            .ok_or_else(|| anyhow::anyhow!("closed"))?;
        if env.kind == KIND_REP_DELTA {
            let _ = s.handle_bunch(&env.body);
        }
    }
    Ok((client, s, id))
}

fn accounted(node: &RunningNode) -> u64 {
    let np = &node.shared().metrics.netpeer;
    np.event("proposals_applied")
        + Rejection::ALL.iter().map(|r| np.rejected(*r)).sum::<u64>()
        + np.veto(VetoOutcome::InFlightFull)
}

fn main() -> anyhow::Result<()> {
    let lua_veto = env("CITADEL_NPV_LUA", 1) == 1;
    let clients = env("CITADEL_NPV_CLIENTS", 8);
    let proposals = env("CITADEL_NPV_PROPOSALS", 5_000);
    let dir = std::env::temp_dir().join(format!("citadel-npv-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("main.lua"), script(lua_veto))?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut config = Config::default();
        config.database.url = format!("sqlite://{}", dir.join("db.sqlite").display());
        config.http.bind = "127.0.0.1:0".into();
        config.transport.websocket.bind = "127.0.0.1:0".into();
        config.transport.limits.messages_per_second = 10_000_000;
        config.transport.limits.message_burst = 10_000_000;
        config.runtime.scripts_dir = dir.display().to_string();
        let np = &mut config.transport.network_peer;
        np.enabled = true;
        np.max_bunches_per_sec = 10_000_000;
        np.max_bytes_per_sec = 1_000_000_000;
        np.max_fields_per_sec = 10_000_000;
        np.veto_budget_ms = 1_000;
        np.veto_max_in_flight = 4_096;
        let node = NodeBuilder::new(config).start().await?;
        let url = node
            .ws_url()
            .ok_or_else(|| anyhow::anyhow!("no websocket"))?;
        let mut ready_clients = Vec::new();
        for _ in 0..clients {
            ready_clients.push(ready(&url).await?);
        }
        let start_count = accounted(&node);
        let barrier = Arc::new(tokio::sync::Barrier::new(ready_clients.len() + 1));
        let mut tasks = Vec::new();
        for (mut client, mut s, id) in ready_clients {
            let barrier = barrier.clone();
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                for i in 0..proposals {
                    let v = i64::try_from(i % 1_000_000).unwrap_or(0);
                    let body = s.propose(id, &[(0, FieldValue::Int(v))])?;
                    client.send(&Envelope::new(KIND_REP_DELTA, body)).await?;
                }
                anyhow::Ok(client)
            }));
        }
        barrier.wait().await;
        let started = Instant::now();
        let total = clients * proposals;
        let deadline = started + Duration::from_secs(120);
        while accounted(&node) - start_count < total && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let elapsed = started.elapsed().as_secs_f64();
        let mut kept = Vec::new();
        for t in tasks {
            kept.push(t.await??);
        }
        let m = &node.shared().metrics.netpeer;
        let done = accounted(&node) - start_count;
        println!(
            "netpeer veto: lua_handler={lua_veto} clients={clients} proposals/client={proposals}"
        );
        println!(
            "  accounted {done}/{total} in {elapsed:.3} s: {:.0} proposals/s; applied {}",
            done as f64 / elapsed,
            m.event("proposals_applied")
        );
        let outcomes: Vec<String> = VetoOutcome::ALL
            .iter()
            .map(|o| format!("{}={}", o.as_str(), m.veto(*o)))
            .collect();
        println!("  veto outcomes: {}", outcomes.join(" "));
        let rejected: Vec<String> = Rejection::ALL
            .iter()
            .filter(|r| m.rejected(**r) > 0)
            .map(|r| format!("{}={}", r.as_str(), m.rejected(*r)))
            .collect();
        println!("  rejections: {}", rejected.join(" "));
        drop(kept);
        node.shutdown();
        node.wait().await;
        let _ = std::fs::remove_dir_all(&dir);
        anyhow::Ok(())
    })
}
