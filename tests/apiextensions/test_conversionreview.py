"""The ConversionReview sent and the answer's checks, in upstream's words."""

from __future__ import annotations

import orjson
from twisted.trial.unittest import SynchronousTestCase

from platformd.apiextensions import conversionreview as review

WIDGET = {"apiVersion": "example.com/v1", "kind": "Widget",
          "metadata": {"name": "a", "namespace": "default", "uid": "u1",
                       "labels": {"x": "y"}, "generation": 2}}


def answer(version: str, uid: str, objects, **result) -> bytes:
    return orjson.dumps({
        "apiVersion": f"apiextensions.platform.io/{version}", "kind": "ConversionReview",
        "response": {"uid": uid, "result": result or {"status": "Success"},
                     "convertedObjects": objects}})


class ReviewTests(SynchronousTestCase):
    def test_first_known_version(self):
        """The first of conversionReviewVersions this server knows is sent."""
        version, body = review.request(["v2", "v1beta1", "v1"], [WIDGET], "example.com/v2", "id")
        self.assertEqual(version, "v1beta1")
        sent = orjson.loads(body)
        self.assertEqual((sent["apiVersion"], sent["request"]["uid"],
                          sent["request"]["desiredAPIVersion"]),
                         ("apiextensions.platform.io/v1beta1", "id", "example.com/v2"))
        with self.assertRaises(review.ReviewError) as caught:
            review.request(["v2"], [WIDGET], "example.com/v2", "id")
        self.assertEqual(str(caught.exception), "no supported conversion review versions")

    def test_v1beta1_answer_uid_not_checked(self):
        """As upstream, a v1beta1 answer's uid and type are not checked; v1's are."""
        body = answer("v1beta1", "other", [])
        self.assertEqual(review.converted("v1beta1", "id", body), [])
        with self.assertRaises(review.ReviewError) as caught:
            review.converted("v1", "id", body)
        self.assertEqual(str(caught.exception), (
            "expected webhook response of apiextensions.platform.io/v1, Kind=ConversionReview,"
            " got apiextensions.platform.io/v1beta1, Kind=ConversionReview"))
        with self.assertRaises(review.ReviewError) as caught:
            review.converted("v1", "id", answer("v1", "id", [], status="Failure"))
        self.assertEqual(str(caught.exception),
                         "response.result.status was 'Failure', not 'Success'")

    def test_only_labels_and_annotations_change(self):
        out = {**WIDGET, "apiVersion": "example.com/v2",
               "metadata": {"name": "a", "namespace": "default", "uid": "u1",
                            "generation": 9, "annotations": {"n": "v"}}}
        kept = review.check_object(WIDGET, out, "example.com/v2", 0, True)
        self.assertEqual(kept["metadata"], {"name": "a", "namespace": "default", "uid": "u1",
                                            "generation": 2, "annotations": {"n": "v"}})
        bad = {**out, "metadata": {**WIDGET["metadata"], "labels": {"x": "not ok!"}}}
        with self.assertRaises(review.ReviewError) as caught:
            review.check_object(WIDGET, bad, "example.com/v2", 3, False)
        self.assertTrue(str(caught.exception).startswith(
            'returned invalid metadata in object at index 3: metadata.labels: Invalid value: '
            '"not ok!": a valid label must be'), str(caught.exception))
        with self.assertRaises(review.ReviewError) as caught:
            review.check_object(WIDGET, {**out, "apiVersion": "example.com/v1"},
                                "example.com/v2", 0, False)
        self.assertEqual(str(caught.exception), (
            "returned invalid converted object at index 0: invalid groupVersion "
            "(expected example.com/v2, received example.com/v1)"))
