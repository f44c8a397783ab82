// The C# binding's test program, run under Mono by scripts/test-ffi against
// the real `citadel` binary (game script crates/citadel-client-ffi/tests/game).
// Usage: mono CitadelTests.exe <ws_url> <quic_host:port> <dev-cert.pem> <closed_port>
// Same flow as the C test: A (WebSocket) and B (QUIC, pinned) join one room
// through CitadelRooms, A's position reaches B, CallRpc("ping") completes
// inside Poll, an NPC spawned by RPC sends snapshots to both after HELLO;
// plus the protocol codecs and the error paths. Exit code 0 on success.
using System;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Citadel;

static class CitadelTests
{
    static int checks;
    const ushort KindBig = 150;

    static void Check(bool condition, string what)
    {
        checks++;
        if (!condition) throw new Exception("FAIL: " + what);
    }

    sealed class Peer
    {
        public string Name;
        public CitadelClient Client;
        public CitadelRooms Rooms;
        public RoomInfo Room;
        public int Snapshots;
        public int Hellos;
        public float[] LastPeerPosition;
        public byte[] LastBig;

        // The application's single poll loop: rooms first, then game kinds.
        public void Pump()
        {
            Envelope env;
            while (Client.Poll(out env))
            {
                if (Rooms.Handle(env)) continue;
                if (env.Kind == KindBig) LastBig = env.Body;
                else if (env.Kind == CitadelProtocol.KindTsyncSnapshot) Snapshots++;
                else if (env.Kind == CitadelProtocol.KindTsyncHello) Hellos++;
                else if (env.Kind == CitadelProtocol.KindPeerPosition)
                {
                    ulong sender; float x, y;
                    if (CitadelProtocol.TryDecodePeerPosition(env.Body, out sender, out x, out y))
                        LastPeerPosition = new[] { x, y };
                }
            }
        }
    }

    static void PumpUntil(Func<bool> done, string what, params Peer[] peers)
    {
        var deadline = DateTime.UtcNow.AddSeconds(10);
        while (!done())
        {
            if (DateTime.UtcNow > deadline) throw new Exception("FAIL: timed out waiting for " + what);
            foreach (var p in peers) p.Pump();
            Thread.Sleep(2);
        }
        checks++;
    }

    static Peer Join(string name, CitadelClient client)
    {
        var auth = client.AuthenticateGuest();
        Check(auth.IsAccepted && auth.Status == CitadelAuthStatus.Guest, name + " is a guest");
        var peer = new Peer { Name = name, Client = client, Rooms = new CitadelRooms(client) };
        peer.Rooms.Joined += room =>
        {
            peer.Room = room;
            peer.Rooms.SendMapReady(room.RoomId);
        };
        peer.Rooms.JoinOrCreate("csharp-room");
        return peer;
    }

    static void Codecs()
    {
        var pos = CitadelProtocol.EncodePosition(125.0f, 64.0f);
        Check(pos.Length == 8 && pos[0] == 0x00 && pos[3] == 0x42 && pos[7] == 0x42, "position is two LE f32");
        var rpc = CitadelProtocol.EncodeRpcRequest(0x0102, "ping", new byte[] { 9 });
        Check(rpc.Length == 15 && rpc[6] == 1 && rpc[7] == 2 && rpc[9] == 4 && rpc[14] == 9, "rpc request layout");
        Check(CitadelProtocol.DecodeRpcResponse(new byte[8]) == null, "short rpc response refused");
        var joined = new byte[] { 0, 0, 0, 0, 0, 0, 0, 7, 0, 1, (byte)'m', 0, 0 };
        var room = CitadelProtocol.DecodeRoomJoined(joined);
        Check(room != null && room.RoomId == 7 && room.Map == "m" && room.Mode == "", "room joined decodes");
        Check(CitadelProtocol.DecodeRoomJoined(new byte[] { 0, 0, 0, 0, 0, 0, 0, 7, 0, 5 }) == null,
            "overrunning map refused");
        var create = CitadelProtocol.EncodeRoomCreate("lobby");
        Check(create.Length == 7 && create[1] == 5, "room create layout");
    }

    static void ErrorPaths(string closedPort)
    {
        try
        {
            CitadelClient.ConnectWebSocket("ws://127.0.0.1:" + closedPort + "/");
            Check(false, "refused connect throws");
        }
        catch (CitadelException e)
        {
            Check(e.Status == CitadelStatus.Connect && e.Message.Contains("connect failed"), "connect error: " + e.Message);
        }
        try
        {
            CitadelClient.ConnectQuic("127.0.0.1:" + closedPort, Encoding.ASCII.GetBytes("no pem here"));
            Check(false, "bad pin throws");
        }
        catch (CitadelException e)
        {
            Check(e.Status == CitadelStatus.InvalidArgument, "bad pem is an invalid argument");
        }
    }

    static int Main(string[] args)
    {
        if (args.Length != 4)
        {
            Console.Error.WriteLine("usage: CitadelTests.exe <ws_url> <quic_addr> <cert.pem> <closed_port>");
            return 2;
        }
        try
        {
            Codecs();
            ErrorPaths(args[3]);

            var a = Join("A", CitadelClient.ConnectWebSocket(args[0]));
            var b = Join("B", CitadelClient.ConnectQuic(args[1], File.ReadAllBytes(args[2])));
            PumpUntil(() => a.Room != null && b.Room != null, "both joined", a, b);
            Check(a.Room.RoomId == b.Room.RoomId && a.Room.Map == "csharp-room", "same room, map is the name");

            // Position: datagram on QUIC, may be lost: resend until seen.
            var deadline = DateTime.UtcNow.AddSeconds(10);
            while (b.LastPeerPosition == null && DateTime.UtcNow < deadline)
            {
                a.Client.Send(CitadelProtocol.KindPosition, CitadelProtocol.EncodePosition(125.0f, 64.0f), reliable: false);
                for (int i = 0; i < 50 && b.LastPeerPosition == null; i++) { a.Pump(); b.Pump(); Thread.Sleep(2); }
            }
            Check(b.LastPeerPosition != null && b.LastPeerPosition[0] == 125.0f && b.LastPeerPosition[1] == 64.0f,
                "B received A's position");

            // A 100 000-byte application envelope is relayed sender-tagged; it
            // is larger than Poll's initial 64 KiB buffer, which must grow.
            var big = new byte[100000];
            for (int i = 0; i < big.Length; i++) big[i] = (byte)(i * 7);
            Check(a.Client.Send(KindBig, big, reliable: true), "big send queued");
            PumpUntil(() => b.LastBig != null, "big envelope", a, b);
            Check(b.LastBig.Length == big.Length + CitadelProtocol.SenderIdBytes, "big body length");
            bool same = true;
            for (int i = 0; i < big.Length; i++) same &= b.LastBig[i + CitadelProtocol.SenderIdBytes] == big[i];
            Check(same, "big body intact after the buffer grew");

            Task<byte[]> ping = a.Client.CallRpc("ping");
            PumpUntil(() => ping.IsCompleted, "ping", a, b);
            Check(ping.Status == TaskStatus.RanToCompletion && Encoding.UTF8.GetString(ping.Result) == "pong", "ping -> pong");

            Task<byte[]> unknown = a.Client.CallRpc("no_such_method");
            PumpUntil(() => unknown.IsCompleted, "unknown rpc", a, b);
            Check(unknown.IsFaulted && unknown.Exception.InnerException is CitadelRpcException, "unknown RPC faults");

            Task<byte[]> spawn = a.Client.CallRpc("spawn_npc");
            PumpUntil(() => spawn.IsCompleted, "spawn_npc", a, b);
            Check(spawn.Status == TaskStatus.RanToCompletion, "spawn_npc succeeded");

            a.Client.Send(CitadelProtocol.KindTsyncHello, new byte[0]);
            b.Client.Send(CitadelProtocol.KindTsyncHello, new byte[0]);
            PumpUntil(() => a.Hellos > 0 && b.Hellos > 0 && a.Snapshots >= 3 && b.Snapshots >= 3, "snapshots", a, b);

            a.Client.Dispose();
            a.Client.Dispose();
            Check(!a.Client.IsConnected, "disposed client is not connected");
            b.Client.Dispose();
            Console.WriteLine("CitadelTests: ok ({0} checks; snapshots A={1} B={2})", checks, a.Snapshots, b.Snapshots);
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine(e);
            return 1;
        }
    }
}
