"""
``--tracing-config-file``: the TracingConfiguration file (spec 2.5), read, decoded and
validated as kube-apiserver's ``TracingOptions.ApplyTo`` does it.

``load_tracing_config(path)`` answers a ``TracingConfiguration``; anything wrong raises
``TracingConfigError`` whose ``str`` is upstream's message: ``failed to read tracing
config: unable to read tracing configuration from "<path>": ...`` or ``... unable to
decode tracing configuration data: ...``, and ``failed to validate tracing
configuration: <field errors>`` with component-base's ``ValidateTracingConfiguration``
rules and words (the rate between 0 and one million, the endpoint's scheme one of
none, ``dns``, ``unix``, ``unix-abstract``).
"""

from __future__ import annotations

from typing import Optional
from urllib.parse import urlsplit

import attrs

from platformd.files import configfile
from platformd.goformat import gotext
from platformd.model import fielderrors

#: The kind's versions: upstream serves it as apiserver.config.k8s.io v1alpha1, v1beta1
#: and v1; spec 2.5 names v1 and apiserver.platform.io/v1beta1.
KIND = configfile.Kind("TracingConfiguration", frozenset({
    "apiserver.config.platform.io/v1", "apiserver.config.platform.io/v1beta1",
    "apiserver.config.platform.io/v1alpha1", "apiserver.platform.io/v1beta1",
}), configfile.Struct("TracingConfiguration", "apiserver.TracingConfiguration", {
    "endpoint": "string", "samplingRatePerMillion": "int32"}))

#: The OTLP gRPC exporter's default collector address (upstream's, when unset).
DEFAULT_ENDPOINT = "localhost:4317"
MAX_SAMPLING_RATE_PER_MILLION = 1_000_000
_SCHEMES = ("dns", "unix", "unix-abstract")


class TracingConfigError(Exception):
    """The file cannot be used; ``str`` says why in upstream's words."""


@attrs.frozen
class TracingConfiguration:
    #: The collector's address as given (None: ``DEFAULT_ENDPOINT``).
    endpoint: Optional[str] = None
    #: Spans sampled per million new traces (None: only those whose parent is sampled).
    sampling_rate_per_million: Optional[int] = None

    @property
    def collector(self) -> str:
        return DEFAULT_ENDPOINT if self.endpoint is None else self.endpoint


def load_tracing_config(path: str) -> TracingConfiguration:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise TracingConfigError(
            f"failed to read tracing config: unable to read tracing configuration from "
            f"{gotext.go_quote(path)}: {gotext.path_error('open', path, error)}"
        ) from None
    return parse_tracing_config(data)


def parse_tracing_config(data: bytes) -> TracingConfiguration:
    try:
        _, document = configfile.decode(data, KIND)
    except configfile.DecodeError as error:
        raise TracingConfigError("failed to read tracing config: unable to decode tracing "
                                 f"configuration data: {error}") from None
    config = TracingConfiguration(document.get("endpoint"),
                                  document.get("samplingRatePerMillion"))
    causes = validate(config)
    if causes:
        raise TracingConfigError("failed to validate tracing configuration: " + gotext.aggregate(
            f"{c.field}: {c.message}" for c in causes))
    return config


def validate(config: TracingConfiguration) -> list:
    """component-base's ``ValidateTracingConfiguration`` (field paths from the root)."""
    causes = []
    rate = config.sampling_rate_per_million
    if rate is not None:
        if rate < 0:
            causes.append(fielderrors.invalid("samplingRatePerMillion", rate,
                                              "sampling rate must be positive"))
        if rate > MAX_SAMPLING_RATE_PER_MILLION:
            causes.append(fielderrors.invalid(
                "samplingRatePerMillion", rate,
                "sampling rate per million must be less than or equal to one million"))
    if config.endpoint is not None:
        endpoint = config.endpoint if "//" in config.endpoint else "dns://" + config.endpoint
        try:
            scheme = urlsplit(endpoint).scheme
        except ValueError as error:
            causes.append(fielderrors.invalid("endpoint", endpoint, str(error)))
        else:
            if scheme not in _SCHEMES:
                causes.append(fielderrors.invalid(
                    "endpoint", endpoint,
                    f"unsupported scheme: {scheme}.  Options are none, dns, unix, or "
                    "unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/"
                    "naming.md"))
    return causes
