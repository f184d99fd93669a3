"""
platformd as users run it: a ``twistd platformd`` subprocess, a blocking HTTPS client of
it and a raw watch reader (the tests that use these kill, signal or socket-activate the
process; bench/bench_shutdown.py measures with them).
"""

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: ``twistd`` run by this interpreter (the venv's), whatever PATH says.
TWISTD = [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_tokens(directory: str, token: str) -> str:
    """A token file in ``directory`` making ``token`` a system:masters user."""
    path = os.path.join(directory, "tokens.csv")
    with open(path, "w") as f:
        f.write(f'{token},tester,1,"system:masters"\n')
    return path


class Server:
    """
    A platformd process: ``twistd -n --pidfile= *twistd_args platformd --data-dir D
    --secure-port P --token-auth-file T *args``, run under ``wrapper`` (a command that execs the rest,
    e.g. ``systemd-socket-activate``) with ``env`` added to the environment.  ``port``
    is where ``start`` waits for ``/readyz``.
    """

    def __init__(self, data_dir, port, tokens, args=(), env=None, wrapper=(), token=None,
                 twistd_args=(), log_path=None):
        self.data_dir, self.port, self.tokens = data_dir, port, tokens
        #: Where the process's standard output (its log) goes; nowhere by default.
        self.log_path = log_path
        self.args, self.env, self.wrapper, self.token = list(args), env or {}, wrapper, token
        self.twistd_args = list(twistd_args)
        self.process = None
        #: The standard error of the last process, once it has exited.
        self.output = ""

    def spawn(self):
        """Start the process (and return at once)."""
        env = dict(os.environ, **self.env)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        stdout = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [*self.wrapper, *TWISTD, "-n", "--pidfile=", *self.twistd_args, "platformd",
             "--data-dir", self.data_dir, "--secure-port", str(self.port),
             "--token-auth-file", self.tokens, *self.args],
            env=env, stdout=stdout, stderr=subprocess.PIPE)
        if self.log_path:
            stdout.close()

    def start(self, timeout=30):
        """Start the process and wait until ``/readyz`` answers 200 at ``port``."""
        self.spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("platformd exited: " + self.process.stderr.read().decode())
            try:
                if self.connection().request("GET", "/readyz")[0] == 200:
                    return
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.02)
        raise AssertionError("platformd did not become ready")

    def connection(self, port=None):
        return Connection(port or self.port, self.token)

    def signal(self, signum):
        self.process.send_signal(signum)

    def wait(self, timeout=30) -> int:
        """The exit status, once the process has exited (``output``: its standard error)."""
        status = self.process.wait(timeout)
        self.output = self.process.stderr.read().decode()
        self.process.stderr.close()
        return status

    def kill(self):
        self.signal(signal.SIGKILL)
        self.wait()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)
        if self.process and not self.process.stderr.closed:
            self.process.stderr.close()


class Connection:
    """One keep-alive HTTPS connection, sending the bearer token (certificate unchecked)."""

    def __init__(self, port, token=None):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        self.token = token
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)

    def request(self, method, path, body=None):
        """``(status, body bytes)``."""
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        self.conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def request_json(self, method, path, body=None):
        status, data = self.request(method, path, body)
        return status, json.loads(data)

    def close(self):
        self.conn.close()


class RawWatch:
    """A watch over a raw TLS socket, read to the end in a thread: the exact bytes."""

    def __init__(self, port: int, token: str, path: str, resource_version: str):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        self.socket = context.wrap_socket(socket.create_connection(("127.0.0.1", port)))
        self.socket.sendall(
            f"GET {path}?watch=1&allowWatchBookmarks=true&resourceVersion={resource_version}"
            f" HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode())
        self.data = b""
        self.thread = threading.Thread(target=self._read)
        self.thread.start()

    def _read(self):
        try:
            while chunk := self.socket.recv(65536):
                self.data += chunk
        except OSError:
            pass
        self.socket.close()

    def events(self, timeout=30.0):
        """The watch's events once the response has ended, checking its framing."""
        self.thread.join(timeout)
        head, _, body = self.data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        assert b"transfer-encoding: chunked" in head.lower(), head
        lines, rest = b"", body
        while True:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                assert rest == b"\r\n", f"bytes after the terminator: {rest!r}"
                break
            lines, rest = lines + rest[:size], rest[size + 2:]
        return [json.loads(line) for line in lines.splitlines()]
