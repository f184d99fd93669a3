"""
Custom resources against built-ins of the same size (issue 31), and the start of a
server holding many of them.

    python bench/bench_customresources.py [--seconds 5] [--rounds 3] [--list-size 500]
    python bench/bench_customresources.py --startup [--crds 100] [--objects 1000]

The first form runs one server with a CustomResourceDefinition (``widgets.example.com``,
namespaced, status subresource; ``--schema structural``, the default: a schema naming a
Widget's every field as a RoleBinding's are named, with required fields and an enum, so
decoding prunes, defaults and validates as a real definition's would; ``--schema rules``:
the same with one CEL rule (``x-kubernetes-validations``), which a RoleBinding has no
counterpart of; ``--schema preserve``: ``x-kubernetes-preserve-unknown-fields``) and
compares, A/B alternating round by round (RoleBindings, then Widgets, then RoleBindings ...): creates
at concurrency 16 and GETs of one object at concurrency 32 (wrk), LISTs of
``--list-size`` objects at concurrency 4 (wrk), and watch fan-out
(``bench_lists_watches.fanout_run``: ``--watchers`` watches of a namespace of their own,
``--updates`` merge-patches at 50/s; the figure is server CPU per delivered event), each
object about the same size (a Widget's body pads to a RoleBinding's).  Per round and
kind: requests/s and the server's CPU milliseconds per request (``/proc``).  Prints each
round and the medians; the target is within 10%.

``--startup`` makes ``--crds`` definitions with ``--objects`` objects each (the
definitions through the API; the objects written straight into the stopped server's
SQLite file, as they would have been stored), then times a restart to ``/readyz`` 200
and checks every kind answers a LIST with all its objects.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import sys
import time

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_lists_watches as blw  # noqa: E402
from common import (  # noqa: E402
    RBAC, TOKEN, Client, cpu_seconds, free_port, scratch_dir, start_server, stop_server,
    tls_context, wait_ready, write_tokens, wrk_run,
)

#: This checkout: the server runs its code (not whatever ``platformd`` is installed).
TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRDS = "/apis/apiextensions.platform.io/v1/customresourcedefinitions"
WIDGETS = "/apis/example.com/v1/namespaces/default/widgets"
ROLEBINDINGS = f"{RBAC}/namespaces/default/rolebindings"


_FREE_FORM = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRING = {"type": "string"}
#: A Widget's spec described as a RoleBinding's fields are (``--schema structural``).
STRUCTURAL_SPEC = {
    "type": "object", "required": ["roleRef"],
    "properties": {
        "roleRef": {"type": "object", "required": ["apiGroup", "kind", "name"],
                    "properties": {"apiGroup": _STRING, "name": _STRING,
                                   "kind": {"type": "string",
                                            "enum": ["ClusterRole", "Role"]}}},
        "subjects": {"type": "array", "maxItems": 100, "items": {
            "type": "object", "required": ["kind", "name"],
            "properties": {"kind": _STRING, "name": _STRING, "apiGroup": _STRING,
                           "namespace": _STRING}}}}}

#: ``--schema rules``: the same with one CEL rule.
RULES_SPEC = {**STRUCTURAL_SPEC, "x-kubernetes-validations": [
    {"rule": "self.roleRef.name != ''", "message": "roleRef.name must be set"}]}


def definition(plural: str = "widgets", kind: str = "Widget", group: str = "example.com",
               spec: dict = _FREE_FORM):
    return {"apiVersion": "apiextensions.platform.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                     "versions": [{"name": "v1", "served": True, "storage": True,
                                   "subresources": {"status": {}},
                                   "schema": {"openAPIV3Schema": {
                                       "type": "object", "properties": {
                                           "spec": spec, "status": _FREE_FORM,
                                       }}}}]}}


ROLEBINDING_BODY = ('{"apiVersion":"rbac.authorization.platform.io/v1","kind":"RoleBinding",'
                    '"metadata":{"name":"%s"},"roleRef":{"apiGroup":'
                    '"rbac.authorization.platform.io","kind":"ClusterRole","name":"view"},'
                    '"subjects":[{"kind":"User","name":"alice"}]}')
# The same size as a RoleBinding's body and stored object, give or take a few bytes.
WIDGET_BODY = ('{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"%s"},'
               '"spec":{"roleRef":{"apiGroup":"rbac.authorization.platform.io",'
               '"kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User",'
               '"name":"alice"}]}}')

CREATE_LUA = r"""
local counter = 0
local id = 0
function setup(thread)
  id = id + 1
  thread:set("tid", id)
end
function request()
  counter = counter + 1
  local name = string.format("%(prefix)s-%%d-%%d", tid, counter)
  return wrk.format("POST", "%(path)s", {["Content-Type"]="application/json",
    ["Authorization"]="Bearer %(token)s"}, string.format('%(body)s', name))
end
"""


def lua(tmp: str, name: str, path: str, body: str, prefix: str) -> str:
    script = os.path.join(tmp, name)
    with open(script, "w") as f:
        f.write(CREATE_LUA % {"path": path, "token": TOKEN, "prefix": prefix,
                              "body": body})
    return script


def measured(pid: int, run) -> tuple:
    """(requests/s, CPU ms per request) of ``run()`` (wrk's figures)."""
    before = cpu_seconds(pid)
    figures = run()
    used = cpu_seconds(pid) - before
    return figures["rate"], used * 1000 / max(figures["requests"], 1), figures["bad"]


def compare(opts) -> None:
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    port = free_port()
    server = start_server(os.path.join(tmp, "data"), port, tokens, tree=TREE)
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd exited")
        client = Client(port)
        spec = {"structural": STRUCTURAL_SPEC, "rules": RULES_SPEC,
                "preserve": _FREE_FORM}[opts.schema]
        status, body = client.call("POST", CRDS, json.dumps(definition(spec=spec)).encode())
        assert status == 201, body
        deadline = time.monotonic() + 5
        while client.call("GET", WIDGETS)[0] != 200:
            assert time.monotonic() < deadline, "widgets not served"
            time.sleep(0.01)
        kinds = {"rolebindings": (ROLEBINDINGS, ROLEBINDING_BODY),
                 "widgets": (WIDGETS, WIDGET_BODY)}
        # The listed objects sit in a namespace of their own: the creates do not grow it.
        for namespace in ("lists", blw.NS):
            status, body = client.call("POST", "/api/v1/namespaces",
                                       {"metadata": {"name": namespace}})
            assert status == 201, body
        for name, (path, template) in kinds.items():
            listed = path.replace("/namespaces/default/", "/namespaces/lists/")
            for i in range(opts.list_size):
                status, body = client.call("POST", listed, (template % f"list-{i:05}").encode())
                assert status == 201, body
            watched = path.replace("/namespaces/default/", f"/namespaces/{blw.NS}/")
            for i in range(opts.updates):
                status, body = client.call("POST", watched, (template % f"rb-{i:04d}").encode())
                assert status == 201, body
            status, body = client.call("POST", path, (template % "target").encode())
            assert status == 201, body
        blw.WATCHERS, blw.UPDATES = opts.watchers, opts.updates
        base = f"https://127.0.0.1:{port}"
        results: dict = {}
        for round_ in range(opts.rounds):
            for name, (path, template) in kinds.items():
                script = lua(tmp, f"{name}-{round_}.lua", path, template, f"c{round_}")
                runs = {
                    "creates": lambda: wrk_run(["-c16", "-s", script], opts.seconds, base),
                    "gets": lambda: wrk_run(["-c32", "-H", f"Authorization: Bearer {TOKEN}"],
                                            opts.seconds, f"{base}{path}/target"),
                    "lists": lambda: wrk_run(
                        ["-c4", "-H", f"Authorization: Bearer {TOKEN}"], opts.seconds,
                        f"{base}{path.replace('/namespaces/default/', '/namespaces/lists/')}"),
                }
                for op, run in runs.items():
                    rate, cpu, bad = measured(server.pid, run)
                    results.setdefault((op, name), []).append((rate, cpu))
                    print(f"round {round_ + 1} {op:7} {name:12} {rate:8,.0f}/s "
                          f"{cpu:6.3f} ms CPU/op  non-2xx {bad}", flush=True)
                if opts.watchers:
                    watched = path.replace("/namespaces/default/", f"/namespaces/{blw.NS}/")
                    r = blw.fanout_run(port, client, server.pid, None, port, gil=False,
                                       path=watched)
                    deliveries = max(r["deliveries"], 1)
                    cpu = r["server_cpu"] * opts.updates / r["rate"] * 1000 / deliveries
                    results.setdefault(("fanout", name), []).append((r["rate"], cpu))
                    print(f"round {round_ + 1} fanout  {name:12} {deliveries:8,} events "
                          f"{cpu * 1000:6.1f} us CPU/event  p99 {r['k_p99']:.1f} ms",
                          flush=True)
        print("\nmedians (widgets vs rolebindings):")
        for op in ("creates", "gets", "lists", "fanout"):
            if (op, "widgets") not in results:
                continue
            rb = results[(op, "rolebindings")]
            wd = results[(op, "widgets")]
            rb_rate, wd_rate = (statistics.median(r for r, _ in x) for x in (rb, wd))
            rb_cpu, wd_cpu = (statistics.median(c for _, c in x) for x in (rb, wd))
            print(f"{op:7} rolebindings {rb_rate:8,.0f}/s {rb_cpu:6.3f} ms | widgets "
                  f"{wd_rate:8,.0f}/s {wd_cpu:6.3f} ms | rate {wd_rate / rb_rate - 1:+.1%}, "
                  f"CPU/op {wd_cpu / rb_cpu - 1:+.1%}")
    finally:
        stop_server(server)
        shutil.rmtree(tmp, ignore_errors=True)


def startup(opts) -> None:
    tmp = scratch_dir()
    tokens = write_tokens(tmp)
    port = free_port()
    data = os.path.join(tmp, "data")
    server = start_server(data, port, tokens, tree=TREE)
    try:
        if not wait_ready(server, port, tls_context()):
            sys.exit("platformd exited")
        client = Client(port)
        for n in range(opts.crds):
            status, body = client.call("POST", CRDS, json.dumps(
                definition(f"kind{n:03}s", f"Kind{n:03}")).encode())
            assert status == 201, body
        deadline = time.monotonic() + 30
        while client.call("GET", f"/apis/example.com/v1/namespaces/default/"
                                  f"kind{opts.crds - 1:03}s")[0] != 200:
            assert time.monotonic() < deadline, "not served"
            time.sleep(0.05)
        time.sleep(0.5)  # the last definitions' status writes
    finally:
        stop_server(server)
    # The same objects as ConfigMaps, in a copy without the definitions' objects: the
    # start of a server holding as many built-in objects, measured alternately.
    builtin = os.path.join(tmp, "builtin")
    shutil.copytree(data, builtin)
    fill(os.path.join(data, "platformd.db"), opts, custom=True)
    fill(os.path.join(builtin, "platformd.db"), opts, custom=False)
    print(f"{opts.crds} definitions x {opts.objects} objects written "
          f"({opts.crds * opts.objects:,} objects; the same as ConfigMaps beside)", flush=True)
    times: dict = {"custom": [], "configmaps": []}
    for _ in range(opts.rounds):
        for which, directory in (("custom", data), ("configmaps", builtin)):
            started = time.monotonic()
            server = start_server(directory, port, tokens, tree=TREE)
            try:
                if not wait_ready(server, port, tls_context()):
                    sys.exit("platformd exited")
                took = time.monotonic() - started
                client = Client(port)
                paths = ([f"/apis/example.com/v1/namespaces/default/kind{n:03}s"
                          for n in (0, opts.crds - 1)] if which == "custom"
                         else ["/api/v1/namespaces/default/configmaps?limit=1"])
                for path in paths:
                    status, body = client.call("GET", path)
                    assert status == 200, body
                    if which == "custom":
                        assert len(json.loads(body)["items"]) == opts.objects
                times[which].append(took)
                print(f"{which:10} start to /readyz 200: {took * 1000:.0f} ms", flush=True)
            finally:
                stop_server(server)
    for which, taken in times.items():
        print(f"median {which}: {statistics.median(taken) * 1000:.0f} ms")
    if opts.keep:
        print(f"data kept in {data}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)


def fill(path: str, opts, custom: bool) -> None:
    """``--crds`` x ``--objects`` objects written into the SQLite file at ``path``: of
    the definitions' kinds (``custom``), else as many ConfigMaps of the same size."""
    db = sqlite3.connect(path)
    revision = db.execute("SELECT MAX(mod_revision) FROM revisions").fetchone()[0]
    rows = []
    stamp = "2026-01-01T00:00:00Z"
    for n in range(opts.crds):
        for i in range(opts.objects):
            revision += 1
            name = f"o{i:05}"
            if custom:
                value = json.dumps({
                    "kind": f"Kind{n:03}", "apiVersion": "example.com/v1",
                    "metadata": {"name": name, "namespace": "default", "uid": f"u-{n}-{i}",
                                 "generation": 1, "creationTimestamp": stamp},
                    "spec": {"size": i, "text": "x" * 200}}, separators=(",", ":")).encode()
                key = f"/registry/kind{n:03}s.example.com/default/{name}"
            else:
                value = json.dumps({
                    "kind": "ConfigMap", "apiVersion": "v1",
                    "metadata": {"name": f"{name}-{n:03}", "namespace": "default",
                                 "uid": f"u-{n}-{i}", "creationTimestamp": stamp},
                    "data": {"size": str(i), "text": "x" * 200}},
                    separators=(",", ":")).encode()
                key = f"/registry/configmaps/default/{name}-{n:03}"
            rows.append((revision, key, revision, value, 0))
    db.executemany("INSERT INTO revisions VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--list-size", type=int, default=500)
    parser.add_argument("--schema", choices=("structural", "rules", "preserve"),
                        default="structural")
    parser.add_argument("--watchers", type=int, default=300,
                        help="watch fan-out's watchers (0: no fan-out)")
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--startup", action="store_true")
    parser.add_argument("--crds", type=int, default=100)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--keep", action="store_true", help="keep --startup's data")
    opts = parser.parse_args()
    if opts.startup:
        startup(opts)
    else:
        compare(opts)


if __name__ == "__main__":
    main()
