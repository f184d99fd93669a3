"""
The policies and their bindings, read live from their listers (``ILister``):
each policy compiled once per object version, bindings grouped under the policy they
name (a binding of a policy that does not exist does nothing).  Policies go in name
order, each one's bindings in name order.
"""

from __future__ import annotations

from platformd.admission.policy.compiled import compile_policy


class PolicySource:
    def __init__(self, policies, bindings):
        #: The ``ILister``s of ValidatingAdmissionPolicy and its binding.
        self.policies = policies
        self.bindings = bindings
        #: storage key → (cache entry, compiled policy).
        self._compiled: dict = {}

    def hooks(self) -> list:
        """``[(Policy, [binding object, ...]), ...]`` of the policies with bindings."""
        policies = self.policies.list()
        bindings = self.bindings.list()
        if not policies or not bindings:
            self._compiled.clear()
            return []
        by_policy: dict = {}
        for entry in bindings:
            binding = entry.obj
            by_policy.setdefault((binding.get("spec") or {}).get("policyName"), []).append(
                binding)
        out = []
        for entry in sorted(policies, key=lambda e: e.name):
            bound = by_policy.get(entry.name)
            if not bound:
                continue
            kept = self._compiled.get(entry.key)
            if kept is None or kept[0] is not entry:
                kept = self._compiled[entry.key] = (entry, compile_policy(entry.obj))
            out.append((kept[1], sorted(bound, key=lambda b: b["metadata"]["name"])))
        if len(self._compiled) > len(policies):
            current = {entry.key for entry in policies}
            for key in [k for k in self._compiled if k not in current]:
                del self._compiled[key]
        return out
