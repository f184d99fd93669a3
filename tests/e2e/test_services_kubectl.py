"""
Stock kubectl's service commands against a real server: ``create service`` gets an
address from ``--service-cluster-ip-range``, ``expose`` of a pod copies its labels and
ports, ``get svc`` prints upstream's columns (server-side Table), ``get endpoints`` and
``get endpointslices`` the server's own, ``delete`` gives the address back.
"""

from __future__ import annotations

import ipaddress
import json

from twisted.internet.defer import inlineCallbacks

from tests.e2e.test_clients import KubectlCase

NS = ("-n", "team")


class ServiceKubectlTests(KubectlCase):
    @inlineCallbacks
    def succeeds(self, *args, stdin=None):
        """``kubectl args``, which must succeed: its standard output."""
        r = yield self.run_kubectl(*args, stdin=stdin)
        self.assertEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stderr}")
        return r.stdout

    @inlineCallbacks
    def refused(self, *args):
        """``kubectl args``, which must fail: its standard error."""
        r = yield self.run_kubectl(*args)
        self.assertNotEqual(r.returncode, 0, f"kubectl {' '.join(args)}: {r.stdout}")
        return r.stderr.strip()

    @inlineCallbacks
    def setUp(self):
        yield super().setUp()
        yield self.succeeds("create", "namespace", "team")

    @inlineCallbacks
    def test_create_service_clusterip(self):
        out = yield self.succeeds(*NS, "create", "service", "clusterip", "web", "--tcp=80:8080")
        self.assertEqual(out, "service/web created\n")
        svc = json.loads((yield self.succeeds(*NS, "get", "svc", "web", "-o", "json")))
        ip = ipaddress.ip_address(svc["spec"]["clusterIP"])
        self.assertIn(ip, ipaddress.ip_network("10.0.0.0/24"))
        self.assertEqual(svc["spec"]["ports"], [{"name": "80-8080", "protocol": "TCP",
                                                 "port": 80, "targetPort": 8080}])
        self.assertEqual(svc["spec"]["selector"], {"app": "web"})
        out = yield self.succeeds(*NS, "get", "svc")
        header, row = out.splitlines()
        self.assertEqual(header.split(), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP",
                                          "PORT(S)", "AGE"])
        self.assertEqual(row.split()[:5], ["web", "ClusterIP", str(ip), "<none>", "80/TCP"])
        out = yield self.succeeds(*NS, "get", "svc", "-o", "wide")
        header, row = out.splitlines()
        self.assertEqual(header.split()[-1], "SELECTOR")
        self.assertEqual(row.split()[-1], "app=web")
        # Deleted, its address is free again.
        yield self.succeeds(*NS, "delete", "service", "web")
        yield self.succeeds(*NS, "create", "service", "clusterip", "again", "--tcp=80",
                            f"--clusterip={ip}")

    @inlineCallbacks
    def test_create_nodeport_and_refusals(self):
        out = yield self.succeeds(*NS, "create", "service", "nodeport", "np", "--tcp=80:8080",
                                  "--node-port=30080")
        self.assertEqual(out, "service/np created\n")
        row = (yield self.succeeds(*NS, "get", "svc", "np", "--no-headers")).split()
        self.assertEqual(row[:2] + row[3:5], ["np", "NodePort", "<none>", "80:30080/TCP"])
        err = yield self.refused(*NS, "create", "service", "nodeport", "np2", "--tcp=80",
                                 "--node-port=30080")
        self.assertIn('Service "np2" is invalid: spec.ports[0].nodePort: Invalid value: '
                      '30080: provided port is already allocated', err)
        err = yield self.refused(*NS, "create", "service", "clusterip", "far", "--tcp=80",
                                 "--clusterip=192.168.7.7")
        self.assertIn("failed to allocate IP 192.168.7.7: the provided IP (192.168.7.7) is "
                      "not in the valid range. The range of valid IPs is 10.0.0.0/24", err)
        # Server-side dry run shows an address and reserves nothing.
        out = yield self.succeeds(*NS, "create", "service", "clusterip", "dry", "--tcp=80",
                                  "--dry-run=server", "-o", "json")
        self.assertEqual(json.loads(out)["spec"]["clusterIP"], "10.0.0.0")
        yield self.refused(*NS, "get", "svc", "dry")

    @inlineCallbacks
    def test_create_loadbalancer_and_externalname(self):
        out = yield self.succeeds(*NS, "create", "service", "loadbalancer", "lb", "--tcp=443")
        self.assertEqual(out, "service/lb created\n")
        out = yield self.succeeds(*NS, "create", "service", "externalname", "db",
                                  "--external-name=db.example.com")
        self.assertEqual(out, "service/db created\n")
        rows = {line.split()[0]: line.split() for line in
                (yield self.succeeds(*NS, "get", "svc", "--no-headers")).splitlines()}
        self.assertEqual(rows["lb"][1], "LoadBalancer")
        self.assertEqual(rows["lb"][3], "<pending>")
        self.assertRegex(rows["lb"][4], r"^443:3\d{4}/TCP$")
        self.assertEqual(rows["db"][1:5], ["ExternalName", "<none>", "db.example.com",
                                           "<none>"])

    @inlineCallbacks
    def test_expose_pod(self):
        yield self.succeeds(*NS, "run", "p", "--image=nginx", "--port=8080",
                            "--labels=app=p,tier=web")
        out = yield self.succeeds(*NS, "expose", "pod", "p", "--port=80")
        self.assertEqual(out, "service/p exposed\n")
        svc = json.loads((yield self.succeeds(*NS, "get", "svc", "p", "-o", "json")))
        self.assertEqual(svc["spec"]["selector"], {"app": "p", "tier": "web"})
        # No --target-port: the port itself (kubectl's and upstream's default).
        self.assertEqual(svc["spec"]["ports"], [{"protocol": "TCP", "port": 80,
                                                 "targetPort": 80}])
        row = (yield self.succeeds(*NS, "get", "svc", "p", "--no-headers", "-o", "wide")).split()
        self.assertEqual((row[1], row[4], row[-1]), ("ClusterIP", "80/TCP", "app=p,tier=web"))

    @inlineCallbacks
    def test_apply_twice_keeps_the_address(self):
        """Client-side apply, then a changed apply: the address and node port stay."""
        manifest = ("apiVersion: v1\nkind: Service\nmetadata:\n  name: applied\n"
                    "spec:\n  type: NodePort\n  selector:\n    app: a\n  ports:\n"
                    "  - port: 80\n    targetPort: 8080\n")
        out = yield self.run_kubectl(*NS, "apply", "-f", "-", stdin=manifest)
        self.assertEqual(out.returncode, 0, out.stderr)
        first = json.loads((yield self.succeeds(*NS, "get", "svc", "applied", "-o", "json")))
        out = yield self.run_kubectl(*NS, "apply", "-f", "-",
                                     stdin=manifest.replace("app: a", "app: b"))
        self.assertEqual(out.returncode, 0, out.stderr)
        second = json.loads((yield self.succeeds(*NS, "get", "svc", "applied", "-o", "json")))
        self.assertEqual(second["spec"]["selector"], {"app": "b"})
        self.assertEqual(second["spec"]["clusterIP"], first["spec"]["clusterIP"])
        self.assertEqual(second["spec"]["ports"][0]["nodePort"],
                         first["spec"]["ports"][0]["nodePort"])
        # Server-side apply too.
        out = yield self.run_kubectl(*NS, "apply", "--server-side", "-f", "-",
                                     stdin=manifest.replace("applied", "ssa"))
        self.assertEqual(out.returncode, 0, out.stderr)

    @inlineCallbacks
    def test_describe_explain_get_all_and_endpoints(self):
        yield self.succeeds(*NS, "create", "service", "clusterip", "web", "--tcp=80:8080")
        out = yield self.succeeds(*NS, "describe", "service", "web", "--show-events=false")
        self.assertIn("Type:                     ClusterIP", out)
        self.assertIn("TargetPort:               8080/TCP", out)
        out = yield self.succeeds("explain", "service.spec.ports.targetPort")
        self.assertIn("targetPort", out)
        out = yield self.succeeds(*NS, "get", "all")
        self.assertIn("service/web", out)
        r = yield self.run_kubectl(*NS, "get", "endpoints")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Warning: v1 Endpoints is deprecated in v1.33+; use "
                      "discovery.platform.io/v1 EndpointSlice", r.stderr)
        r = yield self.run_kubectl(*NS, "get", "endpointslices")
        self.assertEqual((r.returncode, r.stderr.strip()),
                         (0, "No resources found in team namespace."))

    @inlineCallbacks
    def test_the_servers_own_service(self):
        row = (yield self.succeeds("get", "svc", "platform", "--no-headers")).split()
        self.assertEqual(row[:5], ["platform", "ClusterIP", "10.0.0.1", "<none>", "443/TCP"])
        out = yield self.succeeds("get", "endpointslices", "-o", "json")
        slices = {i["metadata"]["name"]: i for i in json.loads(out)["items"]}
        if "platform" in slices:  # the host has an address others reach
            port = slices["platform"]["ports"][0]["port"]
            self.assertEqual(port, self.server.port_number)
            out = yield self.succeeds("get", "endpoints", "platform", "--no-headers")
            self.assertIn(f":{port}", out)
