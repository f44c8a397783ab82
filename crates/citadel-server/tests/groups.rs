//! Groups over real sockets, on SQLite and on PostgreSQL: every role rule
//! of the client RPCs and of the trusted operations (through Lua's
//! `citadel.groups_call`), including each refusal, the bounds and the
//! common service answers.

mod common;

use citadel_server::RunningNode;
use citadel_server::config::Config;
use common::*;
use serde_json::{Value, json};

/// `gcall` takes `operation|payload` and runs it as the caller's account.
const SCRIPT: &str = r#"
citadel.on_rpc("gcall", function(ctx, body)
    local op, payload = body:match("^([^|]*)|(.*)$")
    local reply, err = citadel.groups_call(ctx.user_id, op, payload)
    if reply == nil then return "error:" .. err end
    return reply
end)
"#;

async fn start_on(url: &str, tweak: impl FnOnce(&mut Config)) -> RunningNode {
    start_scripted(url, "groups", SCRIPT, tweak).await
}

use common::call_json as call;

impl Player {
    async fn rpc(&mut self, method: &str, payload: Value) -> Result<Value, String> {
        call(&mut self.client, method, payload).await
    }

    /// A trusted operation run by the script as this player.
    async fn trusted(&mut self, op: &str, payload: Value) -> Result<Value, String> {
        script_call(&mut self.client, "gcall", op, &payload).await
    }

    /// A target operation (`add_member`, `kick`, ...) on `other`; the new
    /// state or the error.
    async fn on(&mut self, method: &str, group: u64, other: &str) -> Result<Value, String> {
        self.rpc(
            &format!("groups.{method}"),
            json!({"group_id": group, "user_id": other}),
        )
        .await
        .map(|r| r["state"].clone())
    }

    async fn state_in(&mut self, group: u64) -> Value {
        self.rpc("groups.get", json!({"group_id": group}))
            .await
            .unwrap()["state"]
            .clone()
    }
}

fn denied() -> Result<Value, String> {
    Err("permission denied".into())
}

async fn role_rules(url: &str, tag: &str) {
    let node = start_on(url, |_| {}).await;
    let mut owner = player(&node, &format!("own-{tag}")).await;
    let mut adm = player(&node, &format!("adm-{tag}")).await;
    let mut mem = player(&node, &format!("mem-{tag}")).await;
    let mut out = player(&node, &format!("out-{tag}")).await;
    let mut visitor = guest(&node, Transport::Ws).await;

    // Common answers.
    assert_eq!(
        call(&mut visitor, "groups.list", json!({})).await,
        Err("authentication required".into())
    );
    assert_eq!(
        owner.rpc("groups.poke", json!({})).await,
        Err("unknown domain method".into())
    );
    assert_eq!(
        owner.rpc("groups.create", json!({})).await,
        Err("missing string field: name".into())
    );
    assert_eq!(
        owner
            .rpc("groups.create", json!({"name": "x", "owner": "y"}))
            .await,
        Err("invalid JSON body".into())
    );
    for bad in [json!("3"), json!(0), json!(-3), json!(1.5), Value::Null] {
        assert_eq!(
            owner.rpc("groups.get", json!({"group_id": bad})).await,
            Err("missing integer field: group_id".into()),
            "{bad}"
        );
    }
    assert_eq!(
        owner
            .rpc("groups.create", json!({"name": "x", "max_members": 101}))
            .await,
        Err("max_members must be 1 to 100".into())
    );
    assert_eq!(
        owner
            .rpc("groups.create", json!({"name": "x", "metadata": [1]}))
            .await,
        Err("metadata must be an object".into())
    );

    // Creation: the creator is the superadmin; names are unique.
    let name = format!("Guild {tag}");
    let created = owner
        .rpc(
            "groups.create",
            json!({"name": name, "description": "d", "metadata": {"tier": 2}}),
        )
        .await
        .unwrap();
    assert_eq!(created["member_count"], 1);
    assert_eq!(created["open"], false);
    assert_eq!(created["max_members"], 100);
    assert_eq!(created["metadata"], json!({"tier": 2}));
    // Ids are JSON integers in 1..=2^53-1; the string form is refused.
    assert!(created["group_id"].is_u64(), "{created}");
    let g = created["group_id"].as_u64().unwrap();
    assert!((1..1 << 53).contains(&g), "{g}");
    assert_eq!(owner.state_in(g).await, "superadmin");
    assert_eq!(
        owner
            .rpc("groups.get", json!({"group_id": g.to_string()}))
            .await,
        Err("missing integer field: group_id".into())
    );
    assert_eq!(
        mem.rpc("groups.create", json!({"name": name})).await,
        Err("group name taken".into())
    );
    assert_eq!(
        owner
            .rpc("groups.get", json!({"group_id": 9_007_199_254_740_993_u64}))
            .await,
        Err("group not found".into())
    );

    // Admins manage members; members and outsiders do not.
    assert_eq!(
        owner.on("add_member", g, &adm.id.clone()).await,
        Ok(json!("member"))
    );
    assert_eq!(
        owner.on("promote", g, &adm.id.clone()).await,
        Ok(json!("admin"))
    );
    assert_eq!(
        adm.on("add_member", g, &mem.id.clone()).await,
        Ok(json!("member"))
    );
    assert_eq!(
        adm.on("add_member", g, &mem.id.clone()).await,
        Err("already a member".into())
    );
    assert_eq!(mem.on("add_member", g, &out.id.clone()).await, denied());
    assert_eq!(out.on("add_member", g, &out.id.clone()).await, denied());
    let unknown = owner
        .rpc(
            "groups.add_member",
            json!({"group_id": g, "user_id": "user-nobody"}),
        )
        .await;
    assert_eq!(unknown, Err("user unavailable".into()));

    // Only a superadmin changes admins.
    assert_eq!(adm.on("promote", g, &mem.id.clone()).await, denied());
    assert_eq!(adm.on("demote", g, &adm.id.clone()).await, denied());
    assert_eq!(adm.on("kick", g, &owner.id.clone()).await, denied());
    assert_eq!(mem.on("kick", g, &adm.id.clone()).await, denied());
    assert_eq!(
        owner.on("demote", g, &mem.id.clone()).await,
        Err("cannot demote further".into())
    );
    assert_eq!(
        owner.on("promote", g, &out.id.clone()).await,
        Err("not a member".into())
    );
    assert_eq!(
        owner.on("kick", g, &owner.id.clone()).await,
        Err("cannot target yourself".into())
    );

    // Update: admins may; members may not; the cap cannot go below the count.
    assert_eq!(
        mem.rpc("groups.update", json!({"group_id": g, "description": "m"}))
            .await,
        denied()
    );
    let updated = adm
        .rpc(
            "groups.update",
            json!({"group_id": g, "description": "new", "open": true}),
        )
        .await
        .unwrap();
    assert_eq!(updated["description"], "new");
    assert_eq!(updated["open"], true);
    assert_eq!(updated["name"], name.as_str(), "untouched fields stay");
    assert_eq!(
        adm.rpc("groups.update", json!({"group_id": g, "max_members": 2}))
            .await,
        Err("max_members below member count".into())
    );

    // The last superadmin needs a successor, to leave or to step down.
    assert_eq!(
        owner.rpc("groups.leave", json!({"group_id": g})).await,
        Err("last superadmin needs a successor".into())
    );
    assert_eq!(
        owner.on("demote", g, &owner.id.clone()).await,
        Err("last superadmin needs a successor".into())
    );
    assert_eq!(
        owner.on("promote", g, &adm.id.clone()).await,
        Ok(json!("superadmin"))
    );
    assert_eq!(
        owner.on("promote", g, &adm.id.clone()).await,
        Err("cannot promote further".into())
    );
    assert_eq!(
        adm.on("kick", g, &owner.id.clone()).await,
        denied(),
        "superadmins are never kicked"
    );
    assert_eq!(
        owner.on("demote", g, &owner.id.clone()).await,
        Ok(json!("admin"))
    );
    assert_eq!(owner.state_in(g).await, "admin");
    // adm is now the only superadmin; owner (admin) cannot touch admins.
    assert_eq!(owner.on("demote", g, &adm.id.clone()).await, denied());

    // Kick: admins remove members; removing an admin takes a superadmin.
    assert_eq!(mem.on("kick", g, &owner.id.clone()).await, denied());
    assert_eq!(adm.on("kick", g, &owner.id.clone()).await, Ok(Value::Null));
    assert_eq!(owner.state_in(g).await, Value::Null);
    assert_eq!(adm.on("kick", g, &mem.id.clone()).await, Ok(Value::Null));
    assert_eq!(
        adm.on("kick", g, &mem.id.clone()).await,
        Err("not a member".into())
    );

    // Listing, by prefix and the caller's own, paged by cursor.
    let mine = adm.rpc("groups.list", json!({"mine": true})).await.unwrap();
    assert_eq!(mine["groups"][0]["group_id"], g);
    assert_eq!(mine["groups"][0]["state"], "superadmin");
    assert_eq!(
        out.rpc("groups.list", json!({"mine": true})).await.unwrap()["groups"],
        json!([])
    );
    let second = out
        .rpc("groups.create", json!({"name": format!("Guild {tag} B")}))
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut request = json!({"name_prefix": format!("Guild {tag}"), "limit": 1});
    loop {
        let page = mem.rpc("groups.list", request.clone()).await.unwrap();
        for group in page["groups"].as_array().unwrap() {
            assert!(group.get("state").is_none(), "state only with mine");
            seen.push(group["group_id"].as_u64().unwrap());
        }
        match &page["cursor"] {
            Value::String(c) => {
                request = json!({"name_prefix": format!("Guild {tag}"), "limit": 1, "cursor": c})
            }
            _ => break,
        }
    }
    assert_eq!(seen, [g, second["group_id"].as_u64().unwrap()]);

    // Delete: superadmins only.
    assert_eq!(
        mem.rpc("groups.delete", json!({"group_id": g})).await,
        denied()
    );
    assert_eq!(
        adm.rpc("groups.delete", json!({"group_id": g})).await,
        Ok(json!({"group_id": g, "deleted": true}))
    );
    assert_eq!(
        adm.rpc("groups.get", json!({"group_id": g})).await,
        Err("group not found".into())
    );
    node.shutdown();
    node.wait().await;
}

async fn trusted_rules(url: &str, tag: &str) {
    let node = start_on(url, |_| {}).await;
    let mut owner = player(&node, &format!("town-{tag}")).await;
    let mut asker = player(&node, &format!("task-{tag}")).await;
    let mut guest_of = player(&node, &format!("tinv-{tag}")).await;
    let mut heir = player(&node, &format!("thei-{tag}")).await;

    let closed = owner
        .rpc("groups.create", json!({"name": format!("Closed {tag}")}))
        .await
        .unwrap()["group_id"]
        .as_u64()
        .unwrap();
    let open = owner
        .rpc(
            "groups.create",
            json!({"name": format!("Open {tag}"), "open": true}),
        )
        .await
        .unwrap()["group_id"]
        .as_u64()
        .unwrap();
    let id = |g: u64| json!({"group_id": g});
    let target = |g: u64, p: &Player| json!({"group_id": g, "user_id": p.id});

    assert_eq!(
        owner.trusted("explode", id(closed)).await,
        Err("unknown group operation".into())
    );
    assert_eq!(
        owner.trusted("join", json!({})).await,
        Err("missing integer field: group_id".into())
    );

    // join: an open group admits, a closed one records a request.
    assert_eq!(
        asker.trusted("join", id(open)).await.unwrap()["state"],
        "member"
    );
    assert_eq!(
        asker.trusted("join", id(open)).await,
        Err("already a member".into())
    );
    assert_eq!(
        asker.trusted("join", id(closed)).await.unwrap()["state"],
        "join_request"
    );
    assert_eq!(
        asker.trusted("join", id(closed)).await.unwrap()["state"],
        "join_request",
        "repeating a request is harmless"
    );
    // A pending request is not membership: invisible to plain members.
    assert_eq!(asker.state_in(closed).await, "join_request");
    let listed = owner
        .rpc("groups.get", json!({"group_id": closed}))
        .await
        .unwrap();
    assert_eq!(listed["group"]["member_count"], 1);
    assert_eq!(
        listed["members"].as_array().unwrap().len(),
        2,
        "admins see requests"
    );

    // approve_request: admins only, and only on a request.
    assert_eq!(
        asker
            .trusted("approve_request", target(closed, &asker))
            .await,
        denied()
    );
    assert_eq!(
        owner
            .trusted("approve_request", target(closed, &heir))
            .await,
        Err("no pending request".into())
    );
    assert_eq!(
        owner
            .trusted("approve_request", target(closed, &asker))
            .await
            .unwrap()["state"],
        "member"
    );

    // invite / accept_invitation / cancel_admission.
    assert_eq!(
        asker.trusted("invite", target(closed, &guest_of)).await,
        denied(),
        "members do not invite"
    );
    assert_eq!(
        owner
            .trusted("invite", target(closed, &guest_of))
            .await
            .unwrap()["state"],
        "invited"
    );
    assert_eq!(
        heir.trusted("accept_invitation", id(closed)).await,
        Err("no pending invitation".into())
    );
    assert_eq!(
        guest_of
            .trusted("cancel_admission", id(closed))
            .await
            .unwrap()["state"],
        Value::Null,
        "declining one's own invitation"
    );
    assert_eq!(
        guest_of.trusted("accept_invitation", id(closed)).await,
        Err("no pending invitation".into())
    );
    owner
        .trusted("invite", target(closed, &guest_of))
        .await
        .unwrap();
    assert_eq!(
        asker
            .trusted("cancel_admission", target(closed, &guest_of))
            .await,
        denied(),
        "someone else's admission takes an admin"
    );
    assert_eq!(
        guest_of
            .trusted("accept_invitation", id(closed))
            .await
            .unwrap()["state"],
        "member"
    );
    assert_eq!(
        guest_of.trusted("cancel_admission", id(closed)).await,
        Err("no pending admission".into())
    );
    // An invitation to someone who asked admits them.
    heir.trusted("join", id(closed)).await.unwrap();
    assert_eq!(
        owner
            .trusted("invite", target(closed, &heir))
            .await
            .unwrap()["state"],
        "member"
    );

    // transfer_ownership: superadmin to a member; the giver becomes admin.
    assert_eq!(
        asker
            .trusted("transfer_ownership", target(closed, &heir))
            .await,
        denied()
    );
    let other = player(&node, &format!("toth-{tag}")).await;
    assert_eq!(
        owner
            .trusted("transfer_ownership", target(closed, &other))
            .await,
        Err("not a member".into())
    );
    let moved = owner
        .trusted("transfer_ownership", target(closed, &heir))
        .await
        .unwrap();
    assert_eq!(moved["previous_owner"], owner.id.as_str());
    assert_eq!(heir.state_in(closed).await, "superadmin");
    assert_eq!(owner.state_in(closed).await, "admin");
    assert_eq!(
        owner
            .rpc("groups.delete", json!({"group_id": closed}))
            .await,
        denied(),
        "the former owner is an admin now"
    );
    // The former owner may now leave; the heir may not.
    assert_eq!(
        heir.rpc("groups.leave", json!({"group_id": closed})).await,
        Err("last superadmin needs a successor".into())
    );
    assert_eq!(
        owner
            .rpc("groups.leave", json!({"group_id": closed}))
            .await
            .unwrap()["state"],
        Value::Null
    );
    assert_eq!(
        owner.rpc("groups.leave", json!({"group_id": closed})).await,
        Err("not a member".into())
    );
    node.shutdown();
    node.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn role_rules_on_every_backend() {
    for backend in backends::all().await {
        role_rules(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_operations_on_every_backend() {
    for backend in backends::all().await {
        trusted_rules(&backend.url, backend.name).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_and_group_caps_hold() {
    for backend in backends::all().await {
        let node = start_on(&backend.url, |c| c.groups.max_groups_per_user = 2).await;
        let tag = backend.name;
        let mut a = player(&node, &format!("cap-a-{tag}")).await;
        let mut b = player(&node, &format!("cap-b-{tag}")).await;
        let mut c = player(&node, &format!("cap-c-{tag}")).await;
        let small = a
            .rpc(
                "groups.create",
                json!({"name": format!("Small {tag}"), "max_members": 2, "open": true}),
            )
            .await
            .unwrap()["group_id"]
            .as_u64()
            .unwrap();
        assert_eq!(
            b.trusted("join", json!({"group_id": small})).await.unwrap()["state"],
            "member"
        );
        assert_eq!(
            c.trusted("join", json!({"group_id": small})).await,
            Err("group full".into())
        );
        assert_eq!(
            a.on("add_member", small, &c.id.clone()).await,
            Err("group full".into())
        );
        a.rpc("groups.create", json!({"name": format!("Second {tag}")}))
            .await
            .unwrap();
        assert_eq!(
            a.rpc("groups.create", json!({"name": format!("Third {tag}")}))
                .await,
            Err("group limit reached".into())
        );
        let status = http(node.http_addr, "GET", "/status", None, None)
            .await
            .json();
        let text = status.to_string();
        assert!(text.contains("groups_full_refused"), "{text}");
        node.shutdown();
        node.wait().await;
    }
}
