//! Accounts, sessions and the durable store over real HTTP and realtime
//! connections, on SQLite and PostgreSQL: every status code of the route
//! table, token rotation, logout, admission limits, realtime validation,
//! revocation closing live connections, restart survival. Each named case
//! (`each_backend::*`) gets a fresh node per backend.

mod common;

use std::time::Duration;

use citadel_client::{AuthOutcome, WsClient};
use citadel_server::RunningNode;
use common::*;
use serde_json::json;

async fn node_on(url: &str, tweak: impl FnOnce(&mut citadel_server::Config)) -> RunningNode {
    let mut config = test_config();
    config.database.url = url.to_owned();
    tweak(&mut config);
    start(config).await
}

async fn post(
    node: &RunningNode,
    path: &str,
    bearer: Option<&str>,
    body: serde_json::Value,
) -> HttpResponse {
    call(node, "POST", path, bearer, Some(&body.to_string())).await
}

/// An HTTP request to `node`.
async fn call(
    node: &RunningNode,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> HttpResponse {
    http(node.http_addr, method, path, bearer, body).await
}

/// The status of a body-less request to `node`.
async fn status_of(node: &RunningNode, method: &str, path: &str, bearer: Option<&str>) -> u16 {
    call(node, method, path, bearer, None).await.status
}

fn assert_error(r: &HttpResponse, status: u16, code: &str) {
    assert_eq!(r.status, status, "{r:?}");
    assert_eq!(r.json()["code"], code, "{r:?}");
    assert!(r.json()["message"].is_string());
}

async fn device_and_custom_sign_in_answer_every_status_of_their_routes(
    node: &RunningNode,
    backend: &str,
) {
    // 201 created, then 200 for the same id (idempotent login).
    let created = post(
        node,
        "/v1/auth/device",
        None,
        json!({"id": "dev-1", "create": true, "username": "alice"}),
    )
    .await;
    assert_eq!(created.status, 201, "{backend}: {created:?}");
    let body = created.json();
    assert_eq!(body["created"], true);
    assert_eq!(body["username"], "alice");
    assert!(body["token"].as_str().unwrap().starts_with("cit.access."));
    assert!(
        body["refresh_token"]
            .as_str()
            .unwrap()
            .starts_with("cit.refresh.")
    );
    let again = post(node, "/v1/auth/device", None, json!({"id": "dev-1"})).await;
    assert_eq!(again.status, 200);
    assert_eq!(again.json()["user_id"], body["user_id"]);
    assert_eq!(again.json()["created"], false);
    // 401: unknown id without create.
    assert_error(
        &post(node, "/v1/auth/device", None, json!({"id": "nobody"})).await,
        401,
        "authentication_failed",
    );
    // 409: username taken by another id.
    assert_error(
        &post(
            node,
            "/v1/auth/custom",
            None,
            json!({"id": "cust-1", "create": true, "username": "alice"}),
        )
        .await,
        409,
        "conflict",
    );
    // 400: unknown field, bad id, missing username, non-object metadata, not JSON, too large.
    assert_error(
        &post(
            node,
            "/v1/auth/device",
            None,
            json!({"id": "x", "extra": 1}),
        )
        .await,
        400,
        "invalid_request",
    );
    assert_error(
        &post(node, "/v1/auth/device", None, json!({"id": ""})).await,
        400,
        "invalid_request",
    );
    assert_error(
        &post(
            node,
            "/v1/auth/device",
            None,
            json!({"id": "x", "create": true}),
        )
        .await,
        400,
        "invalid_request",
    );
    assert_error(
        &post(
            node,
            "/v1/auth/device",
            None,
            json!({"id": "x", "create": true, "username": "u", "metadata": [1]}),
        )
        .await,
        400,
        "invalid_request",
    );
    let not_json = call(node, "POST", "/v1/auth/device", None, Some("{nope")).await;
    assert_error(&not_json, 400, "invalid_request");
    let huge = json!({"id": "x", "create": true, "username": "u", "metadata": {"blob": "a".repeat(17_000)}});
    assert_error(
        &post(node, "/v1/auth/device", None, huge).await,
        400,
        "invalid_request",
    );
}

async fn email_sign_in_answers_every_status_of_its_route(node: &RunningNode, _backend: &str) {
    let created = post(node, "/v1/auth/email", None, json!({"email": " Bob@Example.com", "password": "correct horse", "create": true, "username": "bob"})).await;
    assert_eq!(created.status, 201, "{created:?}");
    let login = post(
        node,
        "/v1/auth/email",
        None,
        json!({"email": "bob@example.com", "password": "correct horse"}),
    )
    .await;
    assert_eq!(login.status, 200);
    assert_eq!(login.json()["user_id"], created.json()["user_id"]);
    let wrong = post(
        node,
        "/v1/auth/email",
        None,
        json!({"email": "bob@example.com", "password": "wrong password"}),
    )
    .await;
    let unknown = post(
        node,
        "/v1/auth/email",
        None,
        json!({"email": "nobody@example.com", "password": "whatever1"}),
    )
    .await;
    assert_error(&wrong, 401, "authentication_failed");
    assert_eq!(wrong.body, unknown.body, "no existence oracle");
    assert_error(
        &post(
            node,
            "/v1/auth/email",
            None,
            json!({"email": "bad", "password": "correct horse"}),
        )
        .await,
        400,
        "invalid_request",
    );
    assert_error(
        &post(
            node,
            "/v1/auth/email",
            None,
            json!({"email": "a@b.co", "password": "short"}),
        )
        .await,
        400,
        "invalid_request",
    );
}

/// Runs `case` on a fresh node of every backend, one after the other.
async fn on_every_backend(case: impl AsyncFn(&RunningNode, &'static str)) {
    for backend in backends::all().await {
        let node = node_on(&backend.url, |_| {}).await;
        case(&node, backend.name).await;
        node.shutdown();
        node.wait().await;
    }
}

/// Signs in a new device account; returns its token pair.
async fn device_account(node: &RunningNode, body: serde_json::Value) -> serde_json::Value {
    let r = post(node, "/v1/auth/device", None, body).await;
    assert_eq!(r.status, 201, "{r:?}");
    r.json()
}

/// Carol (`dev-p`, named `carol_name`, display name Carol) and Dave
/// (`dev-q`); returns Carol's pair and access token.
async fn carol_and_dave(node: &RunningNode, carol_name: &str) -> (serde_json::Value, String) {
    let carol =
        json!({"id": "dev-p", "create": true, "username": carol_name, "display_name": "Carol"});
    let pair = device_account(node, carol).await;
    device_account(
        node,
        json!({"id": "dev-q", "create": true, "username": "dave"}),
    )
    .await;
    let token = secret(&pair, "token");
    (pair, token)
}

fn secret(pair: &serde_json::Value, field: &str) -> String {
    pair[field].as_str().unwrap().to_owned()
}

async fn the_account_route_needs_a_valid_token(node: &RunningNode, _backend: &str) {
    let pair = device_account(
        node,
        json!({"id": "dev-p", "create": true, "username": "carol", "display_name": "Carol"}),
    )
    .await;
    let token = secret(&pair, "token");
    let me = call(node, "GET", "/v1/account", Some(&token), None).await;
    assert_eq!(me.status, 200);
    assert_eq!(
        me.json(),
        json!({"user_id": pair["user_id"], "username": "carol", "display_name": "Carol"})
    );
    assert_error(
        &call(node, "GET", "/v1/account", None, None).await,
        401,
        "authentication_failed",
    );
    assert_error(
        &call(node, "GET", "/v1/account", Some("cit.access.forged"), None).await,
        401,
        "authentication_failed",
    );
}

async fn patching_the_account_renames_clears_and_refuses_conflicts(
    node: &RunningNode,
    _backend: &str,
) {
    let (pair, token) = carol_and_dave(node, "carol").await;
    // PATCH: rename, clear display name, 409 on a taken name, 400 on empty.
    let patched = call(
        node,
        "PATCH",
        "/v1/account",
        Some(&token),
        Some(&json!({"username": "carol2", "display_name": null}).to_string()),
    )
    .await;
    assert_eq!(patched.status, 200, "{patched:?}");
    assert_eq!(
        patched.json(),
        json!({"user_id": pair["user_id"], "username": "carol2"})
    );
    assert_error(
        &call(
            node,
            "PATCH",
            "/v1/account",
            Some(&token),
            Some(r#"{"username":"dave"}"#),
        )
        .await,
        409,
        "conflict",
    );
    assert_error(
        &call(node, "PATCH", "/v1/account", Some(&token), Some("{}")).await,
        400,
        "invalid_request",
    );
}

async fn user_lookup_is_exact_and_bounded(node: &RunningNode, _backend: &str) {
    let (pair, token) = carol_and_dave(node, "carol2").await;
    // Lookup: exact, silently omits unknowns; 400 on no keys or too many.
    let found = post(
        node,
        "/v1/users/lookup",
        Some(&token),
        json!({"usernames": ["dave", "ghost"], "user_ids": [pair["user_id"]]}),
    )
    .await;
    assert_eq!(found.status, 200);
    let users = found.json();
    let names: Vec<&str> = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["username"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"dave") && names.contains(&"carol2"));
    assert_error(
        &post(node, "/v1/users/lookup", Some(&token), json!({})).await,
        400,
        "invalid_request",
    );
    let many: Vec<String> = (0..101).map(|i| format!("u{i}")).collect();
    assert_error(
        &post(
            node,
            "/v1/users/lookup",
            Some(&token),
            json!({"usernames": many}),
        )
        .await,
        400,
        "invalid_request",
    );
    assert_error(
        &post(
            node,
            "/v1/users/lookup",
            None,
            json!({"usernames": ["dave"]}),
        )
        .await,
        401,
        "authentication_failed",
    );
}

/// Rotates `pair`'s refresh token; returns the new pair.
async fn rotate(node: &RunningNode, pair: &serde_json::Value) -> serde_json::Value {
    let rotated = post(
        node,
        "/v1/session/refresh",
        None,
        json!({"refresh_token": pair["refresh_token"]}),
    )
    .await;
    assert_eq!(rotated.status, 200);
    assert_eq!(rotated.json()["created"], false);
    rotated.json()
}

async fn refresh_rotates_the_pair_and_kills_the_old_refresh_token(
    node: &RunningNode,
    _backend: &str,
) {
    let pair = device_account(
        node,
        json!({"id": "dev-p", "create": true, "username": "carol"}),
    )
    .await;
    // Refresh rotates: the new pair works, the old refresh token is dead.
    let rotated = rotate(node, &pair).await;
    assert_error(
        &post(
            node,
            "/v1/session/refresh",
            None,
            json!({"refresh_token": pair["refresh_token"]}),
        )
        .await,
        401,
        "authentication_failed",
    );
    assert_error(
        &post(
            node,
            "/v1/session/refresh",
            None,
            json!({"refresh_token": "garbage"}),
        )
        .await,
        401,
        "authentication_failed",
    );
    let new_token = secret(&rotated, "token");
    assert_eq!(
        status_of(node, "GET", "/v1/account", Some(&new_token)).await,
        200
    );
}

async fn logout_revokes_exactly_its_session(node: &RunningNode, _backend: &str) {
    let pair = device_account(
        node,
        json!({"id": "dev-p", "create": true, "username": "carol"}),
    )
    .await;
    let rotated = rotate(node, &pair).await;
    let new_token = secret(&rotated, "token");
    // Logout revokes exactly that session; repeating is still 204.
    let other = post(node, "/v1/auth/device", None, json!({"id": "dev-p"}))
        .await
        .json();
    let other_token = secret(&other, "token");
    assert_eq!(
        status_of(node, "POST", "/v1/session/logout", Some(&new_token)).await,
        204
    );
    assert_eq!(
        status_of(node, "POST", "/v1/session/logout", Some(&new_token)).await,
        204
    );
    assert_eq!(
        status_of(node, "GET", "/v1/account", Some(&new_token)).await,
        401
    );
    assert_eq!(
        status_of(node, "GET", "/v1/account", Some(&other_token)).await,
        200,
        "other devices unaffected"
    );
    // A mismatched pair revokes nothing but is still 204; malformed secret 401; bad JSON 400.
    let mismatch = post(
        node,
        "/v1/session/logout",
        Some(&other_token),
        json!({"refresh_token": rotated["refresh_token"]}),
    )
    .await;
    assert_eq!(mismatch.status, 204);
    assert_eq!(
        status_of(node, "GET", "/v1/account", Some(&other_token)).await,
        200
    );
    assert_error(
        &call(node, "POST", "/v1/session/logout", Some("has space"), None).await,
        401,
        "authentication_failed",
    );
    assert_error(
        &call(
            node,
            "POST",
            "/v1/session/logout",
            Some(&other_token),
            Some("{bad"),
        )
        .await,
        400,
        "invalid_request",
    );
}

async fn status_names_the_backend(node: &RunningNode, backend: &str) {
    assert_eq!(status_json(node).await["backend"], backend);
}

/// One test per named case, each on a fresh node of every backend.
macro_rules! each_backend {
    ($($case:ident),* $(,)?) => {
        mod each_backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::on_every_backend(super::$case).await;
                }
            )*
        }
    };
}

each_backend!(
    device_and_custom_sign_in_answer_every_status_of_their_routes,
    email_sign_in_answers_every_status_of_its_route,
    the_account_route_needs_a_valid_token,
    patching_the_account_renames_clears_and_refuses_conflicts,
    user_lookup_is_exact_and_bounded,
    refresh_rotates_the_pair_and_kills_the_old_refresh_token,
    logout_revokes_exactly_its_session,
    status_names_the_backend,
    the_realtime_handshake_accepts_session_tokens_and_refuses_garbage,
    logout_closes_the_live_connection_within_a_second,
    disabling_an_account_closes_its_connections_within_a_second,
);

/// Admission counters are fixed windows aligned to the Unix epoch (the
/// server's `window_start = now - now % window`): a boundary between two
/// requests starts fresh counters, so a test that counts requests against a
/// limit must not straddle one. Sleeps past the next boundary of `window` if
/// less than `room` is left before it; every longer window used by the
/// caller must be a multiple of `window` so its boundaries coincide.
async fn wait_for_room_in_window(window: Duration, room: Duration) {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970");
    let left = window.as_millis() - since_epoch.as_millis() % window.as_millis();
    if left < room.as_millis() {
        // A little past the boundary: the nodes read the same clock.
        tokio::time::sleep(Duration::from_millis(left as u64 + 100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_limits_answer_429_with_retry_after_and_are_shared_by_nodes() {
    // Long windows (one hour for `source`, one day for
    // `registration_source`, a multiple of it), and the requests start with
    // at least a minute left in the current hour: all of them are counted in
    // the same windows. With the 60 s default a run crossing a minute
    // boundary saw the final login answered 200.
    const SOURCE_WINDOW_MS: u64 = 3_600_000;
    const REGISTRATION_WINDOW_MS: u64 = 86_400_000;
    for backend in backends::all().await {
        let limit = |c: &mut citadel_server::Config| {
            c.authentication.limits.source.limit = 3;
            c.authentication.limits.source.window_ms = SOURCE_WINDOW_MS;
            c.authentication.limits.registration_source.limit = 2;
            c.authentication.limits.registration_source.window_ms = REGISTRATION_WINDOW_MS;
        };
        let a = node_on(&backend.url, limit).await;
        let b = node_on(&backend.url, limit).await;
        wait_for_room_in_window(
            Duration::from_millis(SOURCE_WINDOW_MS),
            Duration::from_secs(60),
        )
        .await;
        assert_eq!(
            post(
                &a,
                "/v1/auth/device",
                None,
                json!({"id": "r1", "create": true, "username": "r1"})
            )
            .await
            .status,
            201
        );
        assert_eq!(
            post(
                &b,
                "/v1/auth/device",
                None,
                json!({"id": "r2", "create": true, "username": "r2"})
            )
            .await
            .status,
            201
        );
        // Third registration from this IP: the registration rule refuses, and
        // a refused plan consumes nothing, so a plain login still fits `source`.
        let refused = post(
            &a,
            "/v1/auth/device",
            None,
            json!({"id": "r3", "create": true, "username": "r3"}),
        )
        .await;
        assert_error(&refused, 429, "rate_limited");
        assert_eq!(
            refused.header("retry-after").as_deref(),
            Some("86400"),
            "longest window of the rule set"
        );
        assert_eq!(
            post(&b, "/v1/auth/device", None, json!({"id": "r1"}))
                .await
                .status,
            200
        );
        let refused = post(&a, "/v1/auth/device", None, json!({"id": "r1"})).await;
        assert_error(&refused, 429, "rate_limited");
        assert_eq!(refused.header("retry-after").as_deref(), Some("3600"));
        for node in [a, b] {
            node.shutdown();
            node.wait().await;
        }
    }
}

async fn token_for(node: &RunningNode, id: &str) -> serde_json::Value {
    let r = post(
        node,
        "/v1/auth/device",
        None,
        json!({"id": id, "create": true, "username": id}),
    )
    .await;
    assert!(r.status == 200 || r.status == 201, "{r:?}");
    r.json()
}

async fn the_realtime_handshake_accepts_session_tokens_and_refuses_garbage(
    node: &RunningNode,
    _backend: &str,
) {
    let url = node.ws_url().unwrap();
    let pair = token_for(node, "player-1").await;
    let token = pair["token"].as_str().unwrap();
    let (_client, outcome) = WsClient::connect_with_token(&url, token).await.unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Authenticated {
            user_id: pair["user_id"].as_str().unwrap().to_owned()
        }
    );
    // Garbage and revoked tokens are the same AUTH_FAILED.
    let (_, bad) = WsClient::connect_with_token(&url, "cit.access.nope")
        .await
        .unwrap();
    assert_eq!(bad, AuthOutcome::Rejected { reason_class: 0 });
}

async fn logout_closes_the_live_connection_within_a_second(node: &RunningNode, _backend: &str) {
    let url = node.ws_url().unwrap();
    let pair = token_for(node, "player-1").await;
    let token = pair["token"].as_str().unwrap();
    let (mut client, outcome) = WsClient::connect_with_token(&url, token).await.unwrap();
    assert!(outcome.is_accepted());
    let started = std::time::Instant::now();
    assert_eq!(
        status_of(node, "POST", "/v1/session/logout", Some(token)).await,
        204
    );
    let (code, reason) = closed(&mut client).await.expect("close frame");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((code, reason.as_str()), (1008, "session revoked"));
    let (_, after) = WsClient::connect_with_token(&url, token).await.unwrap();
    assert_eq!(after, AuthOutcome::Rejected { reason_class: 0 });
}

async fn disabling_an_account_closes_its_connections_within_a_second(
    node: &RunningNode,
    _backend: &str,
) {
    let url = node.ws_url().unwrap();
    // An operator disabling the account closes its connections within a second.
    let pair = token_for(node, "player-2").await;
    let (mut client, _) = WsClient::connect_with_token(&url, pair["token"].as_str().unwrap())
        .await
        .unwrap();
    let started = std::time::Instant::now();
    assert!(
        node.shared()
            .accounts
            .set_disabled(pair["user_id"].as_str().unwrap(), true)
            .await
            .unwrap()
    );
    let (code, _) = closed(&mut client).await.expect("close frame");
    assert_eq!(code, 1008);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        post(node, "/v1/auth/device", None, json!({"id": "player-2"}))
            .await
            .status,
        401,
        "disabled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_connection_per_user_replaces_the_older_connection() {
    let backend = backends::sqlite();
    let node = node_on(&backend.url, |c| {
        c.transport.auth.single_connection_per_user = true
    })
    .await;
    let url = node.ws_url().unwrap();
    let pair = token_for(&node, "solo").await;
    let token = pair["token"].as_str().unwrap();
    let (mut first, _) = WsClient::connect_with_token(&url, token).await.unwrap();
    let second_login = post(&node, "/v1/auth/device", None, json!({"id": "solo"}))
        .await
        .json();
    let (mut second, outcome) =
        WsClient::connect_with_token(&url, second_login["token"].as_str().unwrap())
            .await
            .unwrap();
    assert!(outcome.is_accepted());
    let (code, reason) = closed(&mut first).await.expect("close frame");
    assert_eq!(code, 1008);
    assert!(reason.contains("replaced"), "{reason}");
    assert_eq!(
        &second.call_rpc("echo", b"alive").await.unwrap()[..],
        b"alive"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_a_restart_on_the_same_sqlite_file() {
    let backend = backends::sqlite();
    let node = node_on(&backend.url, |_| {}).await;
    let pair = token_for(&node, "persistent").await;
    node.shutdown();
    node.wait().await;
    let node = node_on(&backend.url, |_| {}).await;
    let (_, outcome) =
        WsClient::connect_with_token(&node.ws_url().unwrap(), pair["token"].as_str().unwrap())
            .await
            .unwrap();
    assert_eq!(
        outcome,
        AuthOutcome::Authenticated {
            user_id: pair["user_id"].as_str().unwrap().to_owned()
        }
    );
}
