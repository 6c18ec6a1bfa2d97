#!/usr/bin/env bash
# A kubeconfig for the dispatcher's ServiceAccount on one worker cluster, and the command that hands it to the
# manager. Run `kubectl --context WORKER_CONTEXT apply -k deploy/worker/` first. See usage below.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/worker/mint-kubeconfig.sh [options] WORKER_CONTEXT NAME

Writes a kubeconfig that authenticates as the ServiceAccount kueue-system/kueue-dispatcher (made by
deploy/worker/) on the worker cluster of kubectl context WORKER_CONTEXT, then prints the command that stores
it on the manager as the Secret NAME-kubeconfig: the secretRef of the worker called NAME in clusters.yaml.

Options:
  --out FILE              where to write the kubeconfig (default: NAME.kubeconfig); mode 0600
  --server URL            the API server address written into it (default: the context's server). Give the
                          address the dispatcher reaches the worker at, e.g. from inside the manager cluster.
  --duration D            lifetime of the token (kubectl create token --duration; default 8760h). Mint again
                          and replace the Secret before it expires.
  --secret-token          use a non-expiring token from a kubernetes.io/service-account-token Secret instead
  --namespace NS          the ServiceAccount's namespace on the worker (default kueue-system)
  --service-account SA    the ServiceAccount (default kueue-dispatcher)
  --manager-namespace NS  the dispatcher's namespace on the manager (default dispatcher-system)
  --manager-context CTX   the manager's kubectl context, for the printed command
  --quiet                 print nothing but errors (and the commands of a dry run)
  --dry-run               print the commands instead of running them (also DRY_RUN=1)
  -h, --help              this help
EOF
}

DRY_RUN=${DRY_RUN:-0}
OUT=""
SERVER=""
DURATION=8760h
SECRET_TOKEN=0
NAMESPACE=kueue-system
SERVICE_ACCOUNT=kueue-dispatcher
MANAGER_NAMESPACE=dispatcher-system
MANAGER_CONTEXT=""
QUIET=0
exec 3>&1 # the dry run's listing goes to stdout, also from inside $(...)

die() {
  printf 'mint-kubeconfig: %s\n' "$*" >&2
  exit 1
}
is_dry() { [[ $DRY_RUN == 1 ]]; }
quote() {
  local arg out=""
  for arg in "$@"; do
    if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
      out+=" $arg"
    else
      out+=" '${arg//\'/\'\\\'\'}'"
    fi
  done
  printf '%s' "${out# }"
}
show() { printf '+ %s\n' "$(quote "$@")" >&3; }
# capture PLACEHOLDER CMD...: the command's output; in a dry run, the command is listed and PLACEHOLDER stands in.
capture() {
  local placeholder=$1
  shift
  if is_dry; then
    show "$@"
    printf '%s\n' "$placeholder"
  else
    "$@"
  fi
}
# run_stdin CMD...: run with this function's standard input; in a dry run, list the command and the input.
run_stdin() {
  local line
  if is_dry; then
    printf '+ %s <<EOF\n' "$(quote "$@")" >&3
    while IFS= read -r line; do printf '%s\n' "$line" >&3; done
    printf 'EOF\n' >&3
  else
    "$@"
  fi
}
say() { [[ $QUIET == 1 ]] || printf '%s\n' "$@"; }

while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1 ;;
    --quiet) QUIET=1 ;;
    --secret-token) SECRET_TOKEN=1 ;;
    --out | --server | --duration | --namespace | --service-account | --manager-namespace | --manager-context)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case $1 in
        --out) OUT=$2 ;;
        --server) SERVER=$2 ;;
        --duration) DURATION=$2 ;;
        --namespace) NAMESPACE=$2 ;;
        --service-account) SERVICE_ACCOUNT=$2 ;;
        --manager-namespace) MANAGER_NAMESPACE=$2 ;;
        --manager-context) MANAGER_CONTEXT=$2 ;;
      esac
      shift
      ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) break ;;
  esac
  shift
done
[[ $# -eq 2 ]] || { usage >&2; exit 2; }
CONTEXT=$1
NAME=$2
[[ $NAME =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || die "NAME must be a lowercase DNS label (the worker's name in clusters.yaml), got '$NAME'"
OUT=${OUT:-$NAME.kubeconfig}
SECRET=$NAME-kubeconfig

if ! is_dry; then
  command -v kubectl >/dev/null 2>&1 || die "kubectl is required (not found on PATH)"
fi
# The ServiceAccount must be there (kubectl apply -k deploy/worker/).
capture "serviceaccount/$SERVICE_ACCOUNT" kubectl --context "$CONTEXT" -n "$NAMESPACE" \
  get serviceaccount "$SERVICE_ACCOUNT" -o name >/dev/null ||
  die "no ServiceAccount $NAMESPACE/$SERVICE_ACCOUNT in context $CONTEXT: apply deploy/worker/ there first"

if [[ $SECRET_TOKEN == 1 ]]; then
  # A long-lived token Secret, as Kueue's MultiKueue setup does: the control plane fills in data.token.
  run_stdin kubectl --context "$CONTEXT" apply -f - <<EOF
apiVersion: v1
kind: Secret
type: kubernetes.io/service-account-token
metadata:
  name: $SERVICE_ACCOUNT-token
  namespace: $NAMESPACE
  annotations:
    kubernetes.io/service-account.name: $SERVICE_ACCOUNT
EOF
  encoded=""
  for ((i = 0; i < 30; i++)); do
    encoded=$(capture '<base64-token>' kubectl --context "$CONTEXT" -n "$NAMESPACE" \
      get secret "$SERVICE_ACCOUNT-token" -o 'jsonpath={.data.token}')
    [[ -n $encoded ]] && break
    sleep 1
  done
  [[ -n $encoded ]] || die "the token controller did not fill Secret $NAMESPACE/$SERVICE_ACCOUNT-token"
  if is_dry; then TOKEN='<token>'; else TOKEN=$(printf '%s' "$encoded" | base64 -d); fi
else
  TOKEN=$(capture '<token>' kubectl --context "$CONTEXT" -n "$NAMESPACE" \
    create token "$SERVICE_ACCOUNT" --duration "$DURATION")
fi
[[ -n $TOKEN ]] || die "no token for $NAMESPACE/$SERVICE_ACCOUNT"

if [[ -z $SERVER ]]; then
  SERVER=$(capture '<server>' kubectl config view --raw --minify --flatten --context "$CONTEXT" \
    -o 'jsonpath={.clusters[0].cluster.server}')
fi
[[ -n $SERVER ]] || die "context $CONTEXT names no server; give --server"
CA_DATA=$(capture '<certificate-authority-data>' kubectl config view --raw --minify --flatten --context "$CONTEXT" \
  -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')
[[ -n $CA_DATA ]] || die "context $CONTEXT has no certificate authority (insecure-skip-tls-verify?); refusing to write an unverified kubeconfig"

kubeconfig() {
  cat <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: $NAME
    cluster:
      server: $SERVER
      certificate-authority-data: $CA_DATA
users:
  - name: $NAME-$SERVICE_ACCOUNT
    user:
      token: $TOKEN
contexts:
  - name: $NAME
    context:
      cluster: $NAME
      user: $NAME-$SERVICE_ACCOUNT
current-context: $NAME
EOF
}

if is_dry; then
  printf "+ write %s (mode 0600): a kubeconfig for %s at %s\n" "$OUT" "$NAME" "$SERVER" >&3
else
  (umask 077 && kubeconfig >"$OUT")
  chmod 0600 "$OUT"
fi

manager=(kubectl)
[[ -n $MANAGER_CONTEXT ]] && manager+=(--context "$MANAGER_CONTEXT")
written=Wrote
is_dry && written="Would write"
say "$written $OUT: worker $NAME as $NAMESPACE/$SERVICE_ACCOUNT at $SERVER." \
  "Store it on the manager (the dispatcher reads the Secret $MANAGER_NAMESPACE/$SECRET):" \
  "  $(quote "${manager[@]}" -n "$MANAGER_NAMESPACE" create secret generic "$SECRET" --from-file=kubeconfig="$OUT")" \
  "and list the worker in clusters.yaml (with the Secret's name in deploy/rbac.yaml's Role):" \
  "  - name: $NAME" \
  "    secretRef: {namespace: $MANAGER_NAMESPACE, name: $SECRET, key: kubeconfig}"
