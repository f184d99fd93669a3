"""
A CustomResourceDefinition's conversion webhook, called (``spec.conversion.strategy:
Webhook``): upstream's ``webhookConverter.Convert`` without blocking.

``WebhookConverter.convert(objects, desired)`` sends the objects not already in the
desired apiVersion in one ``ConversionReview`` (``apiextensions/conversionreview.py``)
and gives a Deferred of every object in ``desired``, in order.  The call is the
admission webhooks' (``admission/webhooks/client.Caller``): HTTPS verified with the
definition's ``caBundle``, ``clientConfig.url`` through the egress selector's
``controlplane`` network or ``clientConfig.service`` at ``<name>.<namespace>.svc``
through ``cluster``, ``?timeout=30s`` and a 30 s deadline (upstream's
``defaultRequestTimeout`` for webhooks), and an answer of at most
``RESPONSE_BYTES_PER_OBJECT`` per object sent (plus as much again) read, the rest
refused.  A failure is a ``StatusError`` 500 with upstream's message
(``conversion webhook for example.com/v1, Kind=Widget failed: ...``) and no reason, as
upstream's plain error is rendered (``ErrorToAPIStatus``: ``StatusReasonUnknown``).

The GroupVersionKind named is the one upstream's ``webhookConverter.Convert`` names,
``in.GetObjectKind().GroupVersionKind()``: for one object, its stored apiVersion and
kind.  Upstream converts an ``UnstructuredList`` in one review too, naming the list
(the served version and ``listKind``, as the CRD store's ``NewListFunc`` stamps it),
but only the encoding of a list answer reaches that, with every item already in the
version (no call); the objects read from etcd, through the cacher or not, are decoded
and converted one by one.  A review here carries the objects of a batch (a turn's
events, a resync) that upstream would have converted one call each, so its error names
the first object sent, as the first of those calls would have.
"""

from __future__ import annotations

import base64
import binascii
from typing import Optional

import attrs
import orjson
from twisted.internet.defer import fail, succeed

from platformd import errors
from platformd.admission.webhooks.client import TransportError
from platformd.admission.webhooks.errors import CallError
from platformd.admission.webhooks.source import service_url
from platformd.apiextensions import conversionreview as review
from platformd.goformat.gotext import go_quote
from platformd.util.ids import random_uuid

#: Upstream's webhook client timeout (``k8s.io/apiserver/pkg/util/webhook``).
TIMEOUT = 30.0
#: Bytes of answer read per object sent (an object is at most about 1.5 MiB in storage).
RESPONSE_BYTES_PER_OBJECT = 3 * 1024 * 1024


@attrs.frozen
class ConversionHook:
    """What ``Caller`` needs of a webhook, for one definition's conversion webhook."""

    name: str
    url: str
    service: Optional[dict]
    ca_bundle: bytes
    timeout: float = TIMEOUT


def hook_for(crd: dict) -> ConversionHook:
    """The definition's ``spec.conversion.webhook.clientConfig`` as a ``ConversionHook``
    (a caBundle of white space only is none, as upstream treats it)."""
    webhook = ((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
    config = webhook.get("clientConfig") or {}
    try:
        ca_bundle = base64.b64decode(config.get("caBundle") or "")
    except (binascii.Error, ValueError):
        ca_bundle = b""
    service = config.get("service")
    return ConversionHook(
        f"conversion_webhook_for_{(crd.get('metadata') or {}).get('name', '')}",
        service_url(service) if service else config.get("url") or "", service,
        ca_bundle if ca_bundle.strip() else b"")


class WebhookConverter:
    """One definition's conversion webhook (see module docstring)."""

    def __init__(self, crd: dict, caller):
        self.caller = caller
        self.hook = hook_for(crd)
        webhook = ((crd.get("spec") or {}).get("conversion") or {}).get("webhook") or {}
        self.review_versions = tuple(webhook.get("conversionReviewVersions") or ())
        #: Reviews sent (tests and figures read it).
        self.reviews = 0

    def convert(self, objects: list, desired: str):
        """Deferred[list]: ``objects`` (dicts) in ``desired``, each kept in place; those
        already in it are not sent (no review at all when none needs one)."""
        indexes = review.needing_conversion(objects, desired)
        if not indexes:
            return succeed(list(objects))
        sent = [objects[i] for i in indexes]
        # Upstream's storage codec converts each object read from etcd on its own, its
        # error naming that object's GroupVersionKind; the objects batched here stand
        # for those calls, so the first one sent is named (module docstring).
        first = sent[0]
        subject = review.gvk_text(str(first.get("apiVersion") or ""),
                                  str(first.get("kind") or ""))
        uid = random_uuid()
        try:
            version, body = review.request(self.review_versions, sent, desired, uid)
        except review.ReviewError as error:
            return fail(conversion_failed(str(error)))
        self.reviews += 1
        d = self.caller.exchange(self.hook, body,
                                 limit=RESPONSE_BYTES_PER_OBJECT * (len(sent) + 1))
        d.addCallbacks(self._answered, self._unanswered,
                       callbackArgs=(version, uid, objects, indexes, desired, subject),
                       errbackArgs=(subject,))
        return d

    @staticmethod
    def _unanswered(failure, subject: str):
        failure.trap(TransportError, CallError)
        reason = failure.value.reason if failure.check(CallError) else str(failure.value)
        raise conversion_failed(f"conversion webhook for {subject} failed: {reason}")

    @staticmethod
    def _answered(reply, version, uid, objects, indexes, desired, subject):
        if not 200 <= reply.code <= 206:
            raise conversion_failed(
                f"conversion webhook for {subject} failed: {_rest_error(reply)}")
        try:
            converted = review.converted(version, uid, reply.body)
        except review.ReviewError as error:
            raise conversion_failed(f"conversion webhook for {subject} failed: {error}")
        if len(converted) != len(indexes):
            raise conversion_failed(f"conversion webhook for {subject} returned "
                                    f"{len(converted)} objects, expected {len(indexes)}")
        out = list(objects)
        single = len(objects) == 1
        for n, (i, obj) in enumerate(zip(indexes, converted)):
            try:
                out[i] = review.check_object(objects[i], obj, desired, n, single)
            except review.ReviewError as error:
                raise conversion_failed(f"conversion webhook for {subject} {error}")
        return out


def conversion_failed(message: str) -> errors.StatusError:
    """Upstream's plain conversion error as the API renders it: 500, no reason."""
    return errors.StatusError(500, "", message)


#: client-go's ``NewGenericServerResponse`` words for an answer that is not a Status.
_GENERIC = {
    409: "the server reported a conflict",
    404: "the server could not find the requested resource",
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    405: "the server does not allow this method on the requested resource",
    422: "the server rejected our request due to an error in our request",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may "
         "still be processing the request",
    429: "the server has received too many requests and has asked us to try again later",
}


def _rest_error(reply) -> str:
    """What upstream's REST client says of a webhook's non-2xx answer: a Status's
    message, else client-go's generic words for the code."""
    try:
        document = orjson.loads(reply.body)
    except orjson.JSONDecodeError:
        document = None
    if isinstance(document, dict) and document.get("kind") == "Status" and \
            isinstance(document.get("message"), str):
        return document["message"]
    text = reply.content_type.split(";")[0].strip().lower().startswith("text/")
    message = reply.body[:1024].decode("utf-8", "replace").strip() if text else "unknown"
    if reply.code in (403, 415):
        return message
    if reply.code == 406:
        return message if message and message != "unknown" else \
            "the server was unable to respond with a content type that the client supports"
    if reply.code in _GENERIC:
        return _GENERIC[reply.code]
    if reply.code >= 500:
        return f"an error on the server ({go_quote(message)}) has prevented the request " \
               "from succeeding"
    return f"the server responded with the status code {reply.code} but did not return " \
           "more information"
