"""
``--workers``: a real ``twistd platformd --workers 2`` (worker 0 and the worker it
starts) on one port and one data directory (docs/workers.md).

Which process serves a new connection is the kernel's choice (whichever accepts first),
so the tests choose it: a process stopped with SIGSTOP accepts nothing, and a
connection opened meanwhile is served by the other.  Every stopped process is continued
at cleanup, before the server is stopped.
"""

import os
import signal
import time

from twisted.trial.unittest import TestCase

from tests.e2e.daemon import RawWatch, Server, free_port, write_tokens

TOKEN = "workers-token"
CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
SERVICES = "/api/v1/namespaces/default/services"
POLICY = """apiVersion: audit.platform.io/v1
kind: Policy
rules:
- level: Metadata
"""


def children(pid: int) -> list:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def until(check, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class WorkersTests(TestCase):
    timeout = 120

    def start(self, *args, workers: int = 2) -> Server:
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        self.log_path = os.path.join(data_dir, "platformd.log")
        server = Server(data_dir, free_port(), write_tokens(data_dir, TOKEN), token=TOKEN,
                        args=["--workers", str(workers), *args], log_path=self.log_path)
        server.start()
        self.addCleanup(server.stop)
        self.stopped: set = set()
        self.addCleanup(self.continue_all)
        self.server = server
        self.serving(workers - 1)
        return server

    def log(self) -> str:
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def workers_serving(self) -> int:
        """How many times a worker logged that it serves."""
        return sum(1 for line in self.log().splitlines()
                   if "] worker " in line and "platformd serving on" in line)

    def serving(self, count: int, after: int = 0) -> list:
        """The workers' pids once ``count`` more of them (than ``after``) serve."""
        until(lambda: self.workers_serving() - after >= count,
              what=f"{count} workers serving")
        return children(self.server.process.pid)

    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        self.stopped.add(pid)

    def cont(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)
        self.stopped.discard(pid)

    def continue_all(self) -> None:
        for pid in list(self.stopped):
            self.cont(pid)

    def test_each_serves_and_reads_what_the_other_wrote(self):
        """
        A write through the worker, read through worker 0 at once (a consistent read
        after the write's answer, on another process), and a watch on worker 0 that
        hears it; Services made through each get different addresses.
        """
        server = self.start()
        parent = server.process.pid
        [worker] = children(parent)
        status, listed = server.connection().request_json("GET", CONFIGMAPS)
        self.assertEqual(status, 200, listed)

        self.stop(worker)  # the watch is worker 0's
        watch = RawWatch(server.port, TOKEN, CONFIGMAPS, listed["metadata"]["resourceVersion"])
        status, _ = server.connection().request("GET", "/readyz")  # connected and served
        self.assertEqual(status, 200)
        self.cont(worker)

        self.stop(parent)  # the writes are the worker's
        conn = server.connection()
        status, made = conn.request_json("POST", CONFIGMAPS,
                                         {"metadata": {"name": "through-worker-1"}})
        self.assertEqual(status, 201, made)
        status, first = conn.request_json(
            "POST", SERVICES, {"metadata": {"name": "first"},
                               "spec": {"ports": [{"port": 80}]}})
        self.assertEqual(status, 201, first)
        conn.close()
        self.cont(parent)

        self.stop(worker)  # the reads are worker 0's
        conn = server.connection()
        status, read = conn.request_json("GET", CONFIGMAPS + "/through-worker-1")
        self.assertEqual(status, 200, read)
        self.assertEqual(read["metadata"]["resourceVersion"],
                         made["metadata"]["resourceVersion"])
        status, second = conn.request_json(
            "POST", SERVICES, {"metadata": {"name": "second"},
                               "spec": {"ports": [{"port": 80}]}})
        self.assertEqual(status, 201, second)
        self.assertNotEqual(first["spec"]["clusterIP"], second["spec"]["clusterIP"])
        conn.close()
        self.cont(worker)

        until(lambda: b"through-worker-1" in watch.data, what="the watch's event")
        watch.socket.close()
        self.assertNotIn("Traceback", self.log())

    def test_sigterm_stops_every_worker(self):
        server = self.start(workers=3)
        workers = children(server.process.pid)
        self.assertEqual(len(workers), 2)
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0, server.output)
        for pid in workers:
            until(lambda: not alive(pid), 5, f"worker {pid} to exit")

    def test_workers_end_with_worker_0(self):
        """Killed outright, worker 0 cannot stop its workers: they see its pipe close."""
        server = self.start()
        [worker] = children(server.process.pid)
        server.kill()
        until(lambda: not alive(worker), 30, "the worker to exit")

    def test_a_worker_that_exits_is_started_again(self):
        server = self.start()
        [worker] = children(server.process.pid)
        seen = self.workers_serving()
        os.kill(worker, signal.SIGKILL)
        [again] = self.serving(1, after=seen)
        self.assertNotEqual(again, worker)
        self.assertIn("worker 1 exited", self.log())
        self.stop(server.process.pid)
        status, _ = server.connection().request("GET", CONFIGMAPS)
        self.assertEqual(status, 200)

    def test_sighup_passed_on(self):
        """SIGHUP to worker 0 reloads each worker's configuration files too."""
        server = self.start()
        server.signal(signal.SIGHUP)
        until(lambda: any("] worker 1: " in line and "SIGHUP: reloaded" in line
                          for line in self.log().splitlines()), what="the worker's reload")

    def test_one_audit_log(self):
        """A worker's audit events are written by worker 0, to the one log."""
        data_dir = os.path.abspath(self.mktemp())
        os.makedirs(data_dir)
        policy = os.path.join(data_dir, "policy.yaml")
        with open(policy, "w") as f:
            f.write(POLICY)
        audit_log = os.path.join(data_dir, "audit.log")
        server = self.start("--audit-policy-file", policy, "--audit-log-path", audit_log)
        parent = server.process.pid
        [worker] = children(parent)
        self.stop(parent)
        status, _ = server.connection().request("GET", CONFIGMAPS + "?labelSelector=by-worker")
        self.assertEqual(status, 200)
        self.cont(parent)
        self.stop(worker)
        status, _ = server.connection().request("GET", CONFIGMAPS + "?labelSelector=by-zero")
        self.assertEqual(status, 200)
        self.cont(worker)
        server.signal(signal.SIGTERM)
        self.assertEqual(server.wait(), 0, server.output)
        with open(audit_log) as f:
            text = f.read()
        for selector in ("by-worker", "by-zero"):
            # RequestReceived and ResponseComplete, once each.
            self.assertEqual(text.count(f"labelSelector=by-{selector[3:]}"), 2, text[-2000:])
        self.assertEqual(len(text.splitlines()), text.count('"kind":"Event"'))
        self.assertEqual(os.stat(audit_log).st_mode & 0o777, 0o600)
