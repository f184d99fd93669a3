"""
Helpers shared by the API benchmarks: a scratch platformd (twistd plugin) on a free
port with bearer-token auth, a TLS context that skips verification of its self-signed
certificate, a keep-alive HTTPS client and parallel creates, the server's memory from ``/proc`` and a runner
for ``wrk`` (C HTTP load generator) that returns its figures.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TOKEN = "bench-token"
RBAC = "/apis/rbac.authorization.platform.io/v1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tls_context() -> ssl.SSLContext:
    """A client context for the server's self-signed certificate."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def ready(port: int, context) -> bool:
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/readyz", context=context,
                                    timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def write_tokens(tmp: str) -> str:
    """A token file granting ``TOKEN`` system:masters; returns its path."""
    tokens = os.path.join(tmp, "tokens.csv")
    with open(tokens, "w") as f:
        f.write(f'{TOKEN},bench,1,"system:masters"\n')
    return tokens


def package_root(tree: str) -> str:
    """
    The directory holding a checkout's ``platformd`` package and ``twisted/plugins``:
    ``<tree>/src`` since the src/ layout (b0ec942), the tree itself before.
    """
    src = os.path.join(tree, "src")
    return src if os.path.isdir(os.path.join(src, "platformd")) else tree


def start_server(data_dir: str, port: int, tokens: str, log=None,
                 extra=(), tree: str | None = None) -> subprocess.Popen:
    """
    ``twistd -n platformd`` in the background (PYTHONPATH must reach the plugin), with
    ``extra`` arguments (``--feature-gates ...``); its output goes to the file object
    ``log`` if given, else nowhere.  With ``tree`` (a checkout), the server runs that
    tree's code: its package root first on PYTHONPATH and as the working directory
    (twistd puts the working directory first on sys.path), ahead of the editable install.
    """
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    out = log if log is not None else subprocess.DEVNULL
    env = cwd = None
    if tree is not None:
        cwd = package_root(tree)
        env = {**os.environ, "PYTHONPATH": cwd}
    return subprocess.Popen(
        [twistd, "-n", "--pidfile=", "platformd", "--data-dir", data_dir,
         "--secure-port", str(port), "--token-auth-file", tokens, *extra],
        stdout=out, stderr=out, env=env, cwd=cwd)


def wait_ready(server: subprocess.Popen, port: int, context) -> bool:
    """Poll /readyz until 200 (True) or the server exits (False)."""
    while not ready(port, context):
        if server.poll() is not None:
            return False
        time.sleep(0.005)
    return True


def stop_server(server: subprocess.Popen) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(10)


def wrk_run(args, seconds, url) -> dict:
    """
    Run wrk (2 threads); its figures: ``rate`` (requests/s), ``requests`` (served),
    ``bad`` (non-2xx count), ``p99`` (text).
    """
    out = subprocess.run(["wrk", "-t2", f"-d{seconds:g}s", "--latency", *args, url],
                         capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.MULTILINE)
    return {"rate": rate, "requests": requests, "bad": int(bad.group(1)) if bad else 0,
            "p99": p99.group(1) if p99 else "?"}


def wrk(args, seconds, url):
    """Run wrk (2 threads) and return (requests/s, non-2xx count, p99 text)."""
    figures = wrk_run(args, seconds, url)
    return figures["rate"], figures["bad"], figures["p99"]


class Client:
    """A keep-alive HTTPS client with the bench token."""

    def __init__(self, port: int, timeout: float = 30):
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=tls_context(),
                                                timeout=timeout)

    def call(self, method: str, path: str, body=None,
             content_type: str = "application/json"):
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
            if not isinstance(body, bytes):
                body = json.dumps(body).encode()
        self.conn.request(method, path, body, headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self):
        self.conn.close()


def post_all(port: int, path: str, bodies, threads: int, timeout: float = 30) -> list:
    """
    POST each of ``bodies`` (a sequence) to ``path`` over ``threads`` keep-alive
    connections; the failures as ``(status, body head)``.
    """
    failures = []

    def work(first: int):
        client = Client(port, timeout=timeout)
        for i in range(first, len(bodies), threads):
            status, body = client.call("POST", path, bodies[i])
            if status != 201:
                failures.append((status, body[:300]))
        client.close()

    in_threads(work, threads)
    return failures


def in_threads(target, count: int) -> None:
    """``target(i)`` for i in 0..count-1, each in a thread of its own; returns once all
    have returned."""
    workers = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


def proc_status(pid: int) -> dict:
    """The ``kB`` figures of ``/proc/PID/status`` (VmRSS, VmHWM, ...), in KiB."""
    figures = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if value.rstrip().endswith(" kB"):
                figures[name] = int(value.split()[0])
    return figures


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (``/proc/PID/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list:
    """The processes whose parent is ``pid`` (a ``--workers`` server's workers)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry))
        except OSError:
            continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """``cpu_seconds`` of the process and its children (every worker of a server)."""
    return sum(cpu_seconds(p) for p in [pid, *children(pid)])


def wait_workers(pid: int, workers: int, settle: float = 3.0) -> None:
    """Once ``workers - 1`` workers run, give them ``settle`` seconds to load and
    adopt the socket."""
    if workers > 1:
        while len(children(pid)) < workers - 1:
            time.sleep(0.05)
        time.sleep(settle)


def rss_mib(pid: int) -> float:
    return proc_status(pid).get("VmRSS", float("nan")) / 1024


def reset_peak(pid: int) -> None:
    """Reset the process's peak resident size (VmHWM) to its current one."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def scratch_dir() -> str:
    return tempfile.mkdtemp(prefix="platformd-bench-")
