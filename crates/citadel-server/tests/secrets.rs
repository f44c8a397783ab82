//! Secrets never reach logs: the log output (debug level, every crate) of a
//! full auth flow — registration, email login, a wrong password, refresh,
//! realtime handshake, logout — contains no token, refresh token or
//! password. Its own test binary because it installs a global subscriber.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use citadel_client::WsClient;
use common::*;
use serde_json::json;

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_substring_in_the_logs_of_a_full_auth_flow() {
    let capture = Capture::default();
    let sink = capture.clone();
    tracing_subscriber::fmt()
        .with_env_filter("debug")
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .init();
    let node = start_default().await;
    let addr = node.http_addr;
    let password = "Sup3r-Secret-Passw0rd";
    let mut secrets = vec![password.to_owned()];
    let reg = http(addr, "POST", "/v1/auth/email", None, Some(&json!({"email": "s@example.com", "password": password, "create": true, "username": "s"}).to_string())).await;
    assert_eq!(reg.status, 201);
    let login = http(
        addr,
        "POST",
        "/v1/auth/email",
        None,
        Some(&json!({"email": "s@example.com", "password": password}).to_string()),
    )
    .await;
    let wrong = http(
        addr,
        "POST",
        "/v1/auth/email",
        None,
        Some(&json!({"email": "s@example.com", "password": "Wrong-Passw0rd-Zz"}).to_string()),
    )
    .await;
    assert_eq!(wrong.status, 401);
    secrets.push("Wrong-Passw0rd-Zz".to_owned());
    for pair in [reg.json(), login.json()] {
        secrets.push(pair["token"].as_str().unwrap().to_owned());
        secrets.push(pair["refresh_token"].as_str().unwrap().to_owned());
    }
    let refreshed = http(
        addr,
        "POST",
        "/v1/session/refresh",
        None,
        Some(&json!({"refresh_token": secrets[5]}).to_string()),
    )
    .await
    .json();
    let token = refreshed["token"].as_str().unwrap().to_owned();
    secrets.push(token.clone());
    secrets.push(refreshed["refresh_token"].as_str().unwrap().to_owned());
    let (mut client, outcome) = WsClient::connect_with_token(&node.ws_url().unwrap(), &token)
        .await
        .unwrap();
    assert!(outcome.is_accepted());
    let (_bad, _) = WsClient::connect_with_token(
        &node.ws_url().unwrap(),
        "cit.access.not-a-real-token-but-secret-like",
    )
    .await
    .unwrap();
    secrets.push("cit.access.not-a-real-token-but-secret-like".to_owned());
    assert_eq!(
        http(addr, "POST", "/v1/session/logout", Some(&token), None)
            .await
            .status,
        204
    );
    closed(&mut client).await;
    node.shutdown();
    node.wait().await;
    let logs = String::from_utf8_lossy(&capture.0.lock().unwrap()).into_owned();
    assert!(
        logs.contains("realtime handshake rejected"),
        "the flow was logged at all:\n{logs}"
    );
    for secret in &secrets {
        // Any 12-character window of a secret would already be a leak.
        for window in secret.as_bytes().windows(12) {
            let needle = std::str::from_utf8(window).unwrap();
            assert!(
                !logs.contains(needle),
                "secret fragment `{needle}` found in logs"
            );
        }
    }
}
