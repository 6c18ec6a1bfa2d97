#!/usr/bin/env bash
# Deletes what kind/up.sh made: the three kind clusters and kind/out/.
set -euo pipefail

usage() {
  cat <<'EOF_USAGE'
Usage: kind/down.sh [--dry-run] [--keep-out]

Deletes the kind clusters dispatcher-manager, dispatcher-worker-1 and dispatcher-worker-2, and kind/out/ (the
kubeconfigs, clusters.yaml and the dispatcher's SQLite database written there).

Options:
  --keep-out   leave kind/out/ in place
  --dry-run    print the commands instead of running them (also DRY_RUN=1); needs no kind
  -h, --help   this help
EOF_USAGE
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

KEEP_OUT=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1 ;;
    --keep-out) KEEP_OUT=1 ;;
    *) usage >&2; die "unknown argument $1" ;;
  esac
  shift
done

need kind
for cluster in "$MANAGER" "${WORKERS[@]}"; do
  log "deleting cluster $cluster"
  # kind delete answers success for a cluster that does not exist, so this can run twice.
  run kind delete cluster --name "$cluster"
done
if [[ $KEEP_OUT == 0 ]]; then
  log "removing $OUT_DIR"
  run rm -rf -- "$OUT_DIR"
fi
