# shellcheck shell=bash
# shellcheck disable=SC2034 # the names below are used by the scripts that source this file
# Shared by kind/*.sh (sourced, not run): the cluster names, a dry-run aware command runner and small helpers.
#
# In a dry run (--dry-run or DRY_RUN=1) every command that would touch docker, kind, kubectl or the files under
# kind/out/ is printed as "+ CMD" on standard output instead of being run, and none of those programs has to be
# installed. Progress messages go to standard error.

DRY_RUN=${DRY_RUN:-0}
KIND_DIR=$(cd "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$KIND_DIR/.." && pwd)
OUT_DIR=${OUT_DIR:-$KIND_DIR/out}

MANAGER=dispatcher-manager
WORKERS=(dispatcher-worker-1 dispatcher-worker-2)
# The worker whose nodes are made to look like HAMi GPU nodes.
GPU_WORKER=dispatcher-worker-2

exec 3>&1 # the dry run's listing goes to stdout, also from inside $(...)

is_dry() { [[ $DRY_RUN == 1 ]]; }
log() { printf '==> %s\n' "$*" >&2; }
die() {
  printf '%s: %s\n' "${0##*/}" "$*" >&2
  exit 1
}

# quote ARG...: the arguments as one shell command line (quoted only where needed).
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

# run CMD...: run it, or list it in a dry run.
run() {
  if is_dry; then show "$@"; else "$@"; fi
}

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

# retry ATTEMPTS DELAY CMD...: run until it succeeds (e.g. while Kueue's webhook is still starting).
retry() {
  local attempts=$1 delay=$2 i
  shift 2
  if is_dry; then
    show "$@"
    return 0
  fi
  for ((i = 1; ; i++)); do
    if "$@"; then return 0; fi
    ((i < attempts)) || die "gave up after $attempts attempts: $(quote "$@")"
    log "not yet; retrying in ${delay}s ($i/$attempts)"
    sleep "$delay"
  done
}

# write_file PATH: standard input into PATH (mode 0600: kubeconfigs hold tokens); listed in a dry run.
write_file() {
  local path=$1 line
  if is_dry; then
    printf "+ cat > %s <<'EOF'\n" "$(quote "$path")" >&3
    while IFS= read -r line; do printf '%s\n' "$line" >&3; done
    printf 'EOF\n' >&3
  else
    (umask 077 && cat >"$path")
  fi
}

# need PROGRAM...: fail early, naming what is missing (never in a dry run, which runs none of them).
need() {
  local program
  is_dry && return 0
  for program in "$@"; do
    command -v "$program" >/dev/null 2>&1 || die "$program is required (not found on PATH); see kind/README.md"
  done
}

# short NAME: dispatcher-worker-1 -> worker-1 (the name in clusters.yaml); context NAME: kind's kubectl context.
short() { printf '%s\n' "${1#dispatcher-}"; }
context() { printf 'kind-%s\n' "$1"; }
