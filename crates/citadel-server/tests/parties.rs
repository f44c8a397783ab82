//! Parties over real sockets (services.md §6): the party.* RPCs, slots that
//! count invitations, one party per account, leader-only queueing with
//! every member connected, frozen membership while queued, and a party of
//! three matched with two solo players into one room of five.

mod common;

use std::time::Duration;

use citadel_client::wire::protocol::{KIND_MATCHMAKER_MATCHED, KIND_ROOM_JOINED};
use citadel_client::wire::service::MatchmakerMatched;
use citadel_server::{NodeBuilder, RunningNode};
use common::*;
use serde_json::{Value, json};

async fn node() -> RunningNode {
    let mut config = test_config();
    config.matchmaker.calls_per_second = 1_000;
    config.matchmaker.call_burst = 1_000;
    NodeBuilder::new(config).start().await.expect("node starts")
}

struct Player {
    id: String,
    token: String,
    client: TestClient,
}

async fn player(node: &RunningNode, name: &str) -> Player {
    let (id, token) = device_account(node, name).await;
    let client = login(node, &token).await;
    Player { id, token, client }
}

impl Player {
    async fn call(&mut self, method: &str, payload: Value) -> Result<Value, String> {
        call_json(&mut self.client, method, payload).await
    }
}

fn five(party: Option<&str>) -> Value {
    let mut body = json!({"min_count": 5, "max_count": 5, "ttl_ms": 60_000});
    if let Some(p) = party {
        body["party_id"] = json!(p);
    }
    body
}

#[tokio::test]
async fn party_rules() {
    let node = node().await;
    let mut ps = Vec::new();
    for i in 0..9 {
        ps.push(player(&node, &format!("pt-rules-{i}")).await);
    }
    let ids: Vec<String> = ps.iter().map(|p| p.id.clone()).collect();
    let snap = ps[0].call("party.create", json!({})).await.unwrap();
    let party = snap["party_id"].as_str().unwrap().to_owned();
    assert_eq!(snap["leader_user_id"], ids[0].as_str());
    assert_eq!(snap["members"], json!([ids[0]]));
    assert_eq!(snap["revision"], 1);
    assert_eq!(
        ps[0].call("party.create", json!({})).await,
        Err("already in a party".into())
    );
    assert_eq!(
        ps[0].call("party.invite", json!({"party_id": party})).await,
        Err("missing string field: target_user_id".into())
    );
    assert_eq!(
        ps[0]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": ids[0]})
            )
            .await,
        Err("cannot target yourself".into())
    );
    // Eight slots, invitations included.
    for id in &ids[1..8] {
        ps[0]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": id}),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        ps[0]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": ids[8]})
            )
            .await,
        Err("party is full".into())
    );
    // Strangers see nothing; invitees see the party; only the leader leads.
    assert_eq!(
        ps[8].call("party.status", json!({"party_id": party})).await,
        Err("unknown party".into())
    );
    assert_eq!(
        ps[8].call("party.accept", json!({"party_id": party})).await,
        Err("unknown party".into())
    );
    let seen = ps[1]
        .call("party.status", json!({"party_id": party}))
        .await
        .unwrap();
    assert_eq!(seen["invitations"].as_array().unwrap().len(), 7);
    assert_eq!(seen["revision"], 8);
    ps[1]
        .call("party.accept", json!({"party_id": party}))
        .await
        .unwrap();
    ps[2]
        .call("party.accept", json!({"party_id": party}))
        .await
        .unwrap();
    assert_eq!(
        ps[1]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": ids[8]})
            )
            .await,
        Err("only the party leader may do this".into())
    );
    assert_eq!(
        ps[1].call("party.create", json!({})).await,
        Err("already in a party".into())
    );
    // Withdraw an invitation, decline another, remove a member.
    ps[0]
        .call(
            "party.remove",
            json!({"party_id": party, "target_user_id": ids[7]}),
        )
        .await
        .unwrap();
    assert_eq!(
        ps[6].call("party.leave", json!({"party_id": party})).await,
        Ok(json!({"left": true}))
    );
    let snap = ps[0]
        .call(
            "party.remove",
            json!({"party_id": party, "target_user_id": ids[2]}),
        )
        .await
        .unwrap();
    assert_eq!(snap["members"], json!([ids[0], ids[1]]));
    // Only the leader queues the party.
    assert_eq!(
        ps[1].call("matchmaker.add", five(Some(&party))).await,
        Err("only the party leader may do this".into())
    );
    // A member holding its own ticket blocks the party ticket.
    let solo = ps[1].call("matchmaker.add", five(None)).await.unwrap();
    assert_eq!(
        ps[0].call("matchmaker.add", five(Some(&party))).await,
        Err("party member already has a queued ticket".into())
    );
    ps[1]
        .call("matchmaker.cancel", json!({"ticket_id": solo["ticket_id"]}))
        .await
        .unwrap();
    // Queued: membership frozen.
    let t = ps[0]
        .call("matchmaker.add", five(Some(&party)))
        .await
        .unwrap();
    assert_eq!(
        ps[0]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": ids[8]})
            )
            .await,
        Err("party is queued for a match".into())
    );
    assert_eq!(
        ps[1].call("party.leave", json!({"party_id": party})).await,
        Err("party is queued for a match".into())
    );
    // A member leaving the node removes the party ticket and unfreezes it.
    let member = &mut ps[1];
    member.client.close().await.unwrap();
    let shared = node.shared().clone();
    eventually("party ticket removed", || shared.matchmaker.queued() == 0).await;
    let status = ps[0]
        .call("matchmaker.status", json!({"ticket_id": t["ticket_id"]}))
        .await
        .unwrap();
    assert_eq!(status["state"], "removed");
    // Every member must be connected to queue.
    assert_eq!(
        ps[0].call("matchmaker.add", five(Some(&party))).await,
        Err("every party member must be connected".into())
    );
    // Promote, then the old leader may leave; the new leader closes.
    ps[0]
        .call(
            "party.promote",
            json!({"party_id": party, "target_user_id": ids[1]}),
        )
        .await
        .unwrap();
    assert_eq!(
        ps[0].call("party.close", json!({"party_id": party})).await,
        Err("only the party leader may do this".into())
    );
    ps[1].client = {
        let mut c = connect(&node, Transport::Ws).await;
        c.authenticate(Some(&ps[1].token)).await.unwrap();
        c
    };
    assert_eq!(
        ps[1].call("party.close", json!({"party_id": party})).await,
        Ok(json!({"closed": true}))
    );
    assert_eq!(
        ps[0].call("party.status", json!({"party_id": party})).await,
        Err("unknown party".into())
    );
    assert!(ps[0].call("party.create", json!({})).await.is_ok());
}

#[tokio::test]
async fn a_party_of_three_and_two_solos_form_one_room() {
    let node = node().await;
    let mut ps = Vec::new();
    for i in 0..5 {
        ps.push(player(&node, &format!("pt-five-{i}")).await);
    }
    let party = ps[0].call("party.create", json!({})).await.unwrap()["party_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for i in 1..3 {
        let target = ps[i].id.clone();
        ps[0]
            .call(
                "party.invite",
                json!({"party_id": party, "target_user_id": target}),
            )
            .await
            .unwrap();
        ps[i]
            .call("party.accept", json!({"party_id": party}))
            .await
            .unwrap();
    }
    let party_ticket = ps[0]
        .call("matchmaker.add", five(Some(&party)))
        .await
        .unwrap()["ticket_id"]
        .as_str()
        .unwrap()
        .to_owned();
    ps[3].call("matchmaker.add", five(None)).await.unwrap();
    assert_silent(&mut ps[3].client, Duration::from_millis(150)).await;
    ps[4].call("matchmaker.add", five(None)).await.unwrap();
    let mut handoffs = Vec::new();
    for p in ps.iter_mut() {
        let env = recv_kind(&mut p.client, KIND_MATCHMAKER_MATCHED).await;
        handoffs.push(MatchmakerMatched::decode(&env.body).unwrap());
    }
    let match_id = handoffs[0].match_id;
    assert!(handoffs.iter().all(|h| h.match_id == match_id));
    for h in &handoffs[..3] {
        assert_eq!(
            h.ticket_id, party_ticket,
            "party members share the party ticket"
        );
    }
    let mut tokens: Vec<&str> = handoffs.iter().map(|h| h.join_token.as_str()).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 5, "each member has its own token");
    // A party member cannot redeem another member's token.
    let foreign = json!({"ticket_id": party_ticket, "join_token": handoffs[1].join_token});
    assert_eq!(
        ps[2].call("matchmaker.accept", foreign).await,
        Err("invalid join token".into())
    );
    for (p, h) in ps.iter_mut().zip(&handoffs) {
        let accept = json!({"ticket_id": h.ticket_id, "join_token": h.join_token});
        assert_eq!(
            p.call("matchmaker.accept", accept).await.unwrap()["match_id"],
            match_id
        );
        recv_kind(&mut p.client, KIND_ROOM_JOINED).await;
    }
    let rooms = status_json(&node).await["rooms"].clone();
    let room = rooms
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == match_id)
        .unwrap()
        .clone();
    assert_eq!(room["members"], 5);
    assert_eq!(room["max_players"], 5);
    assert!(!ps[0].token.is_empty());
}
