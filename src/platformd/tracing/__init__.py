"""
OpenTelemetry tracing (``--tracing-config-file``, docs/tracing.md): the configuration
file (``config``), the tracer and its export pipeline (``provider``), the request's span
(``requests``), child spans below it (``spans``) and the pods socket's (``grpcserver``).
"""
