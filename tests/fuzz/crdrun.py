"""
Runs the CustomResourceDefinition fuzzer (issue 31, "Bad input") against a server and
judges every answer as ``check.problem`` does (no 5xx, each error a Status in its
encoding), plus one judgement of its own: no request may take ``SLOW`` seconds (the
server under test runs in this process, so a slow answer is a reactor held by a regex or
a rule).  Shared by ``test_crdfuzz.py`` and ``bench/fuzz.py --crds``.

Per definition drawn (``definitions.definition``): create it; if accepted, wait until it
is established (or refused its names), send ``per_definition`` object requests
(``definitions.objects``), then its changes (``definitions.changes``, each PUT over the
definition read back), then delete it, so that the server holds a bounded number of kinds.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter

import attrs
from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks, returnValue
from twisted.internet.task import deferLater

from tests.fuzz import check, definitions
from tests.fuzz.requests import FuzzRequest

#: Seconds one request may take before it counts as holding the loop.
SLOW = 5.0
#: Seconds a body may take to arrive: none of these requests opens a stream, and an
#: answer echoing a 2 MiB value takes longer than ``check.STREAM_WAIT`` under load.
BODY_WAIT = 30.0
#: Seconds an accepted definition has to be established.
ESTABLISH_WAIT = 10.0


@attrs.define
class Outcome:
    codes: Counter = attrs.Factory(Counter)
    problems: list = attrs.Factory(list)
    definitions: int = 0
    accepted: int = 0
    served: int = 0
    slowest: float = 0.0

    @property
    def requests(self) -> int:
        return sum(self.codes.values())


@inlineCallbacks
def _send(client, fuzzed: FuzzRequest, outcome: Outcome):
    started = time.monotonic()
    response = yield check.send(client, fuzzed, BODY_WAIT)
    took = time.monotonic() - started
    outcome.slowest = max(outcome.slowest, took)
    if response is None:
        outcome.codes["none"] += 1
        outcome.problems.append((fuzzed, f"no answer within {check.ANSWER_WAIT} s"))
        returnValue(None)
    outcome.codes[response.code] += 1
    found = check.problem(fuzzed, response)
    if found is None and took > SLOW:
        found = f"answered {response.code} after {took:.1f} s (the loop was held)"
    if found:
        outcome.problems.append((fuzzed, found))
    returnValue(response)


def _get(name: str) -> FuzzRequest:
    return FuzzRequest("GET", f"{definitions.CRDS}/{name}", {"Accept": "application/json"},
                       None)


@inlineCallbacks
def established(client, name: str):
    """The definition read back once established (None if its names were refused or it
    never was within ``ESTABLISH_WAIT``)."""
    deadline = time.monotonic() + ESTABLISH_WAIT
    while time.monotonic() < deadline:
        response = yield check.send(client, _get(name))
        if response is not None and response.code == 200:
            crd = json.loads(response.body)
            conditions = {c["type"]: c["status"]
                          for c in crd.get("status", {}).get("conditions", [])}
            if conditions.get("Established") == "True":
                returnValue(crd)
            if conditions.get("NamesAccepted") == "False":
                returnValue(None)
        yield deferLater(reactor, 0.02, lambda: None)
    returnValue(None)


@inlineCallbacks
def run(client, seed: int, count: int, per_definition: int):
    """The Outcome of ``count`` definitions drawn from ``seed``."""
    client.pool.persistent = False
    rng = random.Random(seed)
    outcome = Outcome()
    for index in range(count):
        crd = definitions.definition(rng, index)
        outcome.definitions += 1
        response = yield _send(client, definitions.create(rng, crd), outcome)
        if response is None or response.code != 201:
            continue
        outcome.accepted += 1
        name = json.loads(response.body)["metadata"]["name"]
        served = yield established(client, name)
        if served is not None:
            outcome.served += 1
            for fuzzed in definitions.objects(rng, served, per_definition):
                yield _send(client, fuzzed, outcome)
            for changed in definitions.changes(rng, served):
                current = yield check.send(client, _get(name))
                if current is not None and current.code == 200:
                    changed["metadata"] = json.loads(current.body)["metadata"]
                yield _send(client, definitions.update(changed), outcome)
        yield _send(client, FuzzRequest("DELETE", f"{definitions.CRDS}/{name}",
                                        {"Accept": "application/json"}, None), outcome)
    returnValue(outcome)
