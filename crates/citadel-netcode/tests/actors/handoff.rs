//! Ownership handoff by game logic (§3.6): the epoch is bumped, the input
//! sequence restarts, input buffered under the old owner is discarded,
//! ROLE Handoff reaches the old owner, the new owner and every peer that
//! sees the object; both owners' views stay consistent across a handoff in
//! the middle of a stream; owner 0 returns the object to the server, and
//! an owner that leaves gives its objects back.

use citadel_netcode::actors::{InputRefusal, NpcSpawn, OwnerRefusal, Patrol, Refusal, WorldKey};
use citadel_wire::tsync::{InputFrame, Role, RoleChange, RoleEvent};

use super::harness::{Stage, Zone, at, clean};
use super::{PREDICTED, predicted_config};

fn frame(object_id: u32, epoch: u32, input_seq: u32, vx: f32) -> InputFrame {
    InputFrame {
        input_seq,
        sim_tick: input_seq,
        dt: 0.05,
        object_id,
        ownership_epoch: epoch,
        move_velocity: [vx, 0.0, 0.0],
        ..InputFrame::default()
    }
}

/// Within one quantization step (1/8 cm).
fn near(got: [f32; 3], want: [f32; 3]) -> bool {
    got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 0.125)
}

/// The ROLE frames `participant_id` received for `object_id` since its
/// log was last taken, and empties the log.
fn roles(stage: &mut Stage, participant_id: u64, object_id: u32) -> Vec<RoleChange> {
    let peer = stage.peer(participant_id);
    let roles = peer
        .roles()
        .into_iter()
        .filter(|r| r.object_id == object_id)
        .collect();
    peer.take_log();
    roles
}

/// Clients 1-3 in the lobby (1 with a predicted avatar), 4 in the arena,
/// and a patrolling lobby NPC.
fn stage() -> (Stage, u32, u32) {
    let mut stage = Stage::with_clients(
        predicted_config(),
        clean(30.0),
        &[
            (1, Zone::Lobby),
            (2, Zone::Lobby),
            (3, Zone::Lobby),
            (4, Zone::Arena),
        ],
    );
    let avatar = stage.presence(1, PREDICTED, at(0.0, 0.0)).unwrap();
    let npc = stage
        .npc(NpcSpawn {
            archetype: 9,
            position: [0.0, 500.0, 0.0],
            world: WorldKey::Place(Zone::Lobby),
            patrol: Some(Patrol {
                waypoints: vec![[0.0, 100_000.0, 0.0]],
                speed: 300.0,
            }),
        })
        .unwrap();
    stage.settle();
    for pid in 1..=4 {
        stage.peer(pid).take_log();
    }
    (stage, avatar, npc)
}

#[test]
fn a_handoff_bumps_the_epoch_restarts_the_sequence_and_tells_owners_and_peers() {
    let (mut stage, _, npc) = stage();
    stage
        .apply(|s, now| s.handle_set_owner(npc, 2, now))
        .unwrap();
    stage.settle();
    for pid in [1, 2, 3] {
        let got = roles(&mut stage, pid, npc);
        assert_eq!(got.len(), 1, "one Handoff for {pid}");
        let r = got[0];
        assert_eq!(
            (r.role, r.owner, r.ownership_epoch, r.event),
            (Role::OwnerPredicted, 2, 1, RoleEvent::Handoff)
        );
    }
    assert!(
        roles(&mut stage, 4, npc).is_empty(),
        "another place hears nothing"
    );

    // The new owner drives it; its patrol pauses.
    let still = stage.server.npc_transform(npc).unwrap().position;
    let out = stage.input(2, (1..=4).map(|s| frame(npc, 1, s, 1_000.0)).collect());
    assert_eq!(out.applied, 4);
    // 6 waits for 5, which never comes under this owner.
    assert_eq!(stage.input(2, vec![frame(npc, 1, 6, 1_000.0)]).applied, 0);
    stage.run(12);
    let moved = stage.server.npc_transform(npc).unwrap().position;
    assert_eq!(moved, [still[0] + 200.0, still[1], still[2]], "input only");
    let p2 = stage.peer(2).position(npc).unwrap();
    let p3 = stage.peer(3).position(npc).unwrap();
    assert_eq!(p2, p3, "owner and peer agree");
    assert!(near(p2, moved), "{p2:?} is the server's {moved:?}");

    // Handoff mid-stream to 3: epoch 2, sequence from 1, 2's buffered 6 gone.
    stage
        .apply(|s, now| s.handle_set_owner(npc, 3, now))
        .unwrap();
    let out = stage.input(2, vec![frame(npc, 1, 5, 1_000.0)]);
    assert_eq!(
        out.refused(InputRefusal::NoPresence),
        1,
        "the old owner (no avatar of its own) is out"
    );
    let out = stage.input(3, vec![frame(npc, 1, 1, -1_000.0)]);
    assert_eq!(
        out.refused(InputRefusal::WrongEpoch),
        1,
        "the old epoch is out"
    );
    let out = stage.input(
        3,
        vec![frame(npc, 2, 1, -1_000.0), frame(npc, 2, 2, -1_000.0)],
    );
    assert_eq!((out.accepted, out.applied), (2, 2), "restarted at 1");
    let out = stage.input(3, vec![frame(npc, 2, 5, -1_000.0)]);
    assert_eq!(out.applied, 0);
    let out = stage.input(
        3,
        vec![frame(npc, 2, 3, -1_000.0), frame(npc, 2, 4, -1_000.0)],
    );
    assert_eq!(
        out.applied, 3,
        "3, 4 and its own buffered 5; 2's 6 was discarded"
    );
    stage.settle();
    stage.run(6);
    let own = stage
        .peer(3)
        .snapshots()
        .into_iter()
        .flat_map(|s| s.updates)
        .filter(|u| u.object_id == npc)
        .filter_map(|u| u.last_input_seq)
        .max();
    assert_eq!(own, Some(5), "the new owner's watermark restarted");
    for pid in [1, 2, 3] {
        let r = *roles(&mut stage, pid, npc).first().expect("a Handoff");
        assert_eq!(
            (r.owner, r.ownership_epoch, r.event),
            (3, 2, RoleEvent::Handoff),
            "participant {pid}"
        );
    }
    let now = stage.server.npc_transform(npc).unwrap().position;
    assert_eq!(now, [moved[0] - 250.0, moved[1], moved[2]]);
    let seen = stage.peer(3).position(npc).unwrap();
    assert!(near(seen, now), "{seen:?} is the server's {now:?}");
    for pid in [1, 2] {
        assert_eq!(
            stage.peer(pid).position(npc),
            Some(seen),
            "{pid} is consistent"
        );
    }

    // Owner 0: back to the server, the patrol resumes, input is refused.
    stage
        .apply(|s, now| s.handle_set_owner(npc, 0, now))
        .unwrap();
    let out = stage.input(3, vec![frame(npc, 2, 6, 1_000.0)]);
    assert_eq!(out.refused(InputRefusal::NoPresence), 1);
    stage.settle();
    let r = *roles(&mut stage, 3, npc).first().expect("a Handoff");
    assert_eq!(
        (r.role, r.owner, r.ownership_epoch),
        (Role::ServerSimulated, 0, 3)
    );
    let walked = stage.server.npc_transform(npc).unwrap().position;
    assert!(walked[1] > now[1], "the patrol resumed");
}

#[test]
fn handoff_refusals_and_an_avatar_handed_away() {
    let (mut stage, avatar, npc) = stage();
    assert_eq!(
        stage.apply(|s, now| s.handle_set_owner(9_999, 2, now)),
        Err(Refusal::Owner(OwnerRefusal::UnknownObject))
    );
    assert_eq!(
        stage.apply(|s, now| s.handle_set_owner(npc, 4, now)),
        Err(Refusal::Owner(OwnerRefusal::OwnerNotHere)),
        "4 is in another place"
    );
    assert_eq!(
        stage.apply(|s, now| s.handle_set_owner(npc, 77, now)),
        Err(Refusal::Owner(OwnerRefusal::OwnerNotHere)),
        "77 never opted in"
    );
    // 1's avatar handed to 2: 1 can no longer move or refresh it.
    stage
        .apply(|s, now| s.handle_set_owner(avatar, 2, now))
        .unwrap();
    let out = stage.input(1, vec![frame(avatar, 2, 1, 1_000.0)]);
    assert_eq!(out.refused(InputRefusal::NotOwner), 1);
    assert_eq!(
        stage.presence(1, PREDICTED, at(900.0, 0.0)),
        Err(Refusal::State(
            citadel_netcode::actors::StateRefusal::NotOwner
        ))
    );
    let out = stage.input(2, vec![frame(avatar, 2, 1, 1_000.0)]);
    assert_eq!(out.applied, 1, "2 drives it under epoch 2");
    // 2 also takes the NPC, then leaves: the NPC returns to the server; the
    // avatar stays 1's presence object and returns to the server too.
    stage
        .apply(|s, now| s.handle_set_owner(npc, 2, now))
        .unwrap();
    stage.settle();
    stage.peer(3).take_log();
    stage.disconnect(2);
    stage.settle();
    assert_eq!(stage.server.owner_of(npc), Some(0));
    assert_eq!(stage.server.owner_of(avatar), Some(0));
    let got = stage.peer(3).roles();
    assert_eq!(got.len(), 2, "one Handoff each: {got:?}");
    assert!(
        got.iter()
            .all(|r| r.owner == 0 && r.event == RoleEvent::Handoff)
    );
    // Given back to 1, its avatar moves by 1's input again from sequence 1.
    stage
        .apply(|s, now| s.handle_set_owner(avatar, 1, now))
        .unwrap();
    let out = stage.input(1, vec![frame(avatar, 4, 1, 1_000.0)]);
    assert_eq!(out.applied, 1);
}

#[test]
fn one_bundle_moves_every_object_its_sender_owns() {
    let (mut stage, avatar, npc) = stage();
    stage
        .apply(|s, now| s.handle_set_owner(npc, 1, now))
        .unwrap();
    let npc_at = stage.server.npc_transform(npc).unwrap().position;
    // Interleaved frames for the avatar (epoch 1) and the handed NPC
    // (epoch 1), the avatar's last: both run their contiguous sequence.
    let frames = (1..=3)
        .flat_map(|s| [frame(npc, 1, s, -1_000.0), frame(avatar, 1, s, 1_000.0)])
        .collect();
    let out = stage.input(1, frames);
    assert_eq!((out.accepted, out.applied, out.unserved), (6, 6, 0));
    let moved = stage.server.npc_transform(npc).unwrap().position;
    assert!(
        near(moved, [npc_at[0] - 150.0, npc_at[1], npc_at[2]]),
        "the NPC took its 3 × 50 ms at -1 000 cm/s at once: {moved:?}"
    );
    stage.run(12);
    let seen = stage.peer(1).position(avatar).unwrap();
    assert!(near(seen, [150.0, 0.0, 0.0]), "{seen:?}");
    let acks = stage
        .peer(1)
        .take_applied()
        .last()
        .map(|a| a.input_acks.clone())
        .unwrap();
    assert!(
        acks.contains(&(avatar, 3)) && acks.contains(&(npc, 3)),
        "each echoes its own last_input_seq: {acks:?}"
    );
}
