#!/usr/bin/env bash
# tox -e conformance: the conformance pack (tests that passed against a real kube-apiserver
# v1.36.2; ../shared/conformance/README.md) against the platformd installed in this venv.
# PLATFORMD_CONFORMANCE names the pack's folder when it is not beside the checkout.
set -u
checkout=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
pack=${PLATFORMD_CONFORMANCE:-$checkout/../shared/conformance}
if [ ! -f "$pack/run.sh" ]; then
    echo "CONFORMANCE PACK NOT FOUND at $pack: not run (set PLATFORMD_CONFORMANCE)" >&2
    exit 0
fi
exec bash "$pack/run.sh" "$@"
