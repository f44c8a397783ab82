//! Friends over real sockets, on SQLite and on PostgreSQL: invitations,
//! acceptance, removal, blocks (both ways, indistinguishable from unknown
//! users), paging, the relation limit and the common service answers.

mod common;

use citadel_server::config::Config;
use citadel_server::{NodeBuilder, RunningNode};
use common::*;
use serde_json::{Value, json};

async fn start_on(url: &str, max_relations: u32) -> RunningNode {
    let mut config: Config = test_config();
    config.database.url = url.to_owned();
    config.friends.max_relations = max_relations;
    NodeBuilder::new(config).start().await.expect("node starts")
}

struct Player {
    id: String,
    client: TestClient,
}

async fn player(node: &RunningNode, name: &str) -> Player {
    let (id, token) = device_account(node, name).await;
    Player {
        id,
        client: login(node, &token).await,
    }
}

use common::call_json as call;

impl Player {
    async fn add(&mut self, other: &Player) -> Result<String, String> {
        let r = call(&mut self.client, "friends.add", json!({"other": other.id})).await?;
        assert_eq!(r["user_id"], other.id.as_str());
        Ok(r["state"].as_str().unwrap().to_owned())
    }
    async fn block(&mut self, other: &Player) -> Result<Value, String> {
        call(
            &mut self.client,
            "friends.block",
            json!({"other": other.id}),
        )
        .await
    }
    async fn remove(&mut self, other: &Player) -> bool {
        let r = call(
            &mut self.client,
            "friends.remove",
            json!({"other": other.id}),
        )
        .await
        .unwrap();
        r["removed"].as_bool().unwrap()
    }
    /// (user id, state) pairs of the whole list.
    async fn relations(&mut self) -> Vec<(String, String)> {
        let r = call(&mut self.client, "friends.list", json!({}))
            .await
            .unwrap();
        r["friends"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["user_id"].as_str().unwrap().to_owned(),
                    f["state"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }
}

fn rel(p: &Player, state: &str) -> (String, String) {
    (p.id.clone(), state.to_owned())
}

async fn friend_rules(url: &str, tag: &str) {
    let node = start_on(url, 1_000).await;
    let mut ann = player(&node, &format!("ann-{tag}")).await;
    let mut ben = player(&node, &format!("ben-{tag}")).await;
    let mut cat = player(&node, &format!("cat-{tag}")).await;
    let mut visitor = guest(&node, Transport::Ws).await;

    // Common answers.
    assert_eq!(
        call(&mut visitor, "friends.list", json!({})).await,
        Err("authentication required".into())
    );
    assert_eq!(
        call(&mut ann.client, "friends.poke", json!({})).await,
        Err("unknown domain method".into())
    );
    assert_eq!(
        call(&mut ann.client, "friends.add", json!({})).await,
        Err("missing string field: other".into())
    );
    assert_eq!(
        call(&mut ann.client, "friends.add", json!({"other": 5})).await,
        Err("missing string field: other".into())
    );
    assert_eq!(
        call(&mut ann.client, "friends.add", json!({"other": ann.id})).await,
        Err("cannot target yourself".into())
    );

    // An invitation, seen from both sides, then accepted.
    assert_eq!(ann.add(&ben).await, Ok("invited_sent".into()));
    assert_eq!(ann.add(&ben).await, Ok("invited_sent".into()), "idempotent");
    assert_eq!(ann.relations().await, [rel(&ben, "invited_sent")]);
    assert_eq!(ben.relations().await, [rel(&ann, "invited_received")]);
    assert_eq!(ben.add(&ann).await, Ok("friend".into()));
    assert_eq!(ann.relations().await, [rel(&ben, "friend")]);
    assert_eq!(ben.relations().await, [rel(&ann, "friend")]);

    // An unknown user and a blocked one get the same answer.
    let unknown = call(
        &mut ann.client,
        "friends.add",
        json!({"other": "user-nobody"}),
    )
    .await;
    assert_eq!(unknown, Err("user unavailable".into()));
    assert_eq!(
        cat.block(&ann).await.unwrap(),
        json!({"user_id": ann.id, "state": "blocked"})
    );
    assert_eq!(
        ann.add(&cat).await,
        Err("user unavailable".into()),
        "blocked by the target"
    );
    assert_eq!(
        cat.add(&ann).await,
        Err("user unavailable".into()),
        "the blocker cannot invite either"
    );
    assert_eq!(
        ann.relations().await,
        [rel(&ben, "friend")],
        "no trace of the block"
    );
    assert_eq!(
        call(
            &mut ann.client,
            "friends.block",
            json!({"other": "user-nobody"})
        )
        .await,
        Err("user unavailable".into())
    );

    // A block ends a friendship; removing it lets invitations through again.
    ann.block(&ben).await.unwrap();
    assert_eq!(ann.relations().await, [rel(&ben, "blocked")]);
    assert!(ben.relations().await.is_empty());
    assert_eq!(ben.add(&ann).await, Err("user unavailable".into()));
    assert!(
        !ben.remove(&ann).await,
        "ann's block is not ben's to remove"
    );
    assert!(ann.remove(&ben).await);
    assert_eq!(ben.add(&ann).await, Ok("invited_sent".into()));
    assert!(
        ann.remove(&ben).await,
        "declining an invitation removes both sides"
    );
    assert!(ben.relations().await.is_empty());

    // Paging by cursor, and a state filter.
    ann.add(&ben).await.unwrap();
    cat.remove(&ann).await;
    ann.add(&cat).await.unwrap();
    let mut seen = Vec::new();
    let mut request = json!({"limit": 1});
    loop {
        let page = call(&mut ann.client, "friends.list", request.clone())
            .await
            .unwrap();
        for f in page["friends"].as_array().unwrap() {
            seen.push(f["user_id"].as_str().unwrap().to_owned());
        }
        match &page["cursor"] {
            Value::String(c) => request = json!({"limit": 1, "cursor": c}),
            _ => break,
        }
    }
    let mut expected = vec![ben.id.clone(), cat.id.clone()];
    expected.sort();
    assert_eq!(seen, expected);
    let friends_only = call(&mut ann.client, "friends.list", json!({"state": "friend"}))
        .await
        .unwrap();
    assert_eq!(friends_only["friends"], json!([]));
    assert_eq!(
        call(&mut ann.client, "friends.list", json!({"state": "enemy"})).await,
        Err("unknown state: enemy".into())
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn friend_rules_on_every_backend() {
    for backend in backends::all().await {
        friend_rules(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relation_limit_holds() {
    for backend in backends::all().await {
        let node = start_on(&backend.url, 2).await;
        let mut a = player(&node, "lim-a").await;
        let b = player(&node, "lim-b").await;
        let c = player(&node, "lim-c").await;
        let mut d = player(&node, "lim-d").await;
        a.add(&b).await.unwrap();
        a.add(&c).await.unwrap();
        assert_eq!(a.add(&d).await, Err("friend limit reached".into()));
        // A full target is just unavailable; accepting needs no new slot.
        assert_eq!(d.add(&a).await, Err("user unavailable".into()));
        let mut b = b;
        assert_eq!(b.add(&a).await, Ok("friend".into()));
        node.shutdown();
        node.wait().await;
    }
}
