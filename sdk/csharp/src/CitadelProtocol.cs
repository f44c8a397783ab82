// Wire constants and body codecs for the first-party kinds (seed 000's
// catalog: big-endian integers, u16-length UTF-8 strings, the position body
// as two little-endian f32). What it is: pure byte helpers, no I/O. What it
// is not: a full protocol model; application kinds (>= 100) are the game's.
using System;
using System.Text;

namespace Citadel
{
    /// <summary>A decoded kind-23 body.</summary>
    public sealed class RoomInfo
    {
        public ulong RoomId;
        public string Map;
        public string Mode;
    }

    /// <summary>A decoded kind-4 body.</summary>
    public sealed class RpcResponse
    {
        public ulong RequestId;
        public byte Status;
        public byte[] Payload;
        public bool IsOk { get { return Status == CitadelProtocol.RpcStatusOk; } }
    }

    /// <summary>Kinds and body codecs.</summary>
    public static class CitadelProtocol
    {
        public const ushort KindPosition = 1;
        public const ushort KindPeerPosition = 2;
        public const ushort KindRpcRequest = 3;
        public const ushort KindRpcResponse = 4;
        public const ushort KindAuth = 5;
        public const ushort KindAuthResult = 6;
        public const ushort KindTsyncHello = 7;
        public const ushort KindTsyncSnapshot = 8;
        public const ushort KindRoomCreate = 21;
        public const ushort KindRoomJoin = 22;
        public const ushort KindRoomJoined = 23;
        public const ushort KindRoomLeave = 24;
        public const ushort KindRoomMapReady = 25;
        /// <summary>First game-defined kind.</summary>
        public const ushort KindApplicationMin = 100;

        public const byte RpcStatusOk = 0;
        public const byte RpcStatusError = 1;
        public const int SenderIdBytes = 8;
        public const int PositionBytes = 8;

        /// <summary>Kind-1 body: x, y as little-endian f32.</summary>
        public static byte[] EncodePosition(float x, float y)
        {
            var body = new byte[PositionBytes];
            WriteF32Le(body, 0, x);
            WriteF32Le(body, 4, y);
            return body;
        }

        /// <summary>Decodes a kind-2 body (sender id, then the kind-1 body); false if malformed.</summary>
        public static bool TryDecodePeerPosition(byte[] body, out ulong senderId, out float x, out float y)
        {
            senderId = 0; x = 0; y = 0;
            if (body == null || body.Length != SenderIdBytes + PositionBytes) return false;
            senderId = ReadU64Be(body, 0);
            x = ReadF32Le(body, 8);
            y = ReadF32Le(body, 12);
            return true;
        }

        /// <summary>Kind-3 body: request id, method (u16 length + UTF-8), payload.</summary>
        public static byte[] EncodeRpcRequest(ulong requestId, string method, byte[] payload)
        {
            var name = Encoding.UTF8.GetBytes(method ?? "");
            if (name.Length > ushort.MaxValue) throw new ArgumentException("method longer than 65535 bytes");
            payload = payload ?? new byte[0];
            var body = new byte[10 + name.Length + payload.Length];
            WriteU64Be(body, 0, requestId);
            body[8] = (byte)(name.Length >> 8);
            body[9] = (byte)name.Length;
            Buffer.BlockCopy(name, 0, body, 10, name.Length);
            Buffer.BlockCopy(payload, 0, body, 10 + name.Length, payload.Length);
            return body;
        }

        /// <summary>Decodes a kind-4 body; null when shorter than its 9-byte header.</summary>
        public static RpcResponse DecodeRpcResponse(byte[] body)
        {
            if (body == null || body.Length < 9) return null;
            var payload = new byte[body.Length - 9];
            Buffer.BlockCopy(body, 9, payload, 0, payload.Length);
            return new RpcResponse { RequestId = ReadU64Be(body, 0), Status = body[8], Payload = payload };
        }

        /// <summary>Kind-21 body: the room name as u16 length + UTF-8.</summary>
        public static byte[] EncodeRoomCreate(string name)
        {
            var bytes = Encoding.UTF8.GetBytes(name ?? "");
            if (bytes.Length > ushort.MaxValue) throw new ArgumentException("room name longer than 65535 bytes");
            var body = new byte[2 + bytes.Length];
            body[0] = (byte)(bytes.Length >> 8);
            body[1] = (byte)bytes.Length;
            Buffer.BlockCopy(bytes, 0, body, 2, bytes.Length);
            return body;
        }

        /// <summary>Kinds 22, 24, 25: the 8-byte big-endian room id.</summary>
        public static byte[] EncodeRoomId(ulong roomId)
        {
            var body = new byte[8];
            WriteU64Be(body, 0, roomId);
            return body;
        }

        /// <summary>Reads the room id of a kind-24 body; false if shorter than 8 bytes.</summary>
        public static bool TryDecodeRoomId(byte[] body, out ulong roomId)
        {
            roomId = 0;
            if (body == null || body.Length < 8) return false;
            roomId = ReadU64Be(body, 0);
            return true;
        }

        /// <summary>Decodes a kind-23 body (room id, map, mode); null when malformed.</summary>
        public static RoomInfo DecodeRoomJoined(byte[] body)
        {
            if (body == null || body.Length < 8) return null;
            int at = 8;
            string map, mode;
            if (!TryReadString(body, ref at, out map) || !TryReadString(body, ref at, out mode)) return null;
            return new RoomInfo { RoomId = ReadU64Be(body, 0), Map = map, Mode = mode };
        }

        static bool TryReadString(byte[] body, ref int at, out string value)
        {
            value = null;
            if (body.Length - at < 2) return false;
            int len = (body[at] << 8) | body[at + 1];
            at += 2;
            if (body.Length - at < len) return false;
            try
            {
                value = new UTF8Encoding(false, true).GetString(body, at, len);
            }
            catch (ArgumentException)
            {
                return false;
            }
            at += len;
            return true;
        }

        public static void WriteU64Be(byte[] buf, int at, ulong v)
        {
            for (int i = 0; i < 8; i++) buf[at + i] = (byte)(v >> (56 - 8 * i));
        }

        public static ulong ReadU64Be(byte[] buf, int at)
        {
            ulong v = 0;
            for (int i = 0; i < 8; i++) v = (v << 8) | buf[at + i];
            return v;
        }

        static void WriteF32Le(byte[] buf, int at, float value)
        {
            var bytes = BitConverter.GetBytes(value);
            if (!BitConverter.IsLittleEndian) Array.Reverse(bytes);
            Buffer.BlockCopy(bytes, 0, buf, at, 4);
        }

        static float ReadF32Le(byte[] buf, int at)
        {
            var bytes = new byte[4];
            Buffer.BlockCopy(buf, at, bytes, 0, 4);
            if (!BitConverter.IsLittleEndian) Array.Reverse(bytes);
            return BitConverter.ToSingle(bytes, 0);
        }
    }
}
