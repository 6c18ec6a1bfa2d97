#!/usr/bin/env bash
# A worker outage: stop a kind worker's control-plane container, wait, start it again.
set -euo pipefail

usage() {
  cat <<'EOF_USAGE'
Usage: kind/drill.sh [--dry-run] WORKER [SECONDS]

Stops the control-plane container of the kind worker WORKER (worker-1, worker-2, or the full cluster name
dispatcher-worker-1 ...) with docker stop, so its API server is gone for the dispatcher; waits SECONDS (default
90: longer than the dispatcher's default lostTimeout of 60s, so the worker is declared Lost and its Jobs are
placed elsewhere); starts the container again and waits until the API server is ready. Times are printed so
they can be compared with the dispatcher's log.

Options:
  --dry-run    print the commands instead of running them (also DRY_RUN=1); needs no docker or kubectl
  -h, --help   this help
EOF_USAGE
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

args=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1 ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [[ ${#args[@]} -lt 1 || ${#args[@]} -gt 2 ]]; then
  usage >&2
  exit 2
fi
cluster=dispatcher-${args[0]#dispatcher-}
seconds=${args[1]:-90}
[[ $seconds =~ ^[0-9]+$ ]] || die "SECONDS must be a whole number, got '$seconds'"
known=0
for worker in "${WORKERS[@]}"; do
  if [[ $worker == "$cluster" ]]; then known=1; fi
done
[[ $known == 1 ]] || die "unknown worker '${args[0]}' (one of: ${WORKERS[*]})"
container=$cluster-control-plane
now() { date +%H:%M:%S; }

need docker kubectl
log "$(now) stopping $container (worker $(short "$cluster")) for ${seconds}s"
run docker stop "$container"
log "$(now) $container stopped"
run sleep "$seconds"
log "$(now) starting $container"
run docker start "$container"
# The API server takes a little while to come back after the container starts.
retry 60 2 kubectl --context "$(context "$cluster")" get --raw /readyz
log "$(now) worker $(short "$cluster") is back"
