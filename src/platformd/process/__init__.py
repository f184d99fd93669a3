"""
The process and its supervisor: ordered startup (``lifecycle``), startup errors reported on
standard error (``startup``), systemd's readiness and watchdog notifications (``sdnotify``)
and logging to the journal (``journald``).
"""
