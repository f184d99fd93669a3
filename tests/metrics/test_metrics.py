"""
/metrics after real requests through the in-memory server: upstream's names, labels,
verbs, scopes and buckets, read back from the text exposition.
"""

from __future__ import annotations

import re

from twisted.trial.unittest import SynchronousTestCase

from platformd.auth.authorizers import AuthorizerChain
from platformd.compose import Authorization
from platformd.metrics.apiserver import APIServerMetrics
from platformd.metrics.core import CONTENT_TYPE, go_float

from tests.stub import StubServer

CM = "/api/v1/namespaces/default/configmaps"
_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str):
    """``(samples, types)``: ``{(name, ((label, value), ...)): value}`` and ``{name: type}``."""
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        match = _LINE.match(line)
        assert match, line
        labels = tuple(_LABEL.findall(match.group(2) or ""))
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples, types


def request_labels(verb, resource, scope, code=None, group="", version="v1", subresource="",
                   dry_run="", component="apiserver"):
    """Labels in Go's order (sorted by name)."""
    labels = {"component": component, "dry_run": dry_run, "group": group,
              "resource": resource, "scope": scope, "subresource": subresource, "verb": verb,
              "version": version}
    if code is not None:
        labels["code"] = code
    return tuple(sorted(labels.items()))


class MetricsTests(SynchronousTestCase):
    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        self.admin = self.stub.client()

    def scrape(self):
        r = self.admin.get("/metrics")
        self.assertEqual(r.code, 200, r.body)
        self.assertEqual(r.header("content-type"), CONTENT_TYPE)
        return parse(r.body.decode())

    def test_request_total_by_verb_and_scope(self):
        """Upstream's verb (LIST, GET, POST, PUT, PATCH, APPLY, DELETE) and scope labels."""
        self.assertEqual(self.admin.post(CM, {"metadata": {"name": "a"}}).code, 201)
        self.assertEqual(self.admin.get(CM).code, 200)
        self.assertEqual(self.admin.get("/api/v1/configmaps").code, 200)
        self.assertEqual(self.admin.get(CM + "/a").code, 200)
        self.assertEqual(self.admin.get(CM + "/missing").code, 404)
        self.assertEqual(self.admin.put(CM + "/a", {"metadata": {"name": "a"}}).code, 200)
        self.assertEqual(self.admin.patch(CM + "/a", {"data": {"k": "v"}}).code, 200)
        self.assertEqual(self.admin.patch(
            CM + "/a?fieldManager=m", b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
            content_type="application/apply-patch+yaml").code, 200)
        self.assertEqual(self.admin.post(CM + "?dryRun=All", {"metadata": {"name": "b"}}).code,
                         201)
        self.assertEqual(self.admin.delete(CM + "/a").code, 200)
        self.assertEqual(self.admin.delete(CM).code, 200)
        samples, types = self.scrape()
        self.assertEqual(types["apiserver_request_total"], "counter")
        expected = [
            ("POST", "resource", "201", ""), ("LIST", "namespace", "200", ""),
            ("LIST", "cluster", "200", ""), ("GET", "resource", "200", ""),
            ("GET", "resource", "404", ""), ("PUT", "resource", "200", ""),
            ("PATCH", "resource", "200", ""), ("APPLY", "resource", "200", ""),
            ("POST", "resource", "201", "All"), ("DELETE", "resource", "200", ""),
            ("DELETE", "namespace", "200", ""),
        ]
        for verb, scope, code, dry_run in expected:
            key = ("apiserver_request_total",
                   request_labels(verb, "configmaps", scope, code, dry_run=dry_run))
            self.assertEqual(samples.get(key), 1.0, key)

    def test_duration_histogram_has_upstream_buckets(self):
        self.admin.get(CM)
        samples, types = self.scrape()
        self.assertEqual(types["apiserver_request_duration_seconds"], "histogram")
        labels = request_labels("LIST", "configmaps", "namespace")
        bounds = [le for (name, lbls) in samples
                  if name == "apiserver_request_duration_seconds_bucket"
                  and lbls[:-1] == labels for (k, le) in lbls[-1:]]
        self.assertEqual(bounds, [go_float(b) for b in (
            0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15,
            20, 30, 45, 60)] + ["+Inf"])
        self.assertEqual(samples[("apiserver_request_duration_seconds_count", labels)], 1.0)
        self.assertEqual(samples[("apiserver_request_duration_seconds_bucket",
                                  labels + (("le", "+Inf"),))], 1.0)

    def test_response_sizes_for_reads(self):
        body = self.admin.get(CM).body
        samples, _ = self.scrape()
        labels = tuple(kv for kv in request_labels("LIST", "configmaps", "namespace")
                       if kv[0] != "dry_run")
        self.assertEqual(samples[("apiserver_response_sizes_sum", labels)], len(body))
        self.assertEqual(samples[("apiserver_response_sizes_bucket",
                                  labels + (("le", "1000"),))], 1.0)

    def test_unauthenticated_and_unknown_not_counted(self):
        """As upstream, only requests that reach a handler (and 429s) are counted."""
        self.stub.client(user=None).get(CM)
        self.admin.get("/api/v1/namespaces/default/nosuchthings")
        samples, _ = self.scrape()
        self.assertEqual([k for k in samples if k[0] == "apiserver_request_total"
                          and dict(k[1]).get("code") in ("401", "404")], [])
        self.assertEqual(samples[("authentication_attempts", (("result", "failure"),))], 1.0)

    def test_too_many_requests_counted(self):
        """A 429 from the in-flight limit is counted, as upstream's RecordDroppedRequest."""
        limit = self.stub.api.max_in_flight
        limit.readonly, limit.in_flight[False] = 1, 1
        r = self.stub.client(user="jane", groups=()).get(CM)
        limit.in_flight[False] = 0
        self.assertEqual(r.code, 429)
        samples, _ = self.scrape()
        self.assertEqual(samples[("apiserver_request_total",
                                  request_labels("LIST", "configmaps", "namespace", "429"))],
                         1.0)

    def test_authentication_and_authorization(self):
        self.admin.get(CM)
        samples, types = self.scrape()
        self.assertEqual(types["authentication_attempts"], "counter")
        self.assertEqual(samples[("authentication_attempts", (("result", "success"),))], 2.0)
        self.assertEqual(samples[("authenticated_user_requests", (("username", "admin"),))],
                         2.0)
        self.assertEqual(samples[("authorization_attempts_total", (("result", "allowed"),))],
                         2.0)
        self.assertEqual(samples[("authentication_duration_seconds_count",
                                  (("result", "success"),))], 2.0)

    def test_watch_is_long_running_then_counted(self):
        watch = self.admin.watch(CM + "?watch=1")
        self.admin.post(CM, {"metadata": {"name": "w"}})
        self.stub.flush()
        samples, _ = self.scrape()
        labels = tuple(kv for kv in request_labels("WATCH", "configmaps", "namespace")
                       if kv[0] != "dry_run")
        self.assertEqual(samples[("apiserver_longrunning_requests", labels)], 1.0)
        self.assertEqual(samples[("apiserver_watch_events_total",
                                  (("group", ""), ("kind", "ConfigMap"), ("version", "v1")))],
                         1.0)
        watch.close()
        self.stub.flush()
        samples, _ = self.scrape()
        self.assertEqual(samples[("apiserver_longrunning_requests", labels)], 0.0)
        self.assertEqual(samples[("apiserver_request_total",
                                  request_labels("WATCH", "configmaps", "namespace", "200"))],
                         1.0)

    def test_storage_and_watch_cache(self):
        self.admin.post(CM, {"metadata": {"name": "a"}})
        samples, _ = self.scrape()
        self.assertEqual(samples[("apiserver_storage_objects", (("resource", "configmaps"),))],
                         1.0)
        self.assertEqual(samples[("apiserver_storage_objects",
                                  (("resource", "namespaces"),))], 4.0)
        self.assertEqual(samples[("apiserver_storage_objects", (
            ("resource", "clusterroles.rbac.authorization.platform.io"),))], 0.0)
        self.assertEqual(samples[("apiserver_watch_cache_events_received_total",
                                  (("group", ""), ("resource", "configmaps")))], 1.0)
        self.assertEqual(samples[("apiserver_watch_cache_initializations_total",
                                  (("group", ""), ("resource", "configmaps")))], 1.0)
        self.assertEqual(samples[("apiserver_current_inflight_requests",
                                  (("request_kind", "readOnly"),))], 1.0)  # the scrape
        self.assertEqual(samples[("apiserver_current_inflight_requests",
                                  (("request_kind", "mutating"),))], 0.0)

    def test_process_metrics(self):
        samples, types = self.scrape()
        self.assertEqual(types["process_cpu_seconds_total"], "counter")
        self.assertIn(("process_resident_memory_bytes", ()), samples)

    def test_each_server_has_its_own(self):
        other = StubServer()
        self.addCleanup(other.stop)
        self.admin.get(CM)
        samples, _ = parse(other.client().get("/metrics").body.decode())
        self.assertNotIn(("apiserver_request_total",
                          request_labels("LIST", "configmaps", "namespace", "200")), samples)


class AuthorizedMetricsTests(SynchronousTestCase):
    """``/metrics`` is the non-resource URL of upstream's ``system:monitoring`` role."""

    def test_rbac(self):
        stub = StubServer(rbac_policy=True, authorization=lambda internals: Authorization(
            AuthorizerChain([internals.rbac])))
        self.addCleanup(stub.stop)
        self.assertEqual(stub.client().get("/metrics").code, 200)
        self.assertEqual(stub.client(user="jane", groups=()).get("/metrics").code, 403)
        self.assertEqual(stub.client(user="prom", groups=("system:monitoring",))
                         .get("/metrics").code, 200)


class ExpositionTests(SynchronousTestCase):
    def test_text_format_as_go_writes_it(self):
        metrics = APIServerMetrics(process=False)
        metrics.authentication_attempts.inc(("success",), 3)
        metrics.watch_event_sizes.observe(("", "v1", "Pod"), 1500)
        text = metrics.registry.render().decode()
        self.assertIn("# HELP authentication_attempts [ALPHA] Counter of authenticated "
                      "attempts.\n# TYPE authentication_attempts counter\n"
                      'authentication_attempts{result="success"} 3\n', text)
        self.assertIn('apiserver_watch_events_sizes_bucket{group="",kind="Pod",version="v1",'
                      'le="1024"} 0\n', text)
        self.assertIn('apiserver_watch_events_sizes_bucket{group="",kind="Pod",version="v1",'
                      'le="2048"} 1\n', text)
        self.assertIn('apiserver_watch_events_sizes_bucket{group="",kind="Pod",version="v1",'
                      'le="131072"} 1\n', text)
        self.assertNotIn("apiserver_request_total", text)  # no series: not written


class AdmissionMetricsTests(SynchronousTestCase):
    def test_steps_and_controllers(self):
        stub = StubServer()
        self.addCleanup(stub.stop)
        admin = stub.client()
        step = "apiserver_admission_step_admission_duration_seconds_count"
        admitted = (step, (("operation", "CREATE"), ("rejected", "false"), ("type", "admit")))
        before, _ = parse(admin.get("/metrics").body.decode())
        admin.post(CM, {"metadata": {"name": "a"}})
        r = admin.post("/api/v1/namespaces/nosuch/configmaps", {"metadata": {"name": "a"}})
        self.assertEqual(r.code, 404)  # NamespaceLifecycle refuses
        samples, _ = parse(admin.get("/metrics").body.decode())
        # The built-in namespaces and service accounts were admitted before.
        self.assertEqual(samples[admitted] - before[admitted], 1.0)
        self.assertEqual(samples[(step, (("operation", "CREATE"), ("rejected", "true"),
                                         ("type", "admit")))], 1.0)
        controller = "apiserver_admission_controller_admission_duration_seconds_count"
        self.assertEqual(samples[(controller, (
            ("name", "NamespaceLifecycle"), ("operation", "CREATE"), ("rejected", "true"),
            ("type", "admit")))], 1.0)
