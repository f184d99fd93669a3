"""
The node-local pods socket (issue 6): client and server on the same 2-core machine, one
scratch platformd started with ``twistd -n platformd --feature-gates PodsAPI=true``.

    PYTHONPATH=src:. python bench/bench_pods.py [--seconds 5]

1. ListPods with 110 pods bound to the node (the kubelet's default pod limit) and 200
   more bound elsewhere: requests/s for 1 and for 4 client threads, each calling in a
   loop over one channel.  The client takes the response as raw bytes (no parse), so the
   figure is the server's.
2. WatchPods delivery delay: one stream, then 200 merge-patches of the node's pods over
   HTTPS (keep-alive, bearer token) at 50/s, each carrying its send time
   (``time.time()``, taken just before the request) in an annotation; the reader thread
   parses each streamed pod and takes receive time minus send time.  p50 and p99.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    TOKEN, free_port, in_threads, scratch_dir, stop_server, tls_context, wait_ready,
    write_tokens,
)

from platformd.protos.platform.nodeagent.pods.v1alpha1 import api_pb2, api_pb2_grpc  # noqa: E402

NODE = "bench-node"
PODS = "/api/v1/namespaces/default/pods"
SENT = "bench.platform.io/sent"


def start(tmp: str, port: int, socket_path: str) -> subprocess.Popen:
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    return subprocess.Popen(
        [twistd, "-n", "--pidfile=", "platformd", "--data-dir", os.path.join(tmp, "data"),
         "--secure-port", str(port), "--token-auth-file", write_tokens(tmp),
         "--feature-gates", "PodsAPI=true", "--pods-socket", socket_path,
         "--node-name", NODE],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class HTTP:
    def __init__(self, port: int):
        self.conn = http.client.HTTPSConnection("127.0.0.1", port, context=tls_context())

    def send(self, method: str, path: str, body: dict, content_type="application/json"):
        self.conn.request(method, path, json.dumps(body), {
            "Authorization": f"Bearer {TOKEN}", "Content-Type": content_type})
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")


def pod(name: str, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app": "bench", "pod-template-hash": "5d9f"},
                         "annotations": {"example.com/owner": "team-a"}},
            "spec": {"nodeName": node, "containers": [
                {"name": "app", "image": "registry.example.com/app:1.2.3",
                 "ports": [{"containerPort": 8080}], "env": [{"name": "MODE", "value": "prod"}],
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
                {"name": "sidecar", "image": "registry.example.com/proxy:4.5"}]}}


def list_rate(socket_path: str, threads: int, seconds: float) -> float:
    channel = grpc.insecure_channel(f"unix:{socket_path}")
    call = channel.unary_unary("/platform.nodeagent.pods.v1alpha1.Pods/ListPods",
                               request_serializer=api_pb2.PodListRequest.SerializeToString)
    request = api_pb2.PodListRequest()
    response = api_pb2.PodListResponse.FromString(call(request))
    assert len(response.pods) == 110, len(response.pods)
    counts = [0] * threads
    deadline = time.monotonic() + seconds

    def loop(i):
        while time.monotonic() < deadline:
            call(request)
            counts[i] += 1
    in_threads(loop, threads)
    channel.close()
    return sum(counts) / seconds


def watch_delays(socket_path: str, http: HTTP, writes: int, rate: float) -> list:
    channel = grpc.insecure_channel(f"unix:{socket_path}")
    stream = api_pb2_grpc.PodsStub(channel).WatchPods(api_pb2.PodWatchRequest())
    delays, writes_took = [], []
    done = threading.Event()

    def read():
        for i, response in enumerate(stream):
            if i < 110:
                continue  # the current state, sent first
            sent = response.pod.metadata.annotations.get(SENT)
            if sent:
                delays.append(time.time() - float(sent))
                if len(delays) == writes:
                    done.set()
                    return
    reader = threading.Thread(target=read)
    reader.start()
    for i in range(writes):
        start = time.monotonic()
        http.send("PATCH", f"{PODS}/p{i % 110}",
                  {"metadata": {"annotations": {SENT: repr(time.time())}}},
                  "application/merge-patch+json")
        writes_took.append(time.monotonic() - start)
        time.sleep(max(0.0, 1 / rate - (time.monotonic() - start)))
    done.wait(30)
    stream.cancel()
    reader.join()
    channel.close()
    return sorted(delays), sorted(writes_took)


def _ms(ordered: list, q: float) -> str:
    return f"{ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000:.2f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5)
    args = parser.parse_args()
    tmp = scratch_dir()
    port = free_port()
    socket_path = os.path.join(tmp, "pods", "nodeagent.sock")
    server = start(tmp, port, socket_path)
    try:
        if not wait_ready(server, port, tls_context()):
            raise SystemExit("platformd did not start")
        http = HTTP(port)
        for i in range(110):
            http.send("POST", PODS, pod(f"p{i}", NODE))
        for i in range(200):
            http.send("POST", PODS, pod(f"other{i}", f"node-{i % 20}"))
        for threads in (1, 4):
            rate = list_rate(socket_path, threads, args.seconds)
            print(f"ListPods, 110 pods, {threads} client thread(s): {rate:,.0f} requests/s")
        delays, writes = watch_delays(socket_path, http, 200, 50.0)
        print(f"WatchPods delivery after the HTTP write ({len(delays)} changes at 50/s): "
              f"p50 {_ms(delays, 0.5)}, p99 {_ms(delays, 0.99)} "
              f"(the PATCH round trip itself: p50 {_ms(writes, 0.5)}, p99 {_ms(writes, 0.99)})")
    finally:
        stop_server(server)


if __name__ == "__main__":
    main()
