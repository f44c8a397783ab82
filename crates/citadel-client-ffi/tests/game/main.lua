-- Game script for the C and C# binding tests (scripts/test-ffi): the
-- default `ping`, plus `spawn_npc`, which spawns a patrolling NPC in the
-- caller's room so transform-sync snapshots carry a moving object.
citadel.on_rpc("ping", function(ctx, body)
    return "pong"
end)

citadel.on_rpc("spawn_npc", function(ctx, body)
    local id = citadel.spawn_actor{
        archetype = 7,
        x = 0, y = 0, z = 0,
        ai = "patrol",
        waypoints = { { 0, 0, 0 }, { 1000, 0, 0 } },
        speed = 300,
    }
    return tostring(id)
end)
