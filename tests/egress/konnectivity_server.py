"""
A real konnectivity proxy server for tests: grpcio's ``ProxyService`` on a UNIX socket,
dialling the real target over TCP for each ``DIAL_REQ`` (``hosts`` maps names to
addresses).  It records every dial's request (``dials``) and the packet types it
received (``received``), and how many tunnels are open (``open_streams``); ``refuse``
answers every dial with a ``DIAL_RSP`` carrying that error instead.
"""

from __future__ import annotations

import queue
import socket
import threading
from concurrent import futures

import grpc

from platformd.protos.konnectivity.client import client_pb2 as pb
from platformd.protos.konnectivity.client import client_pb2_grpc as pb_grpc


class KonnectivityServer(pb_grpc.ProxyServiceServicer):
    def __init__(self, path: str, hosts=None):
        self.hosts = dict(hosts or {})
        self.dials: list = []
        self.received: list = []
        self.refuse = ""
        #: Tunnels whose request stream has not ended (changed by the server's threads).
        self.open_streams = 0
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        pb_grpc.add_ProxyServiceServicer_to_server(self, self.server)
        self.server.add_insecure_port(f"unix:{path}")
        self.server.start()

    def stop(self) -> None:
        self.server.stop(None).wait()

    def Proxy(self, request_iterator, context):
        outgoing: queue.Queue = queue.Queue()
        threading.Thread(target=self._serve, args=(request_iterator, outgoing),
                         daemon=True).start()
        while True:
            packet = outgoing.get()
            if packet is None:
                return
            yield packet

    def _serve(self, requests, outgoing: queue.Queue) -> None:
        conn = None
        with self._lock:
            self.open_streams += 1
        try:
            for packet in requests:
                self.received.append(pb.PacketType.Name(packet.type))
                if packet.type == pb.DIAL_REQ:
                    request = packet.dialRequest
                    self.dials.append((request.protocol, request.address))
                    if self.refuse:
                        outgoing.put(_dial_response(request.random, error=self.refuse))
                        break
                    host, _, port = request.address.rpartition(":")
                    try:
                        conn = socket.create_connection((self.hosts.get(host, host), int(port)))
                    except OSError as error:
                        outgoing.put(_dial_response(request.random, error=str(error)))
                        break
                    outgoing.put(_dial_response(request.random, connect_id=7))
                    threading.Thread(target=self._relay, args=(conn, outgoing),
                                     daemon=True).start()
                elif packet.type == pb.DATA and conn is not None:
                    conn.sendall(packet.data.data)
                elif packet.type == pb.CLOSE_REQ:
                    outgoing.put(pb.Packet(type=pb.CLOSE_RSP, closeResponse=pb.CloseResponse(
                        connectID=packet.closeRequest.connectID)))
                    break
        finally:
            if conn is not None:
                conn.close()
            outgoing.put(None)
            with self._lock:
                self.open_streams -= 1

    def _relay(self, conn: socket.socket, outgoing: queue.Queue) -> None:
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                outgoing.put(pb.Packet(type=pb.DATA, data=pb.Data(connectID=7, data=data)))
        except OSError:
            pass
        outgoing.put(pb.Packet(type=pb.CLOSE_RSP, closeResponse=pb.CloseResponse(connectID=7)))


def _dial_response(random: int, error: str = "", connect_id: int = 0):
    return pb.Packet(type=pb.DIAL_RSP, dialResponse=pb.DialResponse(
        random=random, error=error, connectID=connect_id))
