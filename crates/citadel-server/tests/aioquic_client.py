#!/usr/bin/env python3
"""An independent QUIC client (aioquic) for Citadel's realtime protocol.

What it is: a test driver run by tests/aioquic.rs. It connects with ALPN
citadel/0, sends a guest KIND_AUTH on a client-opened bidirectional stream,
joins room "py", sends POSITION datagrams until a peer's PEER_POSITION comes
back, calls the "echo" RPC, and prints one JSON line with the results.
What it is not: an SDK (no reconnect, no pinning: the test runs on loopback
with verification off). Usage: aioquic_client.py HOST PORT
"""

import asyncio
import json
import ssl
import struct
import sys

from aioquic.asyncio import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import DatagramFrameReceived, StreamDataReceived

KIND_POSITION, KIND_PEER_POSITION = 1, 2
KIND_RPC_REQUEST, KIND_RPC_RESPONSE = 3, 4
KIND_AUTH, KIND_AUTH_RESULT = 5, 6
KIND_ROOM_CREATE, KIND_ROOM_JOINED = 21, 23


def framed(kind, body):
    return struct.pack(">IH", len(body) + 2, kind) + body


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inbox = asyncio.Queue()
        self.buffers = {}

    def quic_event_received(self, event):
        if isinstance(event, StreamDataReceived):
            buf = self.buffers.get(event.stream_id, b"") + event.data
            while len(buf) >= 6:
                (length,) = struct.unpack(">I", buf[:4])
                if len(buf) < 4 + length:
                    break
                (kind,) = struct.unpack(">H", buf[4:6])
                self.inbox.put_nowait(("stream", kind, buf[6 : 4 + length]))
                buf = buf[4 + length :]
            self.buffers[event.stream_id] = buf
        elif isinstance(event, DatagramFrameReceived) and len(event.data) >= 2:
            (kind,) = struct.unpack(">H", event.data[:2])
            self.inbox.put_nowait(("datagram", kind, event.data[2:]))

    async def wait_kind(self, kind, timeout):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise asyncio.TimeoutError()
            path, got, body = await asyncio.wait_for(self.inbox.get(), left)
            if got == kind:
                return path, body


async def main(host, port):
    config = QuicConfiguration(
        is_client=True, alpn_protocols=["citadel/0"], max_datagram_frame_size=65536
    )
    config.verify_mode = ssl.CERT_NONE
    config.server_name = "localhost"
    result = {}
    async with connect(host, port, configuration=config, create_protocol=Client) as client:
        stream = client._quic.get_next_available_stream_id(is_unidirectional=False)

        def send(kind, body):
            client._quic.send_stream_data(stream, framed(kind, body), end_stream=False)
            client.transmit()

        send(KIND_AUTH, b"")
        _, body = await client.wait_kind(KIND_AUTH_RESULT, 10)
        result["auth_status"] = body[0]
        name = b"py"
        send(KIND_ROOM_CREATE, struct.pack(">H", len(name)) + name)
        _, body = await client.wait_kind(KIND_ROOM_JOINED, 10)
        result["room_id"] = struct.unpack(">Q", body[:8])[0]
        position = struct.pack("<ff", 1.5, 2.5)
        for _ in range(100):
            client._quic.send_datagram_frame(struct.pack(">H", KIND_POSITION) + position)
            client.transmit()
            try:
                path, body = await client.wait_kind(KIND_PEER_POSITION, 0.1)
            except asyncio.TimeoutError:
                continue
            result["peer_position_path"] = path
            result["peer_position"] = list(struct.unpack("<ff", body[8:16]))
            break
        send(KIND_RPC_REQUEST, struct.pack(">QH", 7, 4) + b"echo" + b"from-python")
        _, body = await client.wait_kind(KIND_RPC_RESPONSE, 10)
        request_id, status = struct.unpack(">QB", body[:9])
        result["rpc"] = {"id": request_id, "status": status, "payload": body[9:].decode()}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
