"""
Graceful shutdown of a real ``twistd platformd`` process under write and watch load:
``kill -TERM`` fails /readyz for ``--shutdown-delay-duration`` while requests are still
served, lets the writes in flight finish, ends every watch with a bookmark and the
chunked terminator, and exits 0; after a restart every acknowledged write is there and
each watch resumes from the last resourceVersion it saw, without a 410 (no relist).
"""

import http.client
import os
import signal
import threading
import time

from twisted.trial.unittest import TestCase

from tests.e2e.daemon import RawWatch, Server, free_port, write_tokens

TOKEN = "shutdown-token"
PATH = "/api/v1/namespaces/default/configmaps"
WATCHES = 4
WRITERS = 4


class ShutdownTests(TestCase):
    timeout = 120

    def test_sigterm_under_load(self):
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        server = Server(data_dir, free_port(), write_tokens(data_dir, TOKEN), token=TOKEN,
                        args=["--shutdown-delay-duration", "3s"])
        server.start()
        self.addCleanup(server.stop)
        status, listed = server.connection().request_json("GET", PATH)
        watches = [RawWatch(server.port, TOKEN, PATH, listed["metadata"]["resourceVersion"])
                   for _ in range(WATCHES)]

        acknowledged, lock = {}, threading.Lock()

        def writer(worker):
            conn, n = server.connection(), 0
            while True:
                try:
                    status, body = conn.request_json(
                        "POST", PATH, {"metadata": {"name": f"w{worker}-{n}"}})
                except (OSError, http.client.HTTPException, ValueError):
                    return  # the server closed the connection: shutting down
                assert status == 201, body
                with lock:
                    acknowledged[body["metadata"]["name"]] = body["metadata"]["resourceVersion"]
                n += 1

        writers = [threading.Thread(target=writer, args=(i,)) for i in range(WRITERS)]
        for thread in writers:
            thread.start()
        while len(acknowledged) < 20:
            time.sleep(0.05)
        server.signal(signal.SIGTERM)
        # During the delay /readyz fails but requests are still served, also on new
        # connections.
        probe = server.connection()
        while (answer := probe.request("GET", "/readyz?verbose"))[0] == 200:
            time.sleep(0.02)  # the signal has not been handled yet
        self.assertEqual(answer[0], 500)
        self.assertIn(b"[-]shutdown failed: reason withheld\n", answer[1])
        self.assertTrue(answer[1].endswith(b"readyz check failed\n"), answer[1])
        during_delay = len(acknowledged)
        status, _ = server.connection().request("GET", PATH + "?limit=1")
        self.assertEqual(status, 200)
        time.sleep(0.2)
        self.assertGreater(len(acknowledged), during_delay, "writes stopped during the delay")

        self.assertEqual(server.wait(), 0)
        for thread in writers:
            thread.join(10)
        self.assertGreater(len(acknowledged), 20, "the load did not get going")
        last = max(int(rv) for rv in acknowledged.values())
        resume_from = []
        for watch in watches:
            events = watch.events()
            seen = {e["object"]["metadata"]["name"] for e in events if e["type"] == "ADDED"}
            self.assertEqual(set(acknowledged) - seen, set(),
                             "a watch ended before seeing every acknowledged write")
            self.assertEqual(events[-1]["type"], "BOOKMARK")
            bookmark = events[-1]["object"]["metadata"]["resourceVersion"]
            self.assertGreaterEqual(int(bookmark), last)
            resume_from.append(bookmark)

        server.start()
        status, listed = server.connection().request_json("GET", PATH)
        self.assertEqual(status, 200)
        present = {item["metadata"]["name"] for item in listed["items"]}
        self.assertEqual(set(acknowledged) - present, set(), "acknowledged writes lost")
        # Each client watches again from its bookmark: no 410, the next change arrives.
        resumed = [RawWatch(server.port, TOKEN, PATH, rv) for rv in resume_from]
        status, created = server.connection().request_json(
            "POST", PATH, {"metadata": {"name": "after-restart"}})
        self.assertEqual(status, 201)
        time.sleep(0.5)
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0)
        for watch in resumed:
            events = watch.events()
            self.assertEqual([(e["type"], e["object"]["metadata"].get("name"))
                              for e in events[:1]], [("ADDED", "after-restart")])
