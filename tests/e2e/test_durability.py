"""
Durability: kill -9 the server process in the middle of a concurrent write load, start
it again, and find every acknowledged write present with revisions still rising.
"""

import http.client
import os
import threading
import time

from twisted.trial.unittest import TestCase

from tests.e2e.daemon import Server, free_port, write_tokens

TOKEN = "durability-token"
PATH = "/api/v1/namespaces/default/configmaps"


class KillNineTests(TestCase):
    timeout = 120

    def test_acknowledged_writes_survive_kill(self):
        """Every create answered 201 before SIGKILL is present after restart."""
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        server = Server(data_dir, free_port(), write_tokens(data_dir, TOKEN), token=TOKEN)
        server.start()
        self.addCleanup(server.stop)

        acknowledged = {}
        lock = threading.Lock()
        stop = threading.Event()

        def writer(worker):
            conn = server.connection()
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
        # Kill once the load is going (a fixed sleep saw no write at all on a busy machine).
        deadline = time.monotonic() + 30
        while len(acknowledged) <= 100 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.kill()
        stop.set()
        for t in threads:
            t.join(15)
        self.assertGreater(len(acknowledged), 50, "the load did not get going")

        server.start()
        conn = server.connection()
        status, listed = conn.request_json("GET", PATH)
        self.assertEqual(status, 200)
        present = {i["metadata"]["name"] for i in listed["items"]}
        missing = set(acknowledged) - present
        self.assertEqual(missing, set(), f"{len(missing)} acknowledged writes lost")
        status, created = conn.request_json("POST", PATH, {"metadata": {"name": "after"}})
        self.assertEqual(status, 201)
        self.assertGreater(int(created["metadata"]["resourceVersion"]), max(acknowledged.values()))
