-- Citadel default game: the server logic `cargo run --release` serves.
--
-- This file is the entry point (`runtime.scripts_dir` / main.lua). Its
-- top-level code runs once at startup (and again on hot reload) and
-- registers handlers; the handlers then run on the node's script thread,
-- one at a time, each under a deadline (`runtime.deadline_ms`, 100 ms by
-- default) and the VM memory cap. A handler that errors, loops or runs out
-- of memory fails only that call. The full reference is docs/scripting.md.
--
-- Available libraries: string, table, math, plus `require("name")` for
-- modules under this directory (`require("lib.util")` loads lib/util.lua).

-- RPC: `fn(ctx, body) -> string`. ctx = { sender, method, user_id? }.
-- The returned string is the reply, sent to the caller only.
citadel.on_rpc("ping", function(ctx, body)
    return "pong"
end)

citadel.on_rpc("echo", function(ctx, body)
    return body
end)

-- Join / leave: `fn(ctx)`, ctx = { sender, user_id? } (user_id is absent
-- for guests). They never block the connection.
citadel.on_join(function(ctx)
    citadel.log("participant " .. ctx.sender .. " joined" ..
        (ctx.user_id and (" as " .. ctx.user_id) or " as a guest"))
end)

citadel.on_leave(function(ctx)
    citadel.log("participant " .. ctx.sender .. " left")
end)

-- Demo arena (GET /demo, docs/demo.md): a patrolling NPC in each demo room.
-- A demo page sends DEMO_HELLO (kind 150, body = its room name) after it
-- joined; the first hello from a room whose name starts with "demo" spawns
-- one server-owned NPC there that walks a rectangle on the server tick.
-- At most MAX_DEMO_ROOMS rooms get one (the table never grows past that).
local DEMO_HELLO = 150
local MAX_DEMO_ROOMS = 256
local demo_npcs = {}
local demo_rooms = 0

citadel.on_message(DEMO_HELLO, function(ctx, body)
    local room = ctx.room_id
    if room == nil or demo_npcs[room] ~= nil then return end
    if string.sub(body, 1, 4) ~= "demo" or demo_rooms >= MAX_DEMO_ROOMS then return end
    demo_npcs[room] = citadel.spawn_actor{
        archetype = 1, x = -600, y = -350, z = 0, room = room,
        ai = "patrol", speed = 250,
        waypoints = { {-600, -350, 0}, {600, -350, 0}, {600, 350, 0}, {-600, 350, 0} },
    }
    demo_rooms = demo_rooms + 1
    citadel.log("demo NPC " .. demo_npcs[room] .. " patrols room " .. room)
end)

-- Everything below is a commented example of the remaining hooks and host
-- functions. Uncomment what your game needs.

-- Application messages (kinds >= 100). With a handler, the kind goes to the
-- script instead of being relayed to room peers.
-- ctx = { sender, kind, user_id?, room_id? (when in a room) }.
--
-- citadel.on_message(100, function(ctx, body)
--     -- to everyone in the sender's room (or the default dimension), except the sender:
--     citadel.broadcast(101, body)
--     -- to one participant; a 4th argument `true` uses the unreliable lane:
--     citadel.send(ctx.sender, 102, "ack")
-- end)

-- Rooms: label a newly created named room. `name` is the matchmaking key the
-- client asked for, not the map. Return a map name, a table, or nil (default:
-- the name is the map).
--
-- citadel.on_room_create(function(ctx, name)
--     return { map = "ForestArena", mode = "ffa", max_players = 8, open = true }
-- end)

-- Rooms: admission to an existing room. Only `true` admits; an error or a
-- timeout rejects.
--
-- citadel.on_room_join(function(ctx, room_id)
--     return true
-- end)

-- Game loop: runs `runtime.tick_hz` times a second (0 = off), first
-- server-wide as fn(dt), then once per live room as fn(dt, room_id).
-- Inside a room tick, citadel.broadcast reaches that room's members.
--
-- local npc
-- citadel.on_tick(function(dt, room_id)
--     if room_id ~= nil then return end
--     if not npc then
--         npc = { id = citadel.spawn_actor{ archetype = 0, x = 0, y = 0, z = 302 }, x = 0 }
--     end
--     npc.x = npc.x + 100 * dt
--     citadel.move_actor(npc.id, npc.x, 0, 302, 100, 0, 0)
--     -- citadel.despawn_actor(npc.id) removes it.
-- end)

-- Predicted movement: judge each input frame of a predicted avatar
-- (transform_sync.predicted_authoritative_archetypes). One call per input
-- bundle under runtime.on_input_budget_ms (2 ms); any failure keeps the
-- built-in movement. frame = { seq, dt, move, position, velocity,
-- previous = { position, velocity }, fire? }; return nil/true (accept),
-- false (veto: consumed, not moved) or { position = {x, y, z}, velocity? }.
--
-- citadel.on_input(function(ctx, frame)
--     if frame.position.z < 0 then
--         return { position = { frame.position.x, frame.position.y, 0 } }
--     end
-- end)

-- Logging: citadel.log(message [, level]) with level trace/debug/info/warn/error.
citadel.log("default game loaded: ping, echo, demo NPC")
