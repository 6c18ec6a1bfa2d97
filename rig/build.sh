#!/usr/bin/env bash
# Builds the real rig's components from their Go modules, through the Go module proxy, into a cache folder,
# and reuses what is there. Never from a fetched repository, never a downloaded binary.
#
#   bash rig/build.sh [--check] [COMPONENT ...]     (default: every component)
#
# Components (one go.mod each, so that each builds with the dependency versions its own release chose):
#   kubernetes  kube-apiserver, kube-controller-manager, kube-scheduler  (k8s.io/kubernetes v1.36.x)
#   etcd        etcd's own command                                       (go.etcd.io/etcd/server/v3 v3.6.x)
#   kwok        fake nodes and pod lifecycles                            (sigs.k8s.io/kwok)
#   kueue       the Kueue manager; its CRDs and webhook manifests come from the same module's files
#   jobset      the JobSet controller                                    (sigs.k8s.io/jobset)
#
# Manifests (CRDs, webhook configurations, kwok stages) are copied from the same modules into <cache>/manifests/.
# Cache: $DISPATCHER_RIG_BIN, else rig/.bin beside this script. A component is rebuilt only when its go.mod,
# go.sum, this script or the Go version changed (a stamp file per component records the hash). Go's own module
# and build caches (~/go/pkg/mod, ~/.cache/go-build) make a rebuild after a clean checkout a matter of linking.
# --check only reports whether every binary is present and current (exit 1 if not).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${DISPATCHER_RIG_BIN:-$here/.bin}
export GOFLAGS="${GOFLAGS:-} -buildvcs=false -mod=readonly"
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
export CGO_ENABLED=${CGO_ENABLED:-0}

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
components=("$@")
if [ ${#components[@]} -eq 0 ]; then components=(kubernetes etcd kwok kueue jobset); fi

if ! command -v go >/dev/null; then
  echo "rig/build.sh: Go is not installed (need Go >= 1.26 and the Go module proxy)" >&2
  exit 2
fi

# The binaries each component must leave in the cache.
binaries() {
  case "$1" in
    kubernetes) echo "kube-apiserver kube-controller-manager kube-scheduler" ;;
    etcd) echo "etcd" ;;
    kwok) echo "kwok" ;;
    kueue) echo "kueue" ;;
    jobset) echo "jobset" ;;
    *) echo "rig/build.sh: unknown component '$1' (kubernetes, etcd, kwok, kueue, jobset)" >&2; return 2 ;;
  esac
}

# The release each component is built from, read from its go.mod (so the version lives in one place).
release() {
  local mod
  case "$1" in
    kubernetes) mod=k8s.io/kubernetes ;;
    etcd) mod=go.etcd.io/etcd/server/v3 ;;
    kwok) mod=sigs.k8s.io/kwok ;;
    kueue) mod=sigs.k8s.io/kueue ;;
    jobset) mod=sigs.k8s.io/jobset ;;
  esac
  (cd "$here/$1" && go list -m -f '{{.Version}}' "$mod")
}

ldflags() {
  local version=$2
  case "$1" in
    kubernetes)
      # What `make` in Kubernetes stamps; without it /version says v0.0.0-master and clients (Kueue, kubectl)
      # take the server for an unknown version.
      local minor=${version#v1.}; minor=${minor%%.*}
      local pkg=k8s.io/component-base/version
      echo "-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
      ;;
    kueue) echo "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" ;;
    *) echo "-s -w" ;;
  esac
}

# Where a module's files are in Go's module cache (downloaded if they are not yet).
module_dir() {
  (cd "$here/$1" && go mod download "$2" && go list -m -f '{{.Dir}}' "$2")
}

# Manifests the rig applies, taken from the same module versions the binaries are built from: CRDs, webhook
# configurations, kwok's stages. Copied out of Go's module cache so that `rig up` needs no Go.
manifests() {
  local c=$1 dest=$2 dir
  mkdir -p "$dest"
  case "$c" in
    kueue)
      dir=$(module_dir kueue sigs.k8s.io/kueue)
      cp "$dir"/config/components/crd/bases/*.yaml "$dest/"
      mkdir -p "$dest/conversion" "$dest/webhook"
      # The conversion webhooks Kueue's own kustomization turns on (its uncommented patch lines).
      sed -n 's|^- path: \(patches/webhook_in_.*\.yaml\)$|\1|p' "$dir/config/components/crd/kustomization.yaml" \
        | while read -r patch; do cp "$dir/config/components/crd/$patch" "$dest/conversion/"; done
      cp "$dir"/config/components/webhook/manifests.yaml "$dest/webhook/"
      # CRDs of the job kinds Kueue manages whose controllers the rig does not run: the versions Kueue builds with.
      mkdir -p "$dest/kinds"
      dir=$(module_dir kueue github.com/kubeflow/training-operator)
      cp "$dir"/manifests/base/crds/kubeflow.org_pytorchjobs.yaml "$dir"/manifests/base/crds/kubeflow.org_tfjobs.yaml "$dest/kinds/"
      dir=$(module_dir kueue github.com/ray-project/kuberay/ray-operator)
      cp "$dir"/config/crd/bases/ray.io_rayjobs.yaml "$dir"/config/crd/bases/ray.io_rayclusters.yaml "$dest/kinds/"
      ;;
    jobset)
      dir=$(module_dir jobset sigs.k8s.io/jobset)
      cp "$dir"/config/components/crd/bases/*.yaml "$dest/"
      mkdir -p "$dest/webhook"
      cp "$dir"/config/components/webhook/manifests.yaml "$dest/webhook/"
      ;;
    kwok)
      dir=$(module_dir kwok sigs.k8s.io/kwok)
      cp "$dir"/kustomize/stage/node/fast/node-initialize.yaml \
        "$dir"/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml "$dest/"
      for f in pod-create pod-init-container-running pod-init-container-completed pod-ready pod-delete; do
        cp "$dir/kustomize/stage/pod/general/$f.yaml" "$dest/"
      done
      ;;
  esac
  chmod -R u+w "$dest"
}

stamp_of() {
  { cat "$here/$1/go.mod" "$here/$1/go.sum" "$here/build.sh"; go version; } | sha256sum | cut -c1-16
}

current() {
  local c=$1 b
  [ -f "$out/.$c.stamp" ] && [ "$(cat "$out/.$c.stamp")" = "$(stamp_of "$c")" ] || return 1
  for b in $(binaries "$c"); do [ -x "$out/$b" ] || return 1; done
  case "$c" in kueue | jobset | kwok) [ -d "$out/manifests/$c" ] || return 1 ;; esac
}

mkdir -p "$out"
status=0
for c in "${components[@]}"; do
  binaries "$c" >/dev/null
  if current "$c"; then
    echo "rig/build.sh: $c is current in $out"
    continue
  fi
  if [ $check = 1 ]; then
    echo "rig/build.sh: $c is missing or stale in $out"
    status=1
    continue
  fi
  version=$(release "$c")
  echo "rig/build.sh: building $c $version into $out"
  start=$(date +%s)
  tmp=$(mktemp -d "$out/.build-$c.XXXXXX")
  # `go install tool` builds every `tool` line of the component's go.mod.
  (cd "$here/$c" && GOBIN="$tmp" go install -trimpath -ldflags "$(ldflags "$c" "$version")" tool)
  if [ "$c" = etcd ]; then mv "$tmp/v3" "$tmp/etcd" 2>/dev/null || mv "$tmp/server" "$tmp/etcd"; fi
  for b in $(binaries "$c"); do
    [ -x "$tmp/$b" ] || { echo "rig/build.sh: $c built no $b (got: $(ls "$tmp"))" >&2; exit 1; }
    mv -f "$tmp/$b" "$out/$b"
  done
  rm -rf "$tmp" "$out/manifests/$c"
  case "$c" in kueue | jobset | kwok) manifests "$c" "$out/manifests/$c" ;; esac
  stamp_of "$c" >"$out/.$c.stamp"
  echo "rig/build.sh: built $c in $(( $(date +%s) - start )) s"
done
exit $status
