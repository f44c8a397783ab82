//! Helpers of the chat tests: nodes with the `ccall` script (Lua
//! `citadel.chat_call` as the caller), players, event readers and the
//! exact key-set assertions.

use citadel_client::wire::protocol::KIND_CHAT_EVENT;
use citadel_server::RunningNode;
use citadel_server::config::{Config, RateRule};
use citadel_server::services::chat::ChatLimits;
use serde_json::{Value, json};

use crate::common::*;

/// `ccall` takes `operation|payload` and runs `citadel.chat_call` as the
/// caller's account.
const SCRIPT: &str = r#"
citadel.on_rpc("ccall", function(ctx, body)
    local op, payload = body:match("^([^|]*)|(.*)$")
    local reply, err = citadel.chat_call(ctx.user_id, op, payload)
    if reply == nil then return "error:" .. err end
    return reply
end)
"#;

/// Every key of a Message object, sorted.
pub const MESSAGE_KEYS: [&str; 8] = [
    "content",
    "created_at_unix_ms",
    "deleted",
    "id",
    "last_event_id",
    "revision",
    "sender",
    "updated_at_unix_ms",
];

/// The room target.
#[allow(non_snake_case)]
pub fn ROOM() -> Value {
    json!({"kind": "room"})
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Every `[chat.limits]` rule, for tests that set them all.
pub fn every_rule(l: &mut ChatLimits) -> [&mut RateRule; 11] {
    [
        &mut l.join,
        &mut l.history,
        &mut l.send_user,
        &mut l.send_user_channel,
        &mut l.send_channel,
        &mut l.typing_user,
        &mut l.typing_user_channel,
        &mut l.mutation_user,
        &mut l.mutation_user_channel,
        &mut l.moderation_operator,
        &mut l.moderation_channel,
    ]
}

/// Every `[chat.limits]` rule opened wide, and a fast re-authorisation
/// sweep (tests of everything but the limits themselves).
pub fn roomy(config: &mut Config) {
    let wide = RateRule {
        limit: 1_000_000,
        window_ms: 60_000,
    };
    for rule in every_rule(&mut config.chat.limits) {
        *rule = wide.clone();
    }
    config.chat.reauthorize_interval_ms = 100;
}

pub async fn start_on(url: &str, tweak: impl FnOnce(&mut Config)) -> RunningNode {
    start_scripted(url, "chat", SCRIPT, tweak).await
}

/// The sorted keys of a JSON object.
pub fn keys(v: &Value) -> Vec<String> {
    let mut k: Vec<String> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect();
    k.sort_unstable();
    k
}

pub fn assert_keys(v: &Value, expected: &[&str]) {
    let mut want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    want.sort_unstable();
    assert_eq!(keys(v), want, "{v}");
}

/// An event's keys: the common three plus its own.
pub fn assert_event_keys(v: &Value, extra: &[&str]) {
    let mut all = vec!["version", "type", "channel_id"];
    all.extend_from_slice(extra);
    assert_keys(v, &all);
    assert_eq!(v["version"], 1);
    if let Some(m) = v.get("message") {
        assert_keys(m, &MESSAGE_KEYS);
    }
}

impl Player {
    /// `chat.join` of the room: its channel id.
    pub async fn join_room(&mut self) -> String {
        self.rpc("chat.join", json!({"target": ROOM()}))
            .await
            .unwrap()["channel_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// `chat.edit` of message `id` in channel `ch`.
    pub async fn edit(&mut self, ch: &str, id: u64, content: &str) -> Result<Value, String> {
        self.rpc(
            "chat.edit",
            json!({"channel_id": ch, "message_id": id, "content": content}),
        )
        .await
    }

    /// `chat.delete` of message `id` in channel `ch`.
    pub async fn delete(&mut self, ch: &str, id: u64) -> Result<Value, String> {
        self.rpc("chat.delete", json!({"channel_id": ch, "message_id": id}))
            .await
    }

    pub async fn rpc(&mut self, method: &str, payload: Value) -> Result<Value, String> {
        call_json(&mut self.client, method, payload).await
    }

    /// `citadel.chat_call(self, op, payload)` through the script.
    pub async fn script(&mut self, op: &str, payload: Value) -> Result<Value, String> {
        script_call(&mut self.client, "ccall", op, &payload).await
    }

    /// The next chat event, as JSON.
    pub async fn next_event(&mut self) -> Value {
        let env = recv_kind(&mut self.client, KIND_CHAT_EVENT).await;
        serde_json::from_slice(&env.body).expect("chat events are JSON")
    }

    /// The next chat event, which must be of `kind`.
    pub async fn event(&mut self, kind: &str) -> Value {
        let e = self.next_event().await;
        assert_eq!(e["type"], kind, "{e}");
        e
    }

    /// Skips chat events until one of `kind`.
    pub async fn until(&mut self, kind: &str) -> Value {
        loop {
            let e = self.next_event().await;
            if e["type"] == kind {
                return e;
            }
        }
    }

    /// Consumes `n` chat events.
    pub async fn drain_chat(&mut self, n: usize) {
        for _ in 0..n {
            self.next_event().await;
        }
    }
}

/// Drops the shared rate-limit table behind the nodes' backs.
pub async fn break_rate_limits(url: &str) {
    use sqlx::Connection;
    if citadel_server::store::is_postgres_url(url) {
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query("DROP TABLE chat_rate_windows")
            .execute(&mut conn)
            .await
            .unwrap();
    } else {
        let path = url.strip_prefix("sqlite://").unwrap_or(url);
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite:{path}"))
            .await
            .unwrap();
        sqlx::query("DROP TABLE chat_rate_windows")
            .execute(&mut conn)
            .await
            .unwrap();
    }
}

/// A WebSocket session whose socket receive buffer is a few KiB, so a
/// client that stops reading stalls the server's writer quickly (instead
/// of the kernel absorbing megabytes).
pub async fn small_buffer_login(node: &RunningNode, token: &str) -> TestClient {
    let url = node.ws_url().expect("ws");
    let addr: std::net::SocketAddr = url
        .trim_start_matches("ws://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4_096).unwrap();
    let stream = socket.connect(addr).await.unwrap();
    let ws = citadel_client::WsClient::connect_over(stream, &url)
        .await
        .unwrap();
    let mut client = TestClient::Ws(ws);
    client.authenticate(Some(token)).await.unwrap();
    client
}
