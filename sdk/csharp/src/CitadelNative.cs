// P/Invoke declarations over the Citadel C ABI (include/citadel.h of
// crates/citadel-client-ffi). What it is: one-to-one extern declarations
// and the status enums. What it is not: anything idiomatic; use
// CitadelClient. Call order: as in the header (connect, authenticate,
// send/poll from one poll loop, free exactly once via CitadelHandle).
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Citadel
{
    /// <summary>Result of every native call (CITADEL_STATUS_*).</summary>
    public enum CitadelStatus
    {
        Ok = 0,
        Again = 1,
        Disconnected = 2,
        InvalidArgument = 3,
        Connect = 4,
        Send = 5,
        Receive = 6,
        Internal = 7,
    }

    /// <summary>Outcome of the realtime handshake (CITADEL_AUTH_STATUS_*).</summary>
    public enum CitadelAuthStatus
    {
        Authenticated = 0,
        Guest = 1,
        Rejected = 2,
    }

    /// <summary>
    /// Owns one native handle and frees it exactly once (on Dispose, or by the
    /// finalizer if the owner forgot).
    /// </summary>
    public sealed class CitadelHandle : SafeHandle
    {
        public CitadelHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            return CitadelNative.citadel_client_free(handle) == CitadelStatus.Ok;
        }
    }

    /// <summary>The raw C functions. Strings are passed as NUL-terminated UTF-8 byte arrays.</summary>
    public static class CitadelNative
    {
        /// <summary>Native library name: citadel_ffi.dll, libcitadel_ffi.so, libcitadel_ffi.dylib.</summary>
        public const string Library = "citadel_ffi";

        /// <summary>The ABI version this binding was written against.</summary>
        public const uint AbiVersion = 2;

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern uint citadel_client_abi_version();

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_connect_websocket(byte[] url, out CitadelHandle handle);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_connect_quic(
            byte[] addr, byte[] serverName, [MarshalAs(UnmanagedType.U1)] bool insecure, out CitadelHandle handle);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_connect_quic_pinned(
            byte[] addr, byte[] certPem, UIntPtr certPemLen, out CitadelHandle handle);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_authenticate(
            CitadelHandle handle, byte[] token, UIntPtr tokenLen, out CitadelAuthStatus status,
            [In, Out] byte[] userBuf, UIntPtr userCap, out UIntPtr userLen, out byte reason);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_send(
            CitadelHandle handle, ushort kind, byte[] data, UIntPtr len, [MarshalAs(UnmanagedType.U1)] bool reliable);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_poll(
            CitadelHandle handle, out ushort kind, [In, Out] byte[] buf, UIntPtr cap, out UIntPtr len,
            [MarshalAs(UnmanagedType.U1)] out bool truncated);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern UIntPtr citadel_client_last_error(CitadelHandle handle, [In, Out] byte[] buf, UIntPtr cap);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern UIntPtr citadel_last_error_message([In, Out] byte[] buf, UIntPtr cap);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        public static extern CitadelStatus citadel_client_free(IntPtr handle);

        /// <summary>NUL-terminated UTF-8 bytes of <paramref name="text"/>.</summary>
        public static byte[] CString(string text)
        {
            var bytes = Encoding.UTF8.GetBytes(text ?? "");
            var result = new byte[bytes.Length + 1];
            Buffer.BlockCopy(bytes, 0, result, 0, bytes.Length);
            return result;
        }

        /// <summary>The calling thread's last native error message.</summary>
        public static string LastErrorMessage()
        {
            var buf = new byte[512];
            var n = (int)citadel_last_error_message(buf, (UIntPtr)buf.Length);
            return Encoding.UTF8.GetString(buf, 0, n);
        }
    }
}
