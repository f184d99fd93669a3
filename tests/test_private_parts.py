"""
The canary for what platformd uses of Twisted, pyOpenSSL and its OpenSSL binding beyond
their public API: private modules (``twisted.web._http2``, ``OpenSSL._util``), attributes
and methods named with ``_``, instance attributes set by their constructors, and calls a
Twisted class makes of another object.  Each is checked by name, on the real classes and on
real instances, and a failure names what is missing: re-read the module that uses it
against that release, and keep the upper bounds in setup.cfg until this passes.  h2 and
grpcio are used through their public API only.
"""

from __future__ import annotations

import inspect
import socket

import OpenSSL
import twisted
from twisted.internet import reactor, tcp
from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.ssl import CertificateOptions
from twisted.internet.testing import StringTransport
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase


class TwistedInternalsTests(SynchronousTestCase):
    """
    What edge/tlstransport.py uses of Twisted beyond its public API is still there, each
    checked by name on the real classes and on real instances of them.  A failure names
    what is missing: re-read edge/tlstransport.py against that Twisted release (and keep the
    bound on Twisted in setup.cfg until it passes).
    """

    def setUp(self):
        self.missing = []

    def need(self, owner, label: str, *names: str):
        for name in names:
            if not hasattr(owner, name):
                self.missing.append(f"{label}.{name}")

    def assertNoneMissing(self):
        if self.missing:
            self.fail(f"Twisted {twisted.__version__} / pyOpenSSL {OpenSSL.__version__} lacks"
                      f" what platformd relies on: {', '.join(self.missing)}")

    def test_private_parts_present(self):
        need, missing = self.need, self.missing
        need(TLSMemoryBIOProtocol, "TLSMemoryBIOProtocol", "_write", "_flushSendBIO",
             "_flushReceiveBIO", "_producer", "_handshakeDone", "_lostTLSConnection",
             "_aborted")
        need(tcp.Connection, "tcp.Connection", "_writeDisconnected", "dataBuffer")
        self.assertNoneMissing()  # before the instances below, which may need them

        factory = TLSMemoryBIOFactory(CertificateOptions(), False,
                                      Factory.forProtocol(Protocol))
        factory.protocol = BufferingTLSTransport
        tls = factory.buildProtocol(None)
        tls.makeConnection(StringTransport())
        need(tls, "BufferingTLSTransport()", "_aggregator", "_tlsConnection",
             "_appSendBuffer")
        need(getattr(tls, "_aggregator", None), "BufferingTLSTransport()._aggregator",
             "write", "flush", "_write")
        need(getattr(tls, "_tlsConnection", None), "BufferingTLSTransport()._tlsConnection",
             "_ssl", "_from_ssl", "_into_ssl")
        from OpenSSL import _util
        need(_util, "OpenSSL._util", "ffi", "lib")
        need(getattr(_util, "lib", None), "OpenSSL._util.lib", "SSL_write", "SSL_read",
             "SSL_get_error", "SSL_ERROR_WANT_READ", "BIO_read", "BIO_write",
             "ERR_clear_error", "SSL_set_mode", "SSL_MODE_RELEASE_BUFFERS")
        need(getattr(_util, "ffi", None), "OpenSSL._util.ffi", "new", "buffer")
        # ``write`` is an instance attribute, the gatherer's, set again on close.
        if "write" not in vars(tls):
            missing.append("BufferingTLSTransport().write (as an instance attribute)")
        tls.connectionLost(Failure(ConnectionDone()))
        if "write" not in vars(tls):
            missing.append("BufferingTLSTransport().write (set again by connectionLost)")

        ours, peer = socket.socketpair()
        self.addCleanup(ours.close)
        self.addCleanup(peer.close)
        need(tcp.Connection(ours, Protocol(), reactor), "tcp.Connection()", "_tempDataLen")

        self.assertNoneMissing()


    def test_http2_private_parts_present(self):
        """What edge/tlstransport.py, api/http2.py and api/site.py use of twisted.web's HTTP/2,
        of its protocol switch (``_GenericHTTPChannelProtocol``) and of its HTTP/1.1
        channel (a request served before its body)."""
        from twisted.web import _http2, http, server
        from twisted.internet.task import Clock

        need = self.need
        need(http, "twisted.web.http", "_GenericHTTPChannelProtocol")
        need(_http2.H2Connection, "H2Connection", "_requestReceived", "_requestDone",
             "setTimeout", "_send100Continue")
        need(http.HTTPChannel, "HTTPChannel", "_send100Continue", "rawDataReceived",
             "writeHeaders")
        generic = http._GenericHTTPChannelProtocol(http.HTTPChannel())
        site = server.Site(None)
        generic.site, generic.factory, generic.callLater = site, site, reactor.callLater
        generic.requestFactory = server.Request
        need(generic, "_GenericHTTPChannelProtocol()", "_negotiatedProtocol", "_channel",
             "_site", "_factory", "_callLater", "_requestFactory")
        channel = http.HTTPChannel()
        channel.makeConnection(StringTransport())
        need(channel, "HTTPChannel()", "_networkProducer", "_handlingRequest", "_dataBuffer",
             "_waitingForTransport", "_transferDecoder")
        connection = _http2.H2Connection(Clock())
        connection.makeConnection(StringTransport())
        stream = _http2.H2Stream(1, connection, [(b":method", b"GET")], server.Request,
                                 site, site)
        need(stream, "H2Stream()", "_conn", "_request", "command", "path", "pauseProducing",
             "resumeProducing")
        need(connection, "H2Connection()", "streams")
        need(connection.conn, "h2 H2Connection()", "_inbound_flow_control_window_manager")
        need(getattr(connection.conn, "_inbound_flow_control_window_manager", None),
             "h2 H2Connection()._inbound_flow_control_window_manager", "_bytes_processed")
        self.assertNoneMissing()


    def test_other_private_parts_present(self):
        """api/site.py, service.py, admission/webhooks/client.py and edge/accepting.py."""
        from twisted.internet import base
        from twisted.web import client, http, server

        need = self.need
        # api/site.py: Request._disconnected (Klein's request_finished), HTTPChannel's
        # _respondToBadRequestAndDisconnect (overridden), its parsed request line and
        # header size (_command, _path, _version, _receivedHeaderSize).
        holder = http.HTTPChannel()
        holder.site = server.Site(None)
        holder.makeConnection(StringTransport())
        need(server.Request(holder), "Request()", "_disconnected")
        need(http.HTTPChannel, "HTTPChannel", "_respondToBadRequestAndDisconnect")
        channel = http.HTTPChannel()
        channel.makeConnection(StringTransport())
        channel.dataReceived(b"GET / HTTP/1.1\r\n")
        need(channel, "HTTPChannel()", "_command", "_path", "_version",
             "_receivedHeaderSize")
        # service.py: ReactorBase._exitSignal (a graceful stop exits 0).
        need(base.ReactorBase, "ReactorBase", "_exitSignal")
        # edge/tlstransport.py: _lostTLSConnection.
        need(TLSMemoryBIOProtocol, "TLSMemoryBIOProtocol", "_lostTLSConnection")
        # admission/webhooks/client.py: Agent uses of its pool only getConnection and
        # persistent (_PoolFor provides just those).
        used = set()
        for owner in (client._AgentBase, client.Agent):
            used.update(name for name in ("getConnection", "persistent", "_putConnection",
                                          "closeCachedConnections")
                        if f"self._pool.{name}" in inspect.getsource(owner))
        if used != {"getConnection", "persistent"}:
            self.missing.append(f"Agent's use of its pool: {sorted(used)} (was getConnection "
                                "and persistent)")
        # edge/accepting.py: a listening tcp.Port reads through its ``socket`` attribute.
        if "self.socket.accept()" not in inspect.getsource(tcp.Port.doRead):
            self.missing.append("tcp.Port.doRead's self.socket.accept()")
        self.assertNoneMissing()
