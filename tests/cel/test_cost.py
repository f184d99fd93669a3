"""
``platformd.cel.cost``: cel-go's estimator with sizes from an ``ISizeEstimator`` (the CRD
schema's sizes are tested with upstream's cases in tests/apiextensions/schema/test_cost.py),
and upstream's limits as ``platformd.cel`` names them.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase
from zope.interface import implementer
from zope.interface.verify import verifyObject

from platformd import cel
from platformd.cel import cost

M = cost.MAX_UINT64


@implementer(cost.ISizeEstimator)
class Sizes:
    """Sizes by path; ``calls``: a cost per overload."""

    def __init__(self, sizes: dict, calls: dict | None = None):
        self.sizes, self.calls = sizes, calls or {}
        self.asked: list = []

    def estimate_size(self, path):
        self.asked.append(list(path))
        return self.sizes.get(tuple(path))

    def is_map_or_object(self, path):
        return False

    def estimate_call_cost(self, function, overload, target_size, arg_sizes):
        return self.calls.get(overload)


class CostTests(SynchronousTestCase):
    def setUp(self):
        self.env = cel.Environment({"s": cel.STRING, "t": cel.STRING,
                                    "names": cel.list_of(cel.STRING), "n": cel.INT})

    def cost(self, source: str, sizes=cost.UNKNOWN_SIZES) -> int:
        return self.env.compile(source).estimated_cost(sizes)

    def test_estimators_provide_the_interface(self):
        verifyObject(cost.ISizeEstimator, cost.UNKNOWN_SIZES)
        verifyObject(cost.ISizeEstimator, Sizes({}))

    def test_constant_costs(self):
        self.assertEqual(self.cost("1 + 2"), 1)
        self.assertEqual(self.cost("n > 1 && n < 5"), 4)
        self.assertEqual(self.cost("[1, 2, 3]"), 10)
        self.assertEqual(self.cost("{'a': 1}"), 30)
        self.assertEqual(self.cost("n > 1 ? 'a' : 'b'"), 2)

    def test_string_traversals_use_the_estimator(self):
        # contains: 0.1 per byte of each side, multiplied; plus the two identifiers
        self.assertEqual(self.cost("s.contains(t)", Sizes({("s",): 100, ("t",): 10})), 12)
        self.assertEqual(self.cost("s.startsWith('ab')", Sizes({("s",): 100})), 2)
        # unknown: cel-go's 2^64 - 1, saturating
        self.assertEqual(self.cost("s.contains(t)"), M)

    def test_comprehensions_cost_their_range_size(self):
        sizes = Sizes({("names",): 5, ("names", "@items"): 8})
        # range 1 + accumulator init 0 + result (the accumulator) 1 + 5 × (loop
        # condition @not_strictly_false(acc) 2 + step acc && x.size() < 10: 1 + 3)
        bounded = self.cost("names.all(x, x.size() < 10)", sizes)
        self.assertEqual(bounded, 1 + 1 + 5 * (2 + 4))
        self.assertIn(["names"], sizes.asked)
        self.assertEqual(self.cost("names.all(x, x.size() < 10)"), M)

    def test_call_costs_from_the_estimator(self):
        sizes = Sizes({("s",): 100}, {"size_string": 7, "string_size": 7})
        self.assertEqual(self.cost("size(s) > 1", sizes), 1 + 7 + 1)
        self.assertEqual(self.cost("size(s) > 1", Sizes({("s",): 100})), 1 + 1 + 1)

    def test_checked_is_the_checked_ast(self):
        tree = self.env.compile("n + 1").checked()
        self.assertEqual(tree.expr.call_expr.function, "_+_")
        self.assertEqual(list(tree.reference_map[tree.expr.id].overload_id), ["add_int64"])

    def test_upstream_limits(self):
        # k8s.io/apiserver/pkg/apis/cel/config.go
        self.assertEqual(cel.PER_CALL_LIMIT, 1_000_000)
        self.assertEqual(cel.RUNTIME_CEL_COST_BUDGET, 10_000_000)
        self.assertEqual(cel.CHECK_FREQUENCY, 100)
        self.assertEqual(cel.MAX_REQUEST_SIZE_BYTES, 3 * 1024 * 1024)
        self.assertEqual(cel.MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES, 5 * 1024)
        # apiextensions-apiserver's pkg/apis/apiextensions/validation
        self.assertEqual(cel.STATIC_ESTIMATED_COST_LIMIT, 10_000_000)
        self.assertEqual(cel.STATIC_ESTIMATED_CRD_COST_LIMIT, 100_000_000)

    def test_no_static_limit_for_admission(self):
        """Upstream estimates no cost for admission's expressions when they are written,
        so an expression of unbounded estimate compiles (and would be accepted)."""
        from platformd.cel.admission import policy_environment
        program = policy_environment().compile(
            "object.spec.items.all(x, object.spec.items.all(y, x != y))", cel.BOOL)
        self.assertGreater(program.estimated_cost(), cel.STATIC_ESTIMATED_COST_LIMIT)
