"""
Admission's cost over HTTP (issue 15): ConfigMap creates per second with no webhook,
with one fast validating webhook (a twisted.web HTTPS server in its own process,
answering ``allowed: true`` at once) matching every ConfigMap create, and with one
ValidatingAdmissionPolicy (one CEL validation, one binding) matching them instead.
Server, webhook and clients on separate CPUs when there are enough.

    python bench/bench_webhook.py [--creates 3000] [--threads 8] [--rounds 3]

Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import (  # noqa: E402
    Client, free_port, post_all, start_server, stop_server, tls_context, wait_ready,
    write_tokens,
)

GROUP = "/apis/admissionregistration.platform.io/v1"


def serve(port: int, cert: str, key: str) -> None:
    """The webhook: allows every review, at once."""
    from twisted.internet import reactor
    from twisted.web import resource, server

    from platformd.edge.tlscontext import server_tls_options

    class Allow(resource.Resource):
        isLeaf = True

        def render_POST(self, request):
            review = json.loads(request.content.read())
            return json.dumps({"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                               "response": {"uid": review["request"]["uid"],
                                            "allowed": True}}).encode()

    site = server.Site(Allow())
    site.log = lambda request: None
    reactor.listenSSL(port, site, server_tls_options(cert, key), interface="127.0.0.1")
    reactor.run()


def pin(cpu: int) -> list:
    return ["taskset", "-c", str(cpu)] if os.cpu_count() and os.cpu_count() > cpu else []


def creates_per_second(port: int, namespace: str, count: int, threads: int) -> float:
    bodies = [{"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}} for i in range(count)]
    started = time.perf_counter()
    failures = post_all(port, f"/api/v1/namespaces/{namespace}/configmaps", bodies, threads)
    elapsed = time.perf_counter() - started
    if failures:
        sys.exit(f"{len(failures)} creates failed, first: {failures[0]}")
    return count / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--creates", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve", nargs=3, metavar=("PORT", "CERT", "KEY"),
                        help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(int(opts.serve[0]), opts.serve[1], opts.serve[2])
        return
    from platformd.files.pki import ensure_pki

    with tempfile.TemporaryDirectory() as tmp:
        paths = ensure_pki(os.path.join(tmp, "webhook-pki"), [], [], "https://127.0.0.1:1")
        with open(paths.ca_cert, "rb") as f:
            ca_bundle = base64.b64encode(f.read()).decode()
        hook_port, port = free_port(), free_port()
        webhook = subprocess.Popen(
            [*pin(2), sys.executable, os.path.abspath(__file__), "--serve", str(hook_port),
             paths.serving_cert, paths.serving_key])
        server = start_server(os.path.join(tmp, "data"), port, write_tokens(tmp))
        results: dict = {"no webhook": [], "one validating webhook": [],
                         "one validating policy": []}
        try:
            if not wait_ready(server, port, tls_context()):
                sys.exit("platformd did not start")
            client = Client(port)
            hook = {"name": "allow.bench.example.com",
                    "clientConfig": {"url": f"https://127.0.0.1:{hook_port}/allow",
                                     "caBundle": ca_bundle},
                    "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                               "apiVersions": ["v1"], "resources": ["configmaps"]}],
                    "sideEffects": "None", "admissionReviewVersions": ["v1"]}
            configured = {
                "one validating webhook": [("validatingwebhookconfigurations", {
                    "metadata": {"name": "bench"}, "webhooks": [hook]})],
                "one validating policy": [
                    ("validatingadmissionpolicies", {"metadata": {"name": "bench"}, "spec": {
                        "matchConstraints": {"resourceRules": hook["rules"]},
                        "validations": [{"expression": "size(object.data) < 10"}]}}),
                    ("validatingadmissionpolicybindings", {"metadata": {"name": "bench"},
                        "spec": {"policyName": "bench", "validationActions": ["Deny"]}})],
            }
            for round_ in range(opts.rounds):
                for index, name in enumerate(results):
                    namespace = f"r{round_}-{index}"
                    client.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
                    for plural, obj in configured.get(name, ()):
                        status, body = client.call("POST", f"{GROUP}/{plural}", obj)
                        assert status == 201, body
                    results[name].append(
                        creates_per_second(port, namespace, opts.creates, opts.threads))
                    for plural, _obj in configured.get(name, ()):
                        client.call("DELETE", f"{GROUP}/{plural}/bench")
            client.close()
        finally:
            stop_server(server)
            webhook.terminate()
            webhook.wait(10)
    for name, rates in results.items():
        print(f"{name:24} creates/s " + " ".join(f"{r:,.0f}" for r in rates))


if __name__ == "__main__":
    main()
