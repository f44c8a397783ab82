// CitadelClient: one realtime connection over the native library.
// What it is: connect (WebSocket, QUIC pinned or insecure-dev), the
// handshake, Send, the single Poll loop, and CallRpc correlated inside Poll
// (the C ABI leaves correlation to this layer). What it is not: thread-safe
// for several pollers or a background reader: call Poll from one place
// (Unity: Update) until it returns false, every frame. Call order:
// Connect* -> Authenticate* -> Send / CallRpc / Poll -> Dispose.
using System;
using System.Collections.Generic;
using System.Text;
using System.Threading.Tasks;

namespace Citadel
{
    /// <summary>A native call failed; Status is the C ABI code, Message the library's text.</summary>
    public sealed class CitadelException : Exception
    {
        public CitadelStatus Status { get; private set; }

        public CitadelException(CitadelStatus status, string message)
            : base(string.Format("{0}: {1}", status, message))
        {
            Status = status;
        }
    }

    /// <summary>The server answered an RPC with an error status.</summary>
    public sealed class CitadelRpcException : Exception
    {
        public ulong RequestId { get; private set; }
        public string ServerMessage { get; private set; }

        public CitadelRpcException(ulong requestId, string serverMessage)
            : base(string.Format("rpc {0} failed: {1}", requestId, serverMessage))
        {
            RequestId = requestId;
            ServerMessage = serverMessage;
        }
    }

    /// <summary>The handshake outcome.</summary>
    public struct AuthResult
    {
        public CitadelAuthStatus Status;
        /// <summary>The account id when Authenticated, else empty.</summary>
        public string UserId;
        /// <summary>The coarse reason class when Rejected (AUTH_REASON_*).</summary>
        public byte Reason;
        public bool IsAccepted { get { return Status != CitadelAuthStatus.Rejected; } }
    }

    /// <summary>A received envelope.</summary>
    public struct Envelope
    {
        public ushort Kind;
        public byte[] Body;
    }

    /// <summary>One connection; see the file header for the call order.</summary>
    public sealed class CitadelClient : IDisposable
    {
        const int InitialBuffer = 64 * 1024;

        readonly CitadelHandle handle;
        readonly Dictionary<ulong, TaskCompletionSource<byte[]>> pendingRpcs =
            new Dictionary<ulong, TaskCompletionSource<byte[]>>();
        byte[] buffer = new byte[InitialBuffer];
        ulong nextRequestId = 1;

        /// <summary>False once Poll observed the end of the connection.</summary>
        public bool IsConnected { get; private set; }

        /// <summary>Why the connection ended (set when IsConnected turns false).</summary>
        public string DisconnectReason { get; private set; }

        CitadelClient(CitadelHandle handle)
        {
            this.handle = handle;
            IsConnected = true;
        }

        static void CheckAbi()
        {
            var version = CitadelNative.citadel_client_abi_version();
            if (version != CitadelNative.AbiVersion)
                throw new CitadelException(CitadelStatus.Internal,
                    string.Format("native library ABI {0}, binding expects {1}", version, CitadelNative.AbiVersion));
        }

        static CitadelClient Wrap(CitadelStatus status, CitadelHandle handle)
        {
            if (status != CitadelStatus.Ok)
            {
                var message = CitadelNative.LastErrorMessage();
                handle.Dispose();
                throw new CitadelException(status, message);
            }
            return new CitadelClient(handle);
        }

        /// <summary>Opens a WebSocket, e.g. "ws://127.0.0.1:7352/". Blocks until connected (10 s at most).</summary>
        public static CitadelClient ConnectWebSocket(string url)
        {
            CheckAbi();
            CitadelHandle handle;
            var status = CitadelNative.citadel_client_connect_websocket(CitadelNative.CString(url), out handle);
            return Wrap(status, handle);
        }

        /// <summary>Opens QUIC to "host:port", accepting only the certificate(s) in the PEM text (e.g. the node's dev-cert.pem).</summary>
        public static CitadelClient ConnectQuic(string addr, byte[] pinnedCertificatePem)
        {
            CheckAbi();
            if (pinnedCertificatePem == null) throw new ArgumentNullException("pinnedCertificatePem");
            CitadelHandle handle;
            var status = CitadelNative.citadel_client_connect_quic_pinned(
                CitadelNative.CString(addr), pinnedCertificatePem, (UIntPtr)pinnedCertificatePem.Length, out handle);
            return Wrap(status, handle);
        }

        /// <summary>Opens QUIC to "host:port" accepting any certificate. Development only.</summary>
        public static CitadelClient ConnectQuicInsecure(string addr)
        {
            CheckAbi();
            CitadelHandle handle;
            var status = CitadelNative.citadel_client_connect_quic(CitadelNative.CString(addr), null, true, out handle);
            return Wrap(status, handle);
        }

        /// <summary>Guest handshake (empty KIND_AUTH). Blocks until the result (10 s at most).</summary>
        public AuthResult AuthenticateGuest()
        {
            return Authenticate(null);
        }

        /// <summary>Handshake with a session access token (null or empty: guest). The token is not kept.</summary>
        public AuthResult Authenticate(string token)
        {
            var tokenBytes = string.IsNullOrEmpty(token) ? null : Encoding.UTF8.GetBytes(token);
            var user = new byte[256];
            CitadelAuthStatus status;
            UIntPtr userLen;
            byte reason;
            var result = CitadelNative.citadel_client_authenticate(handle, tokenBytes,
                (UIntPtr)(tokenBytes == null ? 0 : tokenBytes.Length), out status, user, (UIntPtr)user.Length,
                out userLen, out reason);
            Check(result);
            var len = Math.Min((int)userLen, user.Length);
            return new AuthResult { Status = status, UserId = Encoding.UTF8.GetString(user, 0, len), Reason = reason };
        }

        /// <summary>
        /// Queues one envelope (the body is copied). reliable=false sends a
        /// datagram on QUIC (WebSocket is always reliable). Returns false when
        /// the native send queue is full (poll, then retry); throws on other errors.
        /// </summary>
        public bool Send(ushort kind, byte[] body, bool reliable = true)
        {
            body = body ?? new byte[0];
            var status = CitadelNative.citadel_client_send(handle, kind, body, (UIntPtr)body.Length, reliable);
            if (status == CitadelStatus.Again) return false;
            Check(status);
            return true;
        }

        /// <summary>
        /// Calls a server RPC. The task completes inside a later Poll call (so
        /// keep polling); it faults with CitadelRpcException on an error status
        /// and with CitadelException if the connection ends first.
        /// </summary>
        public Task<byte[]> CallRpc(string method, byte[] payload = null)
        {
            var id = nextRequestId++;
            var body = CitadelProtocol.EncodeRpcRequest(id, method, payload);
            var tcs = new TaskCompletionSource<byte[]>(TaskCreationOptions.RunContinuationsAsynchronously);
            if (!Send(CitadelProtocol.KindRpcRequest, body, true))
                throw new CitadelException(CitadelStatus.Again, "send queue full: poll and retry");
            pendingRpcs[id] = tcs;
            return tcs.Task;
        }

        /// <summary>
        /// The single poll loop: returns true with the next received envelope,
        /// false when nothing is waiting or the connection has ended (then
        /// IsConnected is false). RPC responses awaited by CallRpc are
        /// consumed here and never returned. Never blocks.
        /// </summary>
        public bool Poll(out Envelope envelope)
        {
            envelope = default(Envelope);
            while (IsConnected)
            {
                ushort kind;
                UIntPtr len;
                bool truncated;
                var status = CitadelNative.citadel_client_poll(handle, out kind, buffer, (UIntPtr)buffer.Length,
                    out len, out truncated);
                if (status == CitadelStatus.Again) return false;
                if (status == CitadelStatus.Disconnected)
                {
                    Ended(LastError);
                    return false;
                }
                Check(status);
                if (truncated)
                {
                    // The envelope stays queued natively: grow and poll again.
                    buffer = new byte[(int)len];
                    continue;
                }
                var body = new byte[(int)len];
                Buffer.BlockCopy(buffer, 0, body, 0, body.Length);
                if (kind == CitadelProtocol.KindRpcResponse && CompleteRpc(body)) continue;
                envelope = new Envelope { Kind = kind, Body = body };
                return true;
            }
            return false;
        }

        bool CompleteRpc(byte[] body)
        {
            var response = CitadelProtocol.DecodeRpcResponse(body);
            TaskCompletionSource<byte[]> tcs;
            if (response == null || !pendingRpcs.TryGetValue(response.RequestId, out tcs)) return false;
            pendingRpcs.Remove(response.RequestId);
            if (response.IsOk) tcs.TrySetResult(response.Payload);
            else tcs.TrySetException(new CitadelRpcException(response.RequestId,
                Encoding.UTF8.GetString(response.Payload)));
            return true;
        }

        void Ended(string reason)
        {
            IsConnected = false;
            DisconnectReason = reason;
            foreach (var tcs in pendingRpcs.Values)
                tcs.TrySetException(new CitadelException(CitadelStatus.Disconnected, reason));
            pendingRpcs.Clear();
        }

        /// <summary>The handle's last error (why it ended, a failed queued send...).</summary>
        public string LastError
        {
            get
            {
                var buf = new byte[512];
                var n = (int)CitadelNative.citadel_client_last_error(handle, buf, (UIntPtr)buf.Length);
                return Encoding.UTF8.GetString(buf, 0, n);
            }
        }

        void Check(CitadelStatus status)
        {
            if (status == CitadelStatus.Ok) return;
            var message = CitadelNative.LastErrorMessage();
            if (status == CitadelStatus.Disconnected && IsConnected) Ended(message);
            throw new CitadelException(status, message);
        }

        /// <summary>Closes gracefully (2 s at most) and frees the native handle; safe to call twice.</summary>
        public void Dispose()
        {
            if (IsConnected) Ended("disposed");
            handle.Dispose();
        }
    }
}
