//! The Lua runtime over real WebSocket connections: every hook and host
//! function, isolation of runaway handlers, hot reload, the default game.
//! Each test writes its script into its own temp dir and points
//! `runtime.scripts_dir` at it.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use citadel_client::wire::Envelope;
use citadel_client::{AuthOutcome, ClientError, WsClient};
use citadel_server::config::Config;
use citadel_server::gateway::handshake::{SessionIdentity, SessionValidator};
use citadel_server::metrics::RuntimeEvent;
use citadel_server::util::BoxFuture;
use citadel_server::{NodeBuilder, RunningNode};
use common::*;

/// RPC over either client type used in these tests.
trait RpcCaller {
    async fn call(&mut self, method: &str, payload: &[u8]) -> Result<bytes::Bytes, ClientError>;
}

impl RpcCaller for WsClient {
    async fn call(&mut self, method: &str, payload: &[u8]) -> Result<bytes::Bytes, ClientError> {
        self.call_rpc(method, payload).await
    }
}

impl RpcCaller for TestClient {
    async fn call(&mut self, method: &str, payload: &[u8]) -> Result<bytes::Bytes, ClientError> {
        self.call_rpc(method, payload).await
    }
}

static NEXT_DIR: AtomicU64 = AtomicU64::new(0);

fn script_dir(main_lua: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "citadel-lua-{}-{}",
        std::process::id(),
        NEXT_DIR.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("main.lua"), main_lua).expect("write main.lua");
    dir
}

fn lua_config(dir: &Path) -> Config {
    let mut config = test_config();
    config.runtime.scripts_dir = dir.display().to_string();
    config
}

async fn start_lua(main_lua: &str) -> RunningNode {
    let dir = script_dir(main_lua);
    NodeBuilder::new(lua_config(&dir))
        .start()
        .await
        .expect("node starts")
}

async fn rpc(client: &mut impl RpcCaller, method: &str, payload: &[u8]) -> Result<String, String> {
    match tokio::time::timeout(STEP, client.call(method, payload))
        .await
        .expect("rpc answered in time")
    {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(ClientError::Rpc { message, .. }) => Err(message),
        Err(other) => panic!("rpc transport error: {other}"),
    }
}

async fn my_id(client: &mut impl RpcCaller) -> u64 {
    rpc(client, "whoami", b"")
        .await
        .expect("whoami")
        .split(':')
        .next()
        .and_then(|s| s.parse().ok())
        .expect("numeric id")
}

const WHOAMI: &str = r#"
citadel.on_rpc("whoami", function(ctx, body)
    return ctx.sender .. ":" .. (ctx.user_id or "") .. ":" .. ctx.method
end)
"#;

#[tokio::test]
async fn rpc_replies_go_to_the_caller_only_with_the_spec_ctx() {
    let node = start_lua(&format!(
        "{WHOAMI}\ncitadel.on_rpc('ping', function() return 'pong' end)"
    ))
    .await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    assert_eq!(rpc(&mut a, "ping", b"").await, Ok("pong".into()));
    let who = rpc(&mut a, "whoami", b"").await.unwrap();
    let id: u64 = who.split(':').next().unwrap().parse().unwrap();
    assert!(id > 0);
    assert_eq!(who, format!("{id}::whoami"), "guests have no user_id");
    assert_eq!(
        rpc(&mut a, "nope", b"").await,
        Err("unknown RPC method".into())
    );
    assert_silent(&mut b, Duration::from_millis(200)).await;
}

#[tokio::test]
async fn on_message_owns_its_kind_and_broadcast_send_reach_the_right_peers() {
    let node = start_lua(&format!(
        r#"{WHOAMI}
citadel.on_message(100, function(ctx, body)
    citadel.broadcast(101, ctx.sender .. "|" .. ctx.kind .. "|" .. tostring(ctx.room_id) .. "|" .. body)
    citadel.send(ctx.sender, 102, "ack", true)
end)"#
    ))
    .await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    let mut outsider = guest(&node, Transport::Ws).await;
    let a_id = my_id(&mut a).await;
    let room = join(&mut a, "r").await.room_id;
    join(&mut b, "r").await;

    a.send(&Envelope::new(100, b"hi".to_vec())).await.unwrap();
    let got = recv_kind(&mut b, 101).await;
    assert_eq!(
        String::from_utf8_lossy(&got.body),
        format!("{a_id}|100|{room}|hi")
    );
    let ack = recv_kind(&mut a, 102).await;
    assert_eq!(&ack.body[..], b"ack");

    // A kind without a handler is still relayed (sender-tagged) to room peers.
    a.send(&Envelope::new(150, b"relayed".to_vec()))
        .await
        .unwrap();
    let relayed = recv_kind(&mut b, 150).await;
    assert_eq!(split(&relayed), (a_id, b"relayed".to_vec()));
    // Nothing leaks to the default dimension; kind 100 itself is never relayed.
    assert_silent(&mut outsider, Duration::from_millis(200)).await;
    assert_silent(&mut b, Duration::from_millis(200)).await;

    // Outside a room: broadcast goes to the default dimension, ctx.room_id is nil.
    let o_id = my_id(&mut outsider).await;
    let mut lobby_peer = guest(&node, Transport::Ws).await;
    outsider
        .send(&Envelope::new(100, b"x".to_vec()))
        .await
        .unwrap();
    let got = recv_kind(&mut lobby_peer, 101).await;
    assert_eq!(
        String::from_utf8_lossy(&got.body),
        format!("{o_id}|100|nil|x")
    );
}

struct TestAccounts;

impl SessionValidator for TestAccounts {
    fn validate(&self, token: &str) -> BoxFuture<Option<SessionIdentity>> {
        let user = token.strip_prefix("token-").map(str::to_owned);
        Box::pin(async move {
            user.map(|user_id| SessionIdentity {
                user_id,
                session_id: "s".into(),
            })
        })
    }
}

#[tokio::test]
async fn join_and_leave_hooks_see_sender_and_user_id() {
    let dir = script_dir(
        r#"
local events = {}
citadel.on_join(function(ctx) events[#events + 1] = "join:" .. ctx.sender .. ":" .. (ctx.user_id or "guest") end)
citadel.on_leave(function(ctx) events[#events + 1] = "leave:" .. ctx.sender .. ":" .. (ctx.user_id or "guest") end)
citadel.on_rpc("events", function() return table.concat(events, ",") end)
citadel.on_rpc("whoami", function(ctx) return tostring(ctx.sender) end)
"#,
    );
    let mut config = lua_config(&dir);
    // The test double's sessions are not in the store: keep the revocation
    // poller from closing them during the test.
    config.transport.auth.revocation_poll_ms = 60_000;
    let node = NodeBuilder::new(config)
        .session_validator(Arc::new(TestAccounts))
        .start()
        .await
        .unwrap();
    let url = node.ws_url().unwrap();
    let (mut alice, outcome) = WsClient::connect_with_token(&url, "token-alice")
        .await
        .unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Authenticated {
            user_id: "alice".into()
        }
    );
    let alice_id = rpc(&mut alice, "whoami", b"").await.unwrap();
    let mut observer = guest(&node, Transport::Ws).await;
    let observer_id = rpc(&mut observer, "whoami", b"").await.unwrap();
    alice.close().await.unwrap();
    drop(alice);
    let want = format!("join:{alice_id}:alice,join:{observer_id}:guest,leave:{alice_id}:alice");
    let deadline = Instant::now() + STEP;
    loop {
        let events = rpc(&mut observer, "events", b"").await.unwrap();
        if events == want {
            break;
        }
        assert!(Instant::now() < deadline, "events: {events}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn on_tick_runs_at_tick_hz_server_wide_then_per_room() {
    let dir = script_dir(
        r#"
local server, rooms, announced = 0, {}, {}
citadel.on_tick(function(dt, room_id)
    if room_id == nil then
        server = server + 1
    else
        rooms[room_id] = (rooms[room_id] or 0) + 1
        if not announced[room_id] then
            announced[room_id] = true
            citadel.broadcast(120, tostring(room_id))
        end
    end
end)
citadel.on_rpc("ticks", function(ctx, body)
    return server .. ":" .. (rooms[tonumber(body)] or 0)
end)
"#,
    );
    let mut config = lua_config(&dir);
    config.runtime.tick_hz = 20;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let mut a = guest(&node, Transport::Ws).await;
    let room = join(&mut a, "ticking").await.room_id;
    let announce = recv_kind(&mut a, 120).await;
    assert_eq!(String::from_utf8_lossy(&announce.body), room.to_string());

    let counts = |s: String| -> (u64, u64) {
        let (x, y) = s.split_once(':').unwrap();
        (x.parse().unwrap(), y.parse().unwrap())
    };
    let started = Instant::now();
    let (s0, r0) = counts(
        rpc(&mut a, "ticks", room.to_string().as_bytes())
            .await
            .unwrap(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s1, r1) = counts(
        rpc(&mut a, "ticks", room.to_string().as_bytes())
            .await
            .unwrap(),
    );
    let secs = started.elapsed().as_secs_f64();
    let rate = (s1 - s0) as f64 / secs;
    assert!((rate - 20.0).abs() <= 2.0, "server ticks/s = {rate}");
    let room_rate = (r1 - r0) as f64 / secs;
    assert!(
        (room_rate - 20.0).abs() <= 2.0,
        "room ticks/s = {room_rate}"
    );
}

#[tokio::test]
async fn room_hooks_decide_map_mode_capacity_open_and_admission() {
    let node = start_lua(
        r#"
local banned = {}
citadel.on_rpc("ban_me", function(ctx) banned[ctx.sender] = true; return "ok" end)
citadel.on_room_create(function(ctx, name)
    if name == "arena" then return { map = "Arena", mode = "ffa", max_players = 2 } end
    if name == "short" then return "Forest" end
    if name == "closed" then return { map = "Vault", open = false } end
    if name == "meta" then return { map = ctx.method, mode = tostring(ctx.sender) } end
    if name == "fail" then error("no label for you") end
    if name == "slow" then while true do end end
    return nil
end)
citadel.on_room_join(function(ctx, room_id)
    assert(ctx.method == "room.join")
    return not banned[ctx.sender]
end)
"#,
    )
    .await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    let mut c = guest(&node, Transport::Ws).await;
    let mut d = guest(&node, Transport::Ws).await;
    let mut e = guest(&node, Transport::Ws).await;

    let arena = join(&mut a, "arena").await;
    assert_eq!((arena.map.as_str(), arena.mode.as_str()), ("Arena", "ffa"));
    assert_eq!(join(&mut b, "arena").await.room_id, arena.room_id);
    c.join_or_create_room("arena").await.unwrap();
    assert_silent(&mut c, Duration::from_millis(300)).await; // max_players = 2

    let short = join(&mut d, "short").await;
    assert_eq!((short.map.as_str(), short.mode.as_str()), ("Forest", ""));
    assert_eq!(join(&mut c, "short").await.room_id, short.room_id);
    assert_eq!(rpc(&mut e, "ban_me", b"").await, Ok("ok".into()));
    e.join_or_create_room("short").await.unwrap();
    assert_silent(&mut e, Duration::from_millis(300)).await; // admission refused
    e.join_room(short.room_id).await.unwrap();
    assert_silent(&mut e, Duration::from_millis(300)).await; // by id too

    let closed = join(&mut d, "closed").await;
    assert_eq!(closed.map, "Vault");
    c.join_or_create_room("closed").await.unwrap();
    assert_silent(&mut c, Duration::from_millis(300)).await; // open = false

    let d_id = {
        let meta = join(&mut d, "meta").await;
        assert_eq!(meta.map, "room.create");
        meta.mode
    };
    assert!(d_id.parse::<u64>().unwrap() > 0);
    // A failing or timed-out on_room_create falls back to the default label.
    let fail = join(&mut d, "fail").await;
    assert_eq!((fail.map.as_str(), fail.mode.as_str()), ("fail", ""));
    let slow = join(&mut d, "slow").await;
    assert_eq!(slow.map, "slow");
    // nil → default label.
    assert_eq!(join(&mut d, "plain").await.map, "plain");
    let m = &node.shared().metrics;
    assert!(m.runtime_events(RuntimeEvent::Errors) >= 1);
    assert!(m.runtime_events(RuntimeEvent::Timeouts) >= 1);
}

#[tokio::test]
async fn a_failing_room_join_hook_rejects() {
    let node = start_lua("citadel.on_room_join(function() error('x') end)").await;
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    let room = join(&mut a, "lobby").await;
    assert_eq!(room.map, "lobby", "no on_room_create: params are the map");
    b.join_or_create_room("lobby").await.unwrap();
    assert_silent(&mut b, Duration::from_millis(300)).await;
}

#[tokio::test]
async fn runaway_handlers_fail_alone_while_other_clients_keep_flowing() {
    let dir = script_dir(
        r#"
citadel.on_rpc("ping", function() return "pong" end)
citadel.on_rpc("spin", function() while true do end end)
citadel.on_rpc("hog", function()
    local t = {}
    for i = 1, 1e9 do t[i] = string.rep("m", 1024 * 1024) .. i end
end)
citadel.on_rpc("raise", function()
    citadel.broadcast(130, "must be discarded")
    error("secret detail in main.lua")
end)
"#,
    );
    let mut config = lua_config(&dir);
    config.runtime.memory_limit_mb = 32;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let mut bad = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    let mut c = guest(&node, Transport::Ws).await;

    // The well-behaved clients keep pinging and relaying meanwhile.
    let flowing = tokio::spawn(async move {
        let mut rounds = 0u32;
        let until = Instant::now() + Duration::from_millis(1_500);
        while Instant::now() < until {
            assert_eq!(rpc(&mut b, "ping", b"").await, Ok("pong".into()));
            b.send(&Envelope::new(150, rounds.to_be_bytes().to_vec()))
                .await
                .unwrap();
            let got = recv_kind(&mut c, 150).await;
            assert_eq!(&split(&got).1[..], &rounds.to_be_bytes()[..]);
            rounds += 1;
            // Two messages a round: pace well under the default per-connection
            // rate limit (200/s, burst 400), which would drop relays.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        rounds
    });

    for (method, want) in [
        ("spin", "RPC handler timed out"),
        ("hog", "RPC handler error"),
        ("raise", "RPC handler error"),
        ("spin", "RPC handler timed out"),
    ] {
        let started = Instant::now();
        assert_eq!(
            rpc(&mut bad, method, b"").await,
            Err(want.into()),
            "{method}"
        );
        // deadline_ms = 100; generous slack for debug builds on two shared
        // cores (an unbounded handler would never answer).
        assert!(
            started.elapsed() < Duration::from_millis(2_500),
            "{method} took {:?}",
            started.elapsed()
        );
    }
    let rounds = flowing.await.expect("flowing task");
    assert!(rounds > 5, "only {rounds} rounds flowed");
    assert_eq!(rpc(&mut bad, "ping", b"").await, Ok("pong".into()));
    let m = &node.shared().metrics;
    assert_eq!(m.runtime_events(RuntimeEvent::Timeouts), 2);
    assert_eq!(m.runtime_events(RuntimeEvent::OutOfMemory), 1);
    assert_eq!(m.runtime_events(RuntimeEvent::Errors), 1);
    // The raised handler's broadcast was discarded.
    let (code, metrics) = http_get(&node, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("citadel_runtime_events_total{event=\"out_of_memory\"} 1"));
}

#[tokio::test]
async fn a_full_queue_fails_fast_and_is_counted() {
    let dir = script_dir(
        r#"
citadel.on_rpc("spin", function() while true do end end)
citadel.on_rpc("ping", function() return "pong" end)
"#,
    );
    let mut config = lua_config(&dir);
    config.runtime.queue_capacity = 1;
    config.runtime.deadline_ms = 400;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let url = node.ws_url().unwrap();
    let mut spinners = Vec::new();
    for _ in 0..3 {
        let url = url.clone();
        spinners.push(tokio::spawn(async move {
            let (mut c, _) = WsClient::connect_as_guest(&url).await.unwrap();
            rpc(&mut c, "spin", b"").await
        }));
    }
    let mut results = Vec::new();
    for s in spinners {
        results.push(s.await.unwrap());
    }
    assert!(
        results.contains(&Err("RPC handler error".into())),
        "{results:?}"
    );
    assert!(
        node.shared()
            .metrics
            .runtime_events(RuntimeEvent::QueueFull)
            >= 1
    );
    let mut after = guest(&node, Transport::Ws).await;
    assert_eq!(rpc(&mut after, "ping", b"").await, Ok("pong".into()));
}

async fn wait_for_reply(client: &mut impl RpcCaller, method: &str, want: &str) {
    let deadline = Instant::now() + STEP;
    loop {
        let got = rpc(client, method, b"").await;
        if got.as_deref() == Ok(want) {
            return;
        }
        assert!(Instant::now() < deadline, "still {got:?}, want {want}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn hot_reload_swaps_valid_edits_and_keeps_the_old_vm_on_broken_ones() {
    let dir = script_dir("citadel.on_rpc('version', function() return 'v1' end)");
    let mut config = lua_config(&dir);
    config.runtime.hot_reload = true;
    config.runtime.hot_reload_poll_ms = 50;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let mut a = guest(&node, Transport::Ws).await;
    assert_eq!(rpc(&mut a, "version", b"").await, Ok("v1".into()));

    let main = dir.join("main.lua");
    std::fs::write(
        &main,
        "-- edited\ncitadel.on_rpc('version', function() return 'v2' end)\ncitadel.on_rpc('added', function() return 'new' end)",
    )
    .unwrap();
    wait_for_reply(&mut a, "version", "v2").await;
    assert_eq!(rpc(&mut a, "added", b"").await, Ok("new".into()));

    let m = node.shared().metrics.clone();
    for (i, broken) in [
        "this is not lua at all",
        "error('fails at load')",
        "local registers_nothing = true",
        "while true do end",
    ]
    .into_iter()
    .enumerate()
    {
        std::fs::write(&main, broken).unwrap();
        let deadline = Instant::now() + STEP;
        if broken.starts_with("while") {
            // The replacement builds off the VM thread: calls keep flowing.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let started = Instant::now();
            assert_eq!(rpc(&mut a, "version", b"").await, Ok("v2".into()));
            assert!(started.elapsed() < Duration::from_millis(500));
        }
        while m.runtime_events(RuntimeEvent::ReloadFailures) < i as u64 + 1 {
            assert!(
                Instant::now() < deadline,
                "reload of {broken:?} not attempted"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            rpc(&mut a, "version", b"").await,
            Ok("v2".into()),
            "{broken}"
        );
    }
    assert_eq!(m.runtime_events(RuntimeEvent::Reloads), 1);

    // A later valid edit is picked up again.
    std::fs::write(
        &main,
        "citadel.on_rpc('version', function() return 'v3' end)",
    )
    .unwrap();
    wait_for_reply(&mut a, "version", "v3").await;
    assert_eq!(
        rpc(&mut a, "added", b"").await,
        Err("unknown RPC method".into())
    );
}

#[tokio::test]
async fn a_broken_main_lua_stops_startup_and_disabled_runtime_relays() {
    let dir = script_dir("this is not lua");
    let err = NodeBuilder::new(lua_config(&dir))
        .start()
        .await
        .err()
        .expect("startup refused");
    assert!(err.to_string().contains("main.lua"), "{err}");

    let dir = script_dir("citadel.on_message(150, function() end)");
    let mut config = lua_config(&dir);
    config.runtime.enabled = false;
    let node = NodeBuilder::new(config).start().await.unwrap();
    assert!(node.shared().runtime.is_none());
    let mut a = guest(&node, Transport::Ws).await;
    let mut b = guest(&node, Transport::Ws).await;
    a.send(&Envelope::new(150, b"relay".to_vec()))
        .await
        .unwrap();
    assert_eq!(&split(&recv_kind(&mut b, 150).await).1[..], b"relay");
}

#[tokio::test]
async fn the_default_game_answers_ping_and_echo() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../game");
    let node = NodeBuilder::new(lua_config(&dir)).start().await.unwrap();
    let mut a = guest(&node, Transport::Ws).await;
    assert_eq!(rpc(&mut a, "ping", b"").await, Ok("pong".into()));
    let payload = [7u8; 32];
    let echoed = a.call_rpc("echo", &payload).await.unwrap();
    assert_eq!(&echoed[..], &payload[..]);
}

#[tokio::test]
async fn log_and_actor_functions_work_from_a_live_call() {
    let node = start_lua(
        r#"
citadel.on_rpc("spawn", function(ctx, body)
    citadel.log("spawning for " .. ctx.sender)
    citadel.log({}, "WARN")
    citadel.log(42, "no-such-level")
    local id = citadel.spawn_actor{ archetype = 2, x = 1, y = 2, z = 3 }
    citadel.move_actor(id, 4, 5, 6, 1, 0, 0)
    citadel.despawn_actor(id)
    return tostring(id)
end)
citadel.on_rpc("bad_spawn", function() citadel.spawn_actor{ archetype = 70000 } return "x" end)
"#,
    )
    .await;
    let mut a = guest(&node, Transport::Ws).await;
    assert_eq!(rpc(&mut a, "spawn", b"").await, Ok("1073741824".into()));
    assert_eq!(rpc(&mut a, "spawn", b"").await, Ok("1073741825".into()));
    assert_eq!(
        rpc(&mut a, "bad_spawn", b"").await,
        Err("RPC handler error".into())
    );
    let m = &node.shared().metrics;
    assert_eq!(m.runtime_events(RuntimeEvent::ActorCommands), 6);
}

#[tokio::test]
async fn script_actors_reach_transform_sync_clients() {
    use citadel_client::wire::actor::NaSpawn;
    use citadel_client::wire::protocol::{KIND_NA_DESPAWN, KIND_NA_SPAWN, KIND_TSYNC_HELLO};
    let dir = script_dir(
        r#"
local last
citadel.on_rpc("spawn", function()
    last = citadel.spawn_actor{ archetype = 5, x = 1, y = 2, z = 3 }
    citadel.move_actor(last, 4, 5, 6, 1, 0, 0)
    return tostring(last)
end)
citadel.on_rpc("gone", function() citadel.despawn_actor(last) return "ok" end)
"#,
    );
    let mut config = lua_config(&dir);
    config.transform_sync.enabled = true;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let mut observer = guest(&node, Transport::Ws).await;
    observer
        .send(&citadel_client::actors::hello())
        .await
        .unwrap();
    recv_kind(&mut observer, KIND_TSYNC_HELLO).await;
    let mut scripter = guest(&node, Transport::Ws).await;
    assert_eq!(
        rpc(&mut scripter, "spawn", b"").await,
        Ok("1073741824".into())
    );
    let spawn = NaSpawn::decode(&recv_kind(&mut observer, KIND_NA_SPAWN).await.body).unwrap();
    assert_eq!((spawn.archetype_id, spawn.owner), (5, 0));
    assert_eq!(rpc(&mut scripter, "gone", b"").await, Ok("ok".into()));
    let gone = recv_kind(&mut observer, KIND_NA_DESPAWN).await;
    assert_eq!(&gone.body[..4], &spawn.object_id.to_be_bytes()[..]);
}

/// Seed 004's patrolling-NPC example, copied verbatim into a test game: the
/// NPC spawned from the server-wide tick is global, and two clients in two
/// different rooms both see it walk its loop. A `room = …` NPC stays in
/// its room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_patrol_example_is_seen_moving_by_clients_in_two_rooms() {
    use citadel_client::actors::{self, ActorView};
    let dir = script_dir(
        r#"
local npcs, spawned = {}, false

citadel.on_tick(function(dt)
    if not spawned then
        spawned = true
        local wps = { {0,0,302}, {500,0,302}, {500,500,302}, {0,500,302} }
        local s = wps[1]
        local id = citadel.spawn_actor{ archetype = 0, x = s[1], y = s[2], z = s[3] }
        npcs[id] = { pos = { s[1], s[2], s[3] }, wps = wps, idx = 2, speed = 250 }
    end
    for id, n in pairs(npcs) do
        local wp = n.wps[n.idx]
        local dx, dy, dz = wp[1] - n.pos[1], wp[2] - n.pos[2], wp[3] - n.pos[3]
        local dist = math.sqrt(dx * dx + dy * dy + dz * dz)
        if dist < 15 then
            n.idx = (n.idx % #n.wps) + 1                 -- next waypoint (loop)
        else
            local step = math.min(n.speed * dt, dist)
            local ux, uy, uz = dx / dist, dy / dist, dz / dist
            n.pos[1], n.pos[2], n.pos[3] =
                n.pos[1] + ux * step, n.pos[2] + uy * step, n.pos[3] + uz * step
            citadel.move_actor(id, n.pos[1], n.pos[2], n.pos[3],
                ux * n.speed, uy * n.speed, uz * n.speed) -- position + velocity
        end
    end
end)

citadel.on_rpc("room_npc", function(ctx, body)
    return tostring(citadel.spawn_actor{ archetype = 9, x = 1, y = 1, z = 1, room = tonumber(body) })
end)
"#,
    );
    let mut config = lua_config(&dir);
    config.runtime.tick_hz = 30;
    let node = NodeBuilder::new(config).start().await.unwrap();
    let mut clients = Vec::new();
    for room in ["north", "south"] {
        let mut c = WsClient::connect_as_guest(&node.ws_url().unwrap())
            .await
            .unwrap()
            .0;
        c.join_or_create_room(room).await.unwrap();
        let joined = c.wait_for_room_joined().await.unwrap();
        c.send(&actors::hello()).await.unwrap();
        clients.push((c, ActorView::new(), joined.room_id));
    }
    // Each client must see the global NPC spawn and then move along x.
    let north_room = clients[0].2;
    let deadline = Instant::now() + STEP;
    let mut seen = [false, false];
    while seen != [true, true] {
        assert!(
            Instant::now() < deadline,
            "NPC not seen moving in both rooms"
        );
        for (i, (client, view, _)) in clients.iter_mut().enumerate() {
            while let Ok(Ok(Some(env))) =
                tokio::time::timeout(Duration::from_millis(20), client.recv()).await
            {
                view.handle_envelope(&env);
                if let Some(ack) = view.poll_ack() {
                    client.send(&ack).await.unwrap();
                }
            }
            let moving = view
                .actors()
                .find(|a| a.owner == 0 && a.archetype_id == 0)
                .and_then(|npc| {
                    view.latest()
                        .and_then(|s| s.get(&npc.object_id))
                        .map(|v| v.position[0] > 100.0)
                });
            seen[i] = moving == Some(true);
        }
    }
    // A room-bound NPC reaches only that room.
    let id = rpc(
        &mut clients[0].0,
        "room_npc",
        north_room.to_string().as_bytes(),
    )
    .await
    .unwrap();
    assert!(id.parse::<u32>().is_ok());
    for _ in 0..20 {
        for (client, view, _) in clients.iter_mut() {
            while let Ok(Ok(Some(env))) =
                tokio::time::timeout(Duration::from_millis(10), client.recv()).await
            {
                view.handle_envelope(&env);
            }
        }
    }
    assert!(
        clients[0].1.actors().any(|a| a.archetype_id == 9),
        "north sees its room NPC"
    );
    assert!(
        !clients[1].1.actors().any(|a| a.archetype_id == 9),
        "south does not"
    );
}

#[tokio::test]
async fn scripts_hand_ownership_mark_targets_and_query_the_rewound_world() {
    use citadel_client::wire::actor::NaSpawn;
    use citadel_client::wire::protocol::{KIND_NA_SPAWN, KIND_TSYNC_HELLO, KIND_TSYNC_ROLE};
    use citadel_client::wire::tsync::{Role, RoleChange, RoleEvent};
    let node = start_lua(&format!(
        "{WHOAMI}{}",
        r#"
local npc
citadel.on_rpc("npc", function()
    npc = citadel.spawn_actor{ archetype = 5, x = 0, y = 500, z = 0 }
    citadel.set_hit_eligible(npc, true)
    return tostring(npc)
end)
citadel.on_rpc("give", function(ctx) citadel.set_owner(npc, ctx.sender) return "ok" end)
citadel.on_rpc("back", function() citadel.set_owner(npc, 0) return "ok" end)
citadel.on_rpc("query", function(ctx, body)
    local dy = tonumber(body)
    local r = citadel.rewind_query(ctx.sender, {0, 0, 0}, {x = 0, y = dy, z = 0})
    if r == nil then return "none" end
    if not r.hit then return "miss" end
    return r.object_id .. ":" .. math.floor(r.y + 0.5)
end)
citadel.on_rpc("bad", function() citadel.set_owner(0, 1) return "x" end)
"#
    ))
    .await;
    let mut a = guest(&node, Transport::Ws).await;
    let me = my_id(&mut a).await;
    assert_eq!(
        rpc(&mut a, "query", b"1").await,
        Ok("none".into()),
        "not opted in"
    );
    a.send(&Envelope::new(KIND_TSYNC_HELLO, Vec::new()))
        .await
        .unwrap();
    recv_kind(&mut a, KIND_TSYNC_HELLO).await;
    let script_id = rpc(&mut a, "npc", b"").await.unwrap();
    let spawn = NaSpawn::decode(&recv_kind(&mut a, KIND_NA_SPAWN).await.body).unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Hit at the near side of the 50 cm sphere around (0, 500, 0), named by
    // the script's own id; the other way misses.
    assert_eq!(
        rpc(&mut a, "query", b"1").await,
        Ok(format!("{script_id}:450"))
    );
    assert_eq!(rpc(&mut a, "query", b"-1").await, Ok("miss".into()));
    // Ownership to the caller, then back to the server.
    assert_eq!(rpc(&mut a, "give", b"").await, Ok("ok".into()));
    let role = RoleChange::decode(&recv_kind(&mut a, KIND_TSYNC_ROLE).await.body).unwrap();
    assert_eq!(
        (
            role.object_id,
            role.owner,
            role.role,
            role.event,
            role.ownership_epoch
        ),
        (
            spawn.object_id,
            me,
            Role::OwnerPredicted,
            RoleEvent::Handoff,
            1
        )
    );
    assert_eq!(node.shared().hub.owner_of(spawn.object_id), Some(me));
    assert_eq!(rpc(&mut a, "back", b"").await, Ok("ok".into()));
    let role = RoleChange::decode(&recv_kind(&mut a, KIND_TSYNC_ROLE).await.body).unwrap();
    assert_eq!((role.owner, role.ownership_epoch), (0, 2));
    assert_eq!(
        rpc(&mut a, "bad", b"").await,
        Err("RPC handler error".into())
    );
}
