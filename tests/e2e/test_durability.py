"""
Durability: kill -9 the server process in the middle of a concurrent write load, start
it again, and find every acknowledged write present with revisions still rising.
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

from twisted.trial.unittest import TestCase

TOKEN = "durability-token"
PATH = "/api/v1/namespaces/default/configmaps"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A platformd process started the way users start it: twistd platformd."""

    def __init__(self, data_dir, port, tokens):
        self.data_dir, self.port, self.tokens = data_dir, port, tokens
        self.process = None

    def start(self):
        env = dict(os.environ)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n",
             "--pidfile=", "platformd", "--data-dir", self.data_dir,
             "--secure-port", str(self.port), "--token-auth-file", self.tokens],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("platformd exited: " + self.process.stderr.read().decode())
            try:
                if connection(self.port).request_json("GET", "/readyz", raw=True) == 200:
                    return
            except OSError:
                pass
            time.sleep(0.02)
        raise AssertionError("platformd did not become ready")

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process.stderr.close()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        if self.process:
            self.process.stderr.close()


class connection:
    def __init__(self, port):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)

    def request_json(self, method, path, body=None, raw=False):
        headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
        self.conn.request(method, path, json.dumps(body) if body is not None else None, headers)
        response = self.conn.getresponse()
        data = response.read()
        if raw:
            return response.status
        return response.status, json.loads(data)


class KillNineTests(TestCase):
    timeout = 120

    def test_acknowledged_writes_survive_kill(self):
        """Every create answered 201 before SIGKILL is present after restart."""
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        tokens = os.path.join(data_dir, "tokens.csv")
        with open(tokens, "w") as f:
            f.write(f'{TOKEN},tester,1,"system:masters"\n')
        server = Server(data_dir, free_port(), tokens)
        server.start()
        self.addCleanup(server.stop)

        acknowledged = {}
        lock = threading.Lock()
        stop = threading.Event()

        def writer(worker):
            conn = connection(server.port)
            n = 0
            while not stop.is_set():
                name = f"w{worker}-{n}"
                n += 1
                try:
                    status, body = conn.request_json("POST", PATH, {"metadata": {"name": name}})
                except (OSError, http.client.HTTPException, ValueError):
                    return  # the server died under us
                if status == 201:
                    with lock:
                        acknowledged[name] = int(body["metadata"]["resourceVersion"])

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        server.kill()
        stop.set()
        for t in threads:
            t.join(15)
        self.assertGreater(len(acknowledged), 50, "the load did not get going")

        server.start()
        conn = connection(server.port)
        status, listed = conn.request_json("GET", PATH)
        self.assertEqual(status, 200)
        present = {i["metadata"]["name"] for i in listed["items"]}
        missing = set(acknowledged) - present
        self.assertEqual(missing, set(), f"{len(missing)} acknowledged writes lost")
        status, created = conn.request_json("POST", PATH, {"metadata": {"name": "after"}})
        self.assertEqual(status, 201)
        self.assertGreater(int(created["metadata"]["resourceVersion"]), max(acknowledged.values()))
