"""
Two platformd replicas over one three-member etcd cluster (issue 17): what is written
through one is read, listed, paged and watched through the other, with the same
resource versions; and the faults: a member down, etcd unreachable or unresponsive.

The process's shared cluster (``shared_cluster``); each test gets its own
``--etcd-prefix`` so the replicas of one test see none of another's objects, and a test
that stops members starts them again.
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase

from platformd.api import deadline
from platformd.storage.etcd3.store import STALL_AFTER, EtcdStorage
from tests.e2e.harness import Client, open_watch, start_beside, start_server, token_client
from tests.etcd.cluster import fresh_prefix, shared_cluster


class ReplicasTestCase(TestCase):
    timeout = 60

    def setUp(self):
        self.cluster = shared_cluster()

    @inlineCallbacks
    def replicas(self, count: int = 2, *args):
        """
        ``count`` servers over the cluster under a prefix of this test's, sharing the
        first one's PKI as replicas behind a balancer do, and a client of each.
        """
        self.server_args = ("--storage-backend", "etcd3",
                            "--etcd-servers", ",".join(self.cluster.urls),
                            "--etcd-prefix", fresh_prefix(), "--etcd-compaction-interval", "0",
                            *args)
        first = yield start_server(self, *self.server_args)
        self.servers = [first]
        clients = [Client(self, first.pki_dir, first.port_number)]
        for _ in range(count - 1):
            clients.append((yield self.another()))
        return clients

    @inlineCallbacks
    def another(self):
        """One more replica beside those ``replicas`` started, and a client of it."""
        server = yield start_beside(self, self.servers[0], *self.server_args)
        self.servers.append(server)
        return Client(self, server.pki_dir, server.port_number)


class TwoReplicaTests(ReplicasTestCase):
    @inlineCallbacks
    def test_write_on_one_read_on_other(self):
        """A write on A is at once in a GET and a consistent LIST on B, same version."""
        a, b = yield self.replicas()
        created = yield a.post("/api/v1/namespaces/default/configmaps",
                               {"metadata": {"name": "one"}, "data": {"k": "v"}})
        self.assertEqual(created.code, 201, created.body)
        rv = created.json()["metadata"]["resourceVersion"]
        listed = yield b.get("/api/v1/namespaces/default/configmaps")
        self.assertEqual(listed.code, 200)
        [item] = listed.json()["items"]
        self.assertEqual((item["metadata"]["name"], item["metadata"]["resourceVersion"]),
                         ("one", rv))
        self.assertGreaterEqual(int(listed.json()["metadata"]["resourceVersion"]), int(rv))
        got = yield b.get("/api/v1/namespaces/default/configmaps/one?resourceVersion=" + rv)
        self.assertEqual(got.json()["data"], {"k": "v"})

    @inlineCallbacks
    def test_continue_token_across_replicas(self):
        """A continue token and resourceVersion from A page on through B."""
        a, b = yield self.replicas()
        for n in range(3):
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": f"cm{n}"}})
            self.assertEqual(r.code, 201, r.body)
        first = yield a.get("/api/v1/namespaces/default/configmaps?limit=2")
        meta = first.json()["metadata"]
        self.assertEqual([i["metadata"]["name"] for i in first.json()["items"]], ["cm0", "cm1"])
        rest = yield b.get("/api/v1/namespaces/default/configmaps?limit=2&continue="
                           + meta["continue"])
        self.assertEqual(rest.code, 200, rest.body)
        self.assertEqual([i["metadata"]["name"] for i in rest.json()["items"]], ["cm2"])
        self.assertEqual(rest.json()["metadata"]["resourceVersion"], meta["resourceVersion"])
        exact = yield b.get("/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact"
                            "&resourceVersion=" + meta["resourceVersion"])
        self.assertEqual(len(exact.json()["items"]), 3)

    @inlineCallbacks
    def test_watch_resumed_on_other_replica(self):
        """A watch from A's resourceVersion, resumed on B, gets every later change once."""
        a, b = yield self.replicas()
        r = yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w0"}})
        rv = r.json()["metadata"]["resourceVersion"]
        # Changes after rv, made while no watch is open.
        yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w1"}})
        yield a.delete("/api/v1/namespaces/default/configmaps/w0")
        response, reader = yield open_watch(
            b, f"/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}")
        self.assertEqual(response.code, 200)
        yield a.post("/api/v1/namespaces/default/configmaps", {"metadata": {"name": "w2"}})
        yield reader.wait_for(3)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in reader.events],
                         [("ADDED", "w1"), ("DELETED", "w0"), ("ADDED", "w2")])
        response._transport.loseConnection()


CM = "/api/v1/namespaces/default/configmaps"
RBAC_GROUP = "rbac.authorization.platform.io"
RB = f"/apis/{RBAC_GROUP}/v1/namespaces/default/rolebindings"


class BehindTests(ReplicasTestCase):
    """
    What upstream reads from etcd itself (a GET without resourceVersion, the object an
    update starts from, the state a ``sendInitialEvents`` watch begins with) is current
    on a replica whose cache has not yet heard of another replica's write: B's etcd
    watch is held while A writes, so without waiting for it B could only answer stale.
    Each request to B must wait (not answer within 0.3 s), then answer as if B had
    seen the write.
    """

    @inlineCallbacks
    def held_replicas(self):
        """Replicas A and B; ``hold()`` keeps B's etcd watch deliveries until ``release()``."""
        held: dict = {}
        deliver = EtcdStorage._delivered

        def delivered(store, revision, events):
            if store in held:
                held[store].append((revision, events))
            else:
                deliver(store, revision, events)
        # Before the replicas start: their watch streams take the method then.
        self.patch(EtcdStorage, "_delivered", delivered)
        a, b = yield self.replicas()
        store = self.servers[1].storage

        def hold():
            held[store] = []

        def release():
            for revision, events in held.pop(store):
                deliver(store, revision, events)
        return a, b, hold, release

    @inlineCallbacks
    def answered_after_release(self, request, release):
        """``request``'s answer, which must not come before ``release()``."""
        yield deferLater(reactor, 0.3, lambda: None)
        self.assertFalse(request.called, "answered before the replica caught up")
        release()
        response = yield request
        return response

    @inlineCallbacks
    def test_get_without_version(self):
        """GET (unset: Most Recent) waits; resourceVersion=0 (Any) answers at once."""
        a, b, hold, release = yield self.held_replicas()
        hold()
        r = yield a.post(CM, {"metadata": {"name": "one"}, "data": {"k": "v"}})
        any_version = yield b.get(f"{CM}/one?resourceVersion=0")
        self.assertEqual(any_version.code, 404)
        got = yield self.answered_after_release(b.get(f"{CM}/one"), release)
        self.assertEqual((got.code, got.json()["metadata"]["resourceVersion"]),
                         (200, r.json()["metadata"]["resourceVersion"]))

    @inlineCallbacks
    def test_update_with_version_read_elsewhere(self):
        """A PUT carrying the resourceVersion A answered is no conflict on B."""
        a, b, hold, release = yield self.held_replicas()
        r = yield a.post(CM, {"metadata": {"name": "cfg"}, "data": {"n": "1"}})
        yield b.get(f"{CM}/cfg?resourceVersion=" + r.json()["metadata"]["resourceVersion"])
        hold()
        r = yield a.put(f"{CM}/cfg", {**r.json(), "data": {"n": "2"}})
        self.assertEqual(r.code, 200, r.body)
        put = b.put(f"{CM}/cfg", {**r.json(), "data": {"n": "3"}})
        put = yield self.answered_after_release(put, release)
        self.assertEqual((put.code, put.json()["data"]), (200, {"n": "3"}), put.body)

    @inlineCallbacks
    def test_patch_of_object_created_elsewhere(self):
        """A PATCH on B of an object A just created is no 404."""
        a, b, hold, release = yield self.held_replicas()
        hold()
        r = yield a.post(CM, {"metadata": {"name": "new"}})
        self.assertEqual(r.code, 201, r.body)
        patched = yield self.answered_after_release(
            b.patch(f"{CM}/new", {"data": {"k": "v"}}), release)
        self.assertEqual((patched.code, patched.json()["data"]), (200, {"k": "v"}),
                         patched.body)

    @inlineCallbacks
    def test_put_of_object_created_elsewhere(self):
        """
        A PUT on B of a RoleBinding A just created (a kind whose update may create): the
        create B tries first fails, and the update decided again starts from the PUT's
        body (issue 26: refused for ``metadata.uid`` too, the uid the create had drawn).
        """
        a, b, hold, release = yield self.held_replicas()
        for name, role, expected in (("changed", "other", (422, ["roleRef"])),
                                     ("kept", "viewer", (200, None))):
            hold()
            r = yield a.post(RB, {"metadata": {"name": name},
                                  "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role",
                                              "name": "viewer"},
                                  "subjects": [{"kind": "User", "name": "alice"}]})
            self.assertEqual(r.code, 201, r.body)
            body = r.json()
            body["roleRef"]["name"] = role
            put = yield self.answered_after_release(b.put(f"{RB}/{name}", body), release)
            causes = put.json().get("details", {}).get("causes")
            self.assertEqual((put.code, causes and [c["field"] for c in causes]), expected,
                             put.body)
        self.assertEqual(put.json()["metadata"]["uid"], body["metadata"]["uid"])  # "kept"

    @inlineCallbacks
    def test_apply_over_object_created_elsewhere(self):
        """
        Server-side apply on B by a second manager of an object A just created: the
        attempt that found no object (its create lost) must leave the apply
        configuration as sent, else the attempt decided again takes the managedFields
        it wrote there for the client's and drops the first manager's entry; then
        alice's next apply kept the label she no longer applied (the flaky
        ServerSideApplyTestsOverTwoReplicas.test_fields_no_longer_applied_are_removed).
        """
        a, b, hold, release = yield self.held_replicas()

        def apply(client, manager, metadata, data):
            body = {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cfg", **metadata}, "data": data}
            return client.patch(f"{CM}/cfg?fieldManager={manager}", body,
                                content_type="application/apply-patch+yaml")

        def owners(r):
            return {e["manager"]: e["fieldsV1"] for e in r.json()["metadata"]["managedFields"]}
        hold()
        r = yield apply(a, "alice", {"labels": {"team": "a"}}, {"a": "1", "b": "2"})
        self.assertEqual(r.code, 201, r.body)
        r = yield self.answered_after_release(apply(b, "bob", {}, {"b": "2"}), release)
        self.assertEqual(r.code, 200, r.body)
        alice = {"f:data": {"f:a": {}, "f:b": {}}, "f:metadata": {"f:labels": {"f:team": {}}}}
        self.assertEqual(owners(r), {"alice": alice, "bob": {"f:data": {"f:b": {}}}})
        r = yield apply(a, "alice", {}, {"a": "1"})
        self.assertEqual((r.code, r.json()["metadata"].get("labels"), r.json()["data"]),
                         (200, None, {"a": "1", "b": "2"}), r.body)

    @inlineCallbacks
    def test_conflict_on_current_version_stands(self):
        """A stale resourceVersion is still 409 once B has caught up, as upstream's."""
        a, b, hold, release = yield self.held_replicas()
        r = yield a.post(CM, {"metadata": {"name": "old"}})
        stale = r.json()
        yield a.put(f"{CM}/old", {**stale, "data": {"n": "2"}})
        put = yield b.put(f"{CM}/old", {**stale, "data": {"n": "3"}})
        self.assertEqual((put.code, put.json()["reason"]), (409, "Conflict"))

    @inlineCallbacks
    def test_unchanged_put_of_overtaken_version(self):
        """
        A PUT of the very version B holds, which A has since changed, is 409 (not a
        no-op answered with B's old version): a write skipped as unchanged stands only
        on the stored version.
        """
        a, b, hold, release = yield self.held_replicas()
        r = yield a.post(CM, {"metadata": {"name": "same"}, "data": {"n": "1"}})
        first = r.json()
        yield b.get(f"{CM}/same?resourceVersion=" + first["metadata"]["resourceVersion"])
        hold()
        yield a.put(f"{CM}/same", {**first, "data": {"n": "2"}})
        put = yield self.answered_after_release(b.put(f"{CM}/same", first), release)
        self.assertEqual((put.code, put.json()["reason"]), (409, "Conflict"), put.body)

    @inlineCallbacks
    def test_admission_looks_up_live(self):
        """
        A namespace, and a pod's service account, A just created: admission on B looks
        them up again once up to date (upstream's live lookups), no 404 or 403; a
        dry-run create of an object A just created is 409 AlreadyExists.
        """
        a, b, hold, release = yield self.held_replicas()
        hold()
        r = yield a.post("/api/v1/namespaces", {"metadata": {"name": "fresh"}})
        self.assertEqual(r.code, 201, r.body)
        created = yield self.answered_after_release(
            b.post("/api/v1/namespaces/fresh/configmaps", {"metadata": {"name": "cm"}}),
            release)
        self.assertEqual(created.code, 201, created.body)
        hold()
        r = yield a.post("/api/v1/namespaces/fresh/serviceaccounts",
                         {"metadata": {"name": "robot"}})
        self.assertEqual(r.code, 201, r.body)
        pod = {"metadata": {"name": "p"},
               "spec": {"serviceAccountName": "robot",
                        "containers": [{"name": "c", "image": "busybox"}]}}
        created = yield self.answered_after_release(
            b.post("/api/v1/namespaces/fresh/pods", pod), release)
        self.assertEqual(created.code, 201, created.body)
        hold()
        yield a.post("/api/v1/namespaces/fresh/configmaps", {"metadata": {"name": "taken"}})
        dry = yield self.answered_after_release(
            b.post("/api/v1/namespaces/fresh/configmaps?dryRun=All",
                   {"metadata": {"name": "taken"}}), release)
        self.assertEqual((dry.code, dry.json()["reason"]), (409, "AlreadyExists"), dry.body)

    @inlineCallbacks
    def test_tokens_of_account_created_elsewhere(self):
        """
        For a service account A just created, B issues a token (upstream's TokenRequest
        reads the account from etcd), and a token A issued authenticates on B
        (upstream's token getter reads an account its informer lacks from the API).
        """
        a, b, hold, release = yield self.held_replicas()
        sa = "/api/v1/namespaces/default/serviceaccounts"
        hold()
        r = yield a.post(sa, {"metadata": {"name": "minted"}})
        self.assertEqual(r.code, 201, r.body)
        minted = yield self.answered_after_release(b.post(f"{sa}/minted/token", {}), release)
        self.assertEqual(minted.code, 201, minted.body)
        hold()
        r = yield a.post(sa, {"metadata": {"name": "robot"}})
        self.assertEqual(r.code, 201, r.body)
        r = yield a.post(f"{sa}/robot/token", {})
        self.assertEqual(r.code, 201, r.body)
        who = token_client(self, self.servers[1], r.json()["status"]["token"]).post(
            "/apis/authentication.platform.io/v1/selfsubjectreviews", {})
        who = yield self.answered_after_release(who, release)
        self.assertEqual((who.code, who.json()["status"]["userInfo"]["username"]),
                         (201, "system:serviceaccount:default:robot"), who.body)

    @inlineCallbacks
    def test_delete_collection(self):
        """A deletecollection on B deletes (and answers with) what A just created."""
        a, b, hold, release = yield self.held_replicas()
        hold()
        for name in ("x", "y"):
            r = yield a.post(CM, {"metadata": {"name": name}})
            self.assertEqual(r.code, 201, r.body)
        deleted = yield self.answered_after_release(b.delete(CM), release)
        self.assertEqual([i["metadata"]["name"] for i in deleted.json()["items"]], ["x", "y"])
        listed = yield a.get(CM)
        self.assertEqual(listed.json()["items"], [])

    @inlineCallbacks
    def test_initial_events_watch(self):
        """A sendInitialEvents watch without resourceVersion starts with A's write."""
        a, b, hold, release = yield self.held_replicas()
        hold()
        yield a.post(CM, {"metadata": {"name": "seen"}})
        response, reader = yield open_watch(
            b, f"{CM}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
               "&allowWatchBookmarks=true")
        self.assertEqual(response.code, 200)  # the headers go at once; the events wait
        yield self.answered_after_release(reader.wait_for(2), release)
        self.assertEqual([(e["type"], e["object"]["metadata"].get("name"))
                          for e in reader.events[:2]], [("ADDED", "seen"), ("BOOKMARK", None)])
        response._transport.loseConnection()


class FaultTests(ReplicasTestCase):
    @inlineCallbacks
    def test_one_member_down(self):
        """
        With a follower of three killed, reads and writes go on; it rejoins.  (A killed
        leader costs an election, during which etcd answers "request timed out" to the
        writes it was given: those answer 504, as upstream's.)
        """
        [a] = yield self.replicas(1)
        member = next(m for m in self.cluster.members if not m.is_leader())
        member.kill()
        try:
            for n in range(5):
                r = yield a.post("/api/v1/namespaces/default/configmaps",
                                 {"metadata": {"name": f"down{n}"}})
                self.assertEqual(r.code, 201, r.body)
            listed = yield a.get("/api/v1/namespaces/default/configmaps")
            self.assertEqual(len(listed.json()["items"]), 5)
        finally:
            member.start()
            member.wait_ready()

    @inlineCallbacks
    def test_one_member_unresponsive(self):
        """
        With a follower of three stopped (SIGSTOP: its connections stay open and it
        answers nothing), GETs and LISTs go on and ``/readyz/etcd`` passes: a quorum
        read (or the health check's) that went to it is made
        again to the next member after ``HEDGE_AFTER`` (``Client.hedged``), where it would
        have held every consistent read of the replica until keepalive (40 s) dropped
        the connection.
        """
        [a] = yield self.replicas(1, "--request-timeout", "40s")
        path = "/api/v1/namespaces/default/configmaps"
        r = yield a.post(path, {"metadata": {"name": "held"}})
        self.assertEqual(r.code, 201, r.body)
        member = next(m for m in self.cluster.members if not m.is_leader())
        member.pause()
        try:
            for _ in range(6):  # 12 quorum reads: some go to the stopped member
                started = reactor.seconds()
                got = yield a.get(path + "/held?timeout=5s")
                listed = yield a.get(path + "?timeout=5s")
                self.assertEqual((got.code, listed.code), (200, 200), got.body)
                self.assertEqual([i["metadata"]["name"] for i in listed.json()["items"]],
                                 ["held"])
                self.assertLess(reactor.seconds() - started, 2.5)
            for _ in range(4):  # one after another: each read to the next member
                ready = yield a.get("/readyz/etcd")
                self.assertEqual((ready.code, ready.body), (200, b"ok"))
        finally:
            member.resume()
            member.wait_ready()

    @inlineCallbacks
    def test_watch_member_unresponsive(self):
        """
        The member that holds replica A's watch stops answering (SIGSTOP) while B writes:
        A hears nothing of B's write, so a consistent GET on A waits for A's watch.
        After ``STALL_AFTER`` without a word while it waits, A opens its watch again on
        another member, and the GET answers, where keepalive would have taken 40-55 s.
        """
        before = [m.watch_streams() for m in self.cluster.members]
        [a] = yield self.replicas(1)
        grown = [m for m, was in zip(self.cluster.members, before) if m.watch_streams() > was]
        self.assertEqual(len(grown), 1)  # A's one stream (its prefix's and compactions')
        [held] = grown
        b = yield self.another()
        path = "/api/v1/namespaces/default/configmaps"
        held.pause()
        try:
            for n in range(20):  # a write that goes to the stopped member times out
                name = f"from-b-{n}"
                r = yield b.post(path + "?timeout=1s", {"metadata": {"name": name}})
                if r.code == 201:
                    break
            self.assertEqual(r.code, 201, r.body)
            started = reactor.seconds()
            got = yield a.get(f"{path}/{name}?timeout=30s")
            self.assertEqual(got.code, 200, got.body)
            # A reopened watch may land on the stopped member again: a few turns.
            self.assertLess(reactor.seconds() - started, 6 * STALL_AFTER)
        finally:
            held.resume()
            held.wait_ready()

    @inlineCallbacks
    def test_etcd_unresponsive(self):
        """
        With every member stopped (SIGSTOP: the connections stay open and nothing
        answers, as with a hung disk or host), a create, an update, a delete, a GET and
        a LIST asking for ``timeout=2s`` each answer upstream's timeout handler's 504
        after 2 s, not after the server's request timeout, and ``/readyz/etcd`` fails;
        once the members go on, writes succeed again.  (A write answered 504 may yet be
        applied, as upstream's may.)
        """
        [a] = yield self.replicas(1, "--request-timeout", "40s")
        path = "/api/v1/namespaces/default/configmaps"
        r = yield a.post(path, {"metadata": {"name": "held"}})
        self.assertEqual(r.code, 201, r.body)
        for member in self.cluster.members:
            member.pause()
        try:
            for ask in (lambda: a.post(path + "?timeout=2s", {"metadata": {"name": "late"}}),
                        lambda: a.put(path + "/held?timeout=2s",
                                      {"metadata": {"name": "held"}, "data": {"k": "v"}}),
                        lambda: a.delete(path + "/held?timeout=2s"),
                        lambda: a.get(path + "/held?timeout=2s"),
                        lambda: a.get(path + "?timeout=2s")):
                started = reactor.seconds()
                r = yield ask()
                took = reactor.seconds() - started
                self.assertEqual((r.code, r.body), (504, deadline.TIMEOUT_BODY))
                self.assertTrue(2 <= took < 10, took)
            ready = yield a.get("/readyz/etcd")
            self.assertEqual((ready.code, ready.body),
                             (500, b"internal server error: storage did not answer in time\n"))
        finally:
            for member in self.cluster.members:
                member.resume()
            for member in self.cluster.members:
                member.wait_ready()
        for _ in range(100):  # the members elect again, perhaps
            r = yield a.post(path, {"metadata": {"name": "after"}})
            if r.code == 201:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(r.code, 201, r.body)

    @inlineCallbacks
    def readiness(self, client, code: int):
        """Poll ``/readyz/etcd-readiness`` until it answers ``code`` (the watch's
        connection changes a moment after etcd's); the last answer."""
        for _ in range(100):
            r = yield client.get("/readyz/etcd-readiness")
            if r.code == code:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        return r

    @inlineCallbacks
    def test_etcd_unreachable(self):
        """
        With no member up, a write answers 504 within the request timeout (upstream's
        finisher's Timeout, no Retry-After), /readyz fails its etcd-readiness check, a
        watch stays open, and all work again once etcd is back.
        """
        [a] = yield self.replicas(1, "--request-timeout", "2s")
        ready = yield a.get("/readyz/etcd-readiness")
        self.assertEqual((ready.code, ready.body), (200, b"ok"))
        response, reader = yield open_watch(
            a, "/api/v1/namespaces/default/configmaps?watch=1")
        for member in self.cluster.members:
            member.kill()
        try:
            ready = yield self.readiness(a, 500)
            self.assertEqual((ready.code, ready.body),
                             (500, b"internal server error: etcd watch is not connected\n"))
            whole = yield a.get("/readyz")
            self.assertEqual(whole.code, 500)
            self.assertIn(b"[-]etcd-readiness failed: reason withheld\n", whole.body)
            started = reactor.seconds()
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "lost"}})
            self.assertLess(reactor.seconds() - started, 10)
            # The request deadline (api/deadline.py) and the etcd call's are the same:
            # whichever fires first, upstream's 504 Timeout.
            self.assertEqual(r.code, 504, r.body)
            self.assertEqual(r.json()["reason"], "Timeout")
            self.assertTrue(r.json()["message"].startswith(
                "Timeout: request did not complete within"), r.json()["message"])
            self.assertEqual(r.headers_named("Retry-After"), [])
        finally:
            for member in self.cluster.members:
                member.start()
            for member in self.cluster.members:
                member.wait_ready()
        self.assertFalse(reader.finished.called)
        for _ in range(100):  # the channel reconnects with backoff
            r = yield a.post("/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": "back"}})
            if r.code == 201:
                break
            yield deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(r.code, 201, r.body)
        ready = yield self.readiness(a, 200)
        self.assertEqual((ready.code, ready.body), (200, b"ok"))
        yield reader.wait_for(1)
        self.assertEqual(reader.events[-1]["object"]["metadata"]["name"], "back")
        response._transport.loseConnection()


class RefusalTests(ReplicasTestCase):
    @inlineCallbacks
    def test_value_over_etcd_request_limit(self):
        """
        An object etcd refuses to store (over its default --max-request-bytes, 1.5 MiB,
        yet under the API's 3 MiB body limit) is answered as upstream answers clientv3's
        error: 500, no reason, etcd's text; nothing is stored, on create or on update.
        Over 2 MiB clientv3 refuses to send it, in grpc-go's words.  (A ClusterRole:
        ConfigMaps and Secrets are refused at 1 MiB before they reach the store.)
        """
        [client] = yield self.replicas(1)
        refusal = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                   "message": "etcdserver: request is too large", "code": 500}
        path = "/apis/rbac.authorization.platform.io/v1/clusterroles"

        def role(resource):
            return {"metadata": {"name": "big"},
                    "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get"]}]}

        big = "x" * 1_700_000
        r = yield client.post(path, role(big))
        self.assertEqual((r.code, r.json()), (500, refusal))
        r = yield client.get(path + "/big")
        self.assertEqual(r.code, 404)
        r = yield client.post(path, role("small"))
        self.assertEqual(r.code, 201, r.body)
        r = yield client.put(path + "/big", role(big))
        self.assertEqual((r.code, r.json()), (500, refusal))
        r = yield client.get(path + "/big")
        self.assertEqual(r.json()["rules"][0]["resources"], ["small"])
        # Over clientv3's 2 MiB: its refusal, the call never made (etcd's own would be
        # gRPC's "received message larger than max").
        r = yield client.put(path + "/big", role("x" * (2 * 1024 * 1024)))
        self.assertEqual(r.code, 500)
        self.assertRegex(r.json()["message"], r"\Arpc error: code = ResourceExhausted desc = "
                         r"trying to send message larger than max \(2097\d{3} vs\. 2097152\)\Z")
