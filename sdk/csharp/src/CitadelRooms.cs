// CitadelRooms: the room workflow (kinds 21-25) as seed 003's Unity tab
// shows it. What it is: senders for JoinOrCreate / Join / Leave /
// SendMapReady and a Handle method the application's single poll loop
// forwards every envelope to; it raises Joined (kind 23) and Left (kind 24).
// What it is not: a poller; it never calls Poll itself. Call order:
// subscribe Joined -> JoinOrCreate or Join -> (Joined fires from Handle) ->
// load the map -> SendMapReady(room.RoomId).
using System;

namespace Citadel
{
    public sealed class CitadelRooms
    {
        readonly CitadelClient client;

        /// <summary>Admitted to a room: load room.Map, then call SendMapReady(room.RoomId).</summary>
        public event Action<RoomInfo> Joined;

        /// <summary>Removed from (or left) the room with this id.</summary>
        public event Action<ulong> Left;

        /// <summary>The last room joined, or null.</summary>
        public RoomInfo Current { get; private set; }

        public CitadelRooms(CitadelClient client)
        {
            if (client == null) throw new ArgumentNullException("client");
            this.client = client;
        }

        /// <summary>Creates the room named <paramref name="name"/> (a matchmaking key, not the map) or joins it.</summary>
        public void JoinOrCreate(string name)
        {
            SendOrThrow(CitadelProtocol.KindRoomCreate, CitadelProtocol.EncodeRoomCreate(name));
        }

        /// <summary>Joins a known room by id; a refusal produces no reply.</summary>
        public void Join(ulong roomId)
        {
            SendOrThrow(CitadelProtocol.KindRoomJoin, CitadelProtocol.EncodeRoomId(roomId));
        }

        /// <summary>Leaves the room.</summary>
        public void Leave(ulong roomId)
        {
            SendOrThrow(CitadelProtocol.KindRoomLeave, CitadelProtocol.EncodeRoomId(roomId));
        }

        /// <summary>Tells the server the map of Joined is loaded.</summary>
        public void SendMapReady(ulong roomId)
        {
            SendOrThrow(CitadelProtocol.KindRoomMapReady, CitadelProtocol.EncodeRoomId(roomId));
        }

        /// <summary>Feed every polled envelope here; returns true when it was a room frame it handled.</summary>
        public bool Handle(Envelope envelope)
        {
            return Handle(envelope.Kind, envelope.Body);
        }

        /// <summary>As Handle(Envelope).</summary>
        public bool Handle(ushort kind, byte[] body)
        {
            if (kind == CitadelProtocol.KindRoomJoined)
            {
                var room = CitadelProtocol.DecodeRoomJoined(body);
                if (room == null) return false;
                Current = room;
                var joined = Joined;
                if (joined != null) joined(room);
                return true;
            }
            if (kind == CitadelProtocol.KindRoomLeave)
            {
                ulong roomId;
                if (!CitadelProtocol.TryDecodeRoomId(body, out roomId)) return false;
                if (Current != null && Current.RoomId == roomId) Current = null;
                var left = Left;
                if (left != null) left(roomId);
                return true;
            }
            return false;
        }

        void SendOrThrow(ushort kind, byte[] body)
        {
            if (!client.Send(kind, body, true))
                throw new CitadelException(CitadelStatus.Again, "send queue full: poll and retry");
        }
    }
}
