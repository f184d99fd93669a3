"""
The policies and their bindings, read live from the watch cache (``KindCache.objects``):
each policy compiled once per object version, bindings grouped under the policy they
name (a binding of a policy that does not exist does nothing).  Policies go in name
order, each one's bindings in name order.
"""

from __future__ import annotations

from platformd.admission.policy.compiled import compile_policy


class PolicySource:
    def __init__(self, policies, bindings):
        #: The ``KindCache``s of ValidatingAdmissionPolicy and its binding.
        self.policies = policies
        self.bindings = bindings
        #: storage key → (cache entry, compiled policy).
        self._compiled: dict = {}

    def hooks(self) -> list:
        """``[(Policy, [binding object, ...]), ...]`` of the policies with bindings."""
        policies = self.policies.objects
        bindings = self.bindings.objects
        if not policies or not bindings:
            self._compiled.clear()
            return []
        by_policy: dict = {}
        for entry in bindings.values():
            binding = entry.obj
            by_policy.setdefault((binding.get("spec") or {}).get("policyName"), []).append(
                binding)
        out = []
        for key in sorted(policies, key=lambda k: policies[k].name):
            entry = policies[key]
            bound = by_policy.get(entry.name)
            if not bound:
                continue
            kept = self._compiled.get(key)
            if kept is None or kept[0] is not entry:
                kept = self._compiled[key] = (entry, compile_policy(entry.obj))
            out.append((kept[1], sorted(bound, key=lambda b: b["metadata"]["name"])))
        if len(self._compiled) > len(policies):
            for key in [k for k in self._compiled if k not in policies]:
                del self._compiled[key]
        return out
