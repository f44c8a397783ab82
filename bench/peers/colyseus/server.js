// Colyseus peer for citadel-load (`--target colyseus`): one relay room type.
//
// What it is: the smallest idiomatic Colyseus 0.18 server that does what the
// relay-fanout scenario asks of Citadel: clients join rooms by key
// (`joinOrCreate("relay", { room: "<key>" })`, filterBy room), each message
// "p" is broadcast to the other members of the room unchanged (no sender tag:
// the bots' payload already names the sender, so Colyseus does less work than
// Citadel here). What it is not: a schema/state-sync benchmark (no state).
//
// Call order: `node server.js` with PORT (default 2567) and HOST (default
// 127.0.0.1) in the environment; citadel-load spawns it, waits for the port,
// and kills it at the end. Installed by bench/peers/colyseus/install.sh.
const { Server, Room } = require("@colyseus/core");
const { WebSocketTransport } = require("@colyseus/ws-transport");

class RelayRoom extends Room {
  onCreate() {
    this.autoDispose = true;
    this.onMessage("p", (client, message) => {
      this.broadcast("p", message, { except: client });
    });
  }
}

const port = Number(process.env.PORT || 2567);
const host = process.env.HOST || "127.0.0.1";
const server = new Server({ transport: new WebSocketTransport(), greet: false });
server.define("relay", RelayRoom).filterBy(["room"]);
server.listen(port, host).then(() => {
  console.log(`colyseus relay peer listening on ${host}:${port}`);
});
