#!/usr/bin/env bash
# Three kind clusters for the dispatcher: a manager and two Kueue workers, the second with fake HAMi GPU nodes.
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: kind/up.sh [--dry-run] [--deploy] [--kueue-version vX.Y.Z] [--node-image IMAGE]

Creates the kind clusters dispatcher-manager, dispatcher-worker-1 and dispatcher-worker-2 (or reuses them) and
sets them up for the dispatcher:

  manager   the WorkloadPriorityClass CRD of Kueue (no Kueue controller: the dispatcher is the one that
            dispatches), namespaces team-a and team-b, priority classes low and high
  workers   a released Kueue, the simulator's default queues (ResourceFlavors, ClusterQueues in cohort org,
            LocalQueue user-queue per namespace), the dispatcher's RBAC (deploy/worker/) and a kubeconfig for it
  worker-2  Kueue's HAMi resource transformations, and its two worker nodes made to look like HAMi GPU nodes
            (the hami.io/node-nvidia-register annotation and nvidia.com/gpu: 4 A100 40GB split 10 = 40)

and writes kind/out/clusters.yaml, so that the dispatcher runs on this host with
    dispatcher run --config kind/out/clusters.yaml

Options:
  --deploy               also build the image, load it into the manager and run the dispatcher there (deploy/,
                         with the worker kubeconfigs and API tokens as Secrets in dispatcher-system; the
                         tokens are also in kind/out/api-tokens)
  --kueue-version V      Kueue release to install (default $KUEUE_VERSION or v0.19.2)
  --node-image IMAGE     kind node image (default $KIND_NODE_IMAGE or kind's own default)
  --dry-run              print the commands instead of running them (also DRY_RUN=1); needs no docker, kind or
                         kubectl
  -h, --help             this help
EOF
}

# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/lib.sh"

KUEUE_VERSION=${KUEUE_VERSION:-v0.19.2}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-}
DEPLOY=0
while [[ $# -gt 0 ]]; do
  case $1 in
    -h | --help) usage; exit 0 ;;
    --dry-run) DRY_RUN=1 ;;
    --deploy) DEPLOY=1 ;;
    --kueue-version | --node-image)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      if [[ $1 == --kueue-version ]]; then KUEUE_VERSION=$2; else KIND_NODE_IMAGE=$2; fi
      shift
      ;;
    *) usage >&2; die "unknown argument $1" ;;
  esac
  shift
done
[[ $KUEUE_VERSION =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] || die "--kueue-version: expected vX.Y.Z, got '$KUEUE_VERSION'"

KUEUE_MANIFESTS=https://github.com/kubernetes-sigs/kueue/releases/download/$KUEUE_VERSION/manifests.yaml
# The one Kueue API the manager needs (WorkloadPriorityClasses), from the same release's source tree.
KUEUE_WPC_CRD=https://raw.githubusercontent.com/kubernetes-sigs/kueue/$KUEUE_VERSION/config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml
MANIFESTS=$KIND_DIR/manifests
MINT=$ROOT/deploy/worker/mint-kubeconfig.sh
IMAGE=kueue-dispatcher:dev
if [[ -z ${PYTHON:-} ]]; then
  if [[ -x $ROOT/.venv/bin/python ]]; then PYTHON=$ROOT/.venv/bin/python; else PYTHON=python3; fi
fi

need kind kubectl docker

create_clusters() {
  local existing cluster args
  existing=$(capture "" kind get clusters)
  for cluster in "$MANAGER" "${WORKERS[@]}"; do
    if [[ $'\n'$existing$'\n' == *$'\n'"$cluster"$'\n'* ]]; then
      log "cluster $cluster exists; reusing it"
      continue
    fi
    args=(kind create cluster --name "$cluster" --wait 120s)
    if [[ $cluster == "$GPU_WORKER" ]]; then args+=(--config "$MANIFESTS/kind-gpu-cluster.yaml"); fi
    if [[ -n $KIND_NODE_IMAGE ]]; then args+=(--image "$KIND_NODE_IMAGE"); fi
    log "creating cluster $cluster"
    run "${args[@]}"
  done
}

setup_manager() {
  local ctx
  ctx=$(context "$MANAGER")
  log "manager: WorkloadPriorityClass CRD of Kueue $KUEUE_VERSION, namespaces, priority classes"
  run kubectl --context "$ctx" apply --server-side -f "$KUEUE_WPC_CRD"
  run kubectl --context "$ctx" wait --for=condition=Established --timeout=60s \
    crd/workloadpriorityclasses.kueue.x-k8s.io
  run kubectl --context "$ctx" apply --server-side -f "$MANIFESTS/manager/"
}

install_kueue() {
  local cluster=$1 ctx
  ctx=$(context "$cluster")
  log "$cluster: Kueue $KUEUE_VERSION"
  # --force-conflicts: a second run takes back the Configuration that the GPU worker's own one replaced.
  run kubectl --context "$ctx" apply --server-side --force-conflicts -f "$KUEUE_MANIFESTS"
  if [[ $cluster == "$GPU_WORKER" ]]; then
    run kubectl --context "$ctx" apply --server-side --force-conflicts --field-manager=kueue-dispatcher-rig \
      -f "$MANIFESTS/kueue-hami-config.yaml"
    run kubectl --context "$ctx" -n kueue-system rollout restart deployment/kueue-controller-manager
  fi
  run kubectl --context "$ctx" -n kueue-system rollout status deployment/kueue-controller-manager --timeout=300s
  run kubectl --context "$ctx" -n kueue-system wait --for=condition=Available --timeout=300s \
    deployment/kueue-controller-manager
}

apply_queues() {
  local cluster=$1 ctx class=worker-cpu
  ctx=$(context "$cluster")
  if [[ $cluster == "$GPU_WORKER" ]]; then class=worker-gpu; fi
  log "$cluster: namespaces, queues and priority classes ($class)"
  # Kueue's webhooks answer a little after its Deployment is Available.
  retry 30 5 kubectl --context "$ctx" apply --server-side -f "$MANIFESTS/worker-common/" -f "$MANIFESTS/$class/"
}

fake_hami_nodes() {
  local cluster=$1 ctx node register slots
  ctx=$(context "$cluster")
  slots=$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$KIND_DIR/hami_node.py" --slots x)
  for node in "$cluster-worker" "$cluster-worker2"; do
    log "$cluster: node $node looks like a HAMi node with 4 GPUs ($slots vGPU slots)"
    register=$(PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$KIND_DIR/hami_node.py" "$node")
    run kubectl --context "$ctx" label node "$node" --overwrite \
      hami.io/vgpu=true nvidia.com/gpu.present=true gpu=on
    run kubectl --context "$ctx" annotate node "$node" --overwrite "hami.io/node-nvidia-register=$register"
    # What HAMi's device plugin makes the kubelet advertise (kept by the kubelet like any extended resource).
    run kubectl --context "$ctx" patch node "$node" --subresource=status --type=merge \
      -p "{\"status\":{\"capacity\":{\"nvidia.com/gpu\":\"$slots\"},\"allocatable\":{\"nvidia.com/gpu\":\"$slots\"}}}"
  done
}

worker_access() {
  local cluster=$1 ctx name dry=()
  ctx=$(context "$cluster")
  name=$(short "$cluster")
  if is_dry; then dry=(--dry-run); fi
  log "$cluster: the dispatcher's RBAC and its kubeconfig ($OUT_DIR/$name.kubeconfig)"
  run kubectl --context "$ctx" apply --server-side -k "$ROOT/deploy/worker/"
  "$MINT" ${dry[@]+"${dry[@]}"} --quiet --out "$OUT_DIR/$name.kubeconfig" "$ctx" "$name"
  if [[ $DEPLOY == 1 ]]; then
    # From pods in the manager cluster the worker is its control-plane container on kind's Docker network.
    "$MINT" ${dry[@]+"${dry[@]}"} --quiet --server "https://$cluster-control-plane:6443" \
      --out "$OUT_DIR/$name.internal.kubeconfig" "$ctx" "$name"
  fi
}

write_config() {
  log "writing $OUT_DIR/clusters.yaml"
  run kind export kubeconfig --name "$MANAGER" --kubeconfig "$OUT_DIR/manager.kubeconfig"
  write_file "$OUT_DIR/clusters.yaml" <<EOF
# Written by kind/up.sh: the dispatcher on this host against the kind clusters.
#   dispatcher run --config $OUT_DIR/clusters.yaml
# The manager is reached as kind's admin; each worker as its ServiceAccount kueue-system/kueue-dispatcher.
manager:
  kubeconfig: manager.kubeconfig
  context: $(context "$MANAGER")
workers:
  - name: $(short "${WORKERS[0]}")
    kubeconfig: $(short "${WORKERS[0]}").kubeconfig
    labels:
      gpu: "false"
  - name: $(short "$GPU_WORKER")
    kubeconfig: $(short "$GPU_WORKER").kubeconfig
    labels:
      gpu: "true"
policy:
  mode: binpack
  admissionTimeout: 5m
  lostTimeout: 60s
database:
  url: sqlite+aiosqlite:///$OUT_DIR/dispatcher.sqlite
EOF
}

deploy_dispatcher() {
  local ctx cluster name
  ctx=$(context "$MANAGER")
  log "manager: building $IMAGE and running the dispatcher in dispatcher-system"
  run docker build -t "$IMAGE" "$ROOT"
  run kind load docker-image "$IMAGE" --name "$MANAGER"
  run kubectl --context "$ctx" apply --server-side -f "$ROOT/deploy/namespace.yaml"
  for cluster in "${WORKERS[@]}"; do
    name=$(short "$cluster")
    run kubectl --context "$ctx" -n dispatcher-system delete secret "$name-kubeconfig" --ignore-not-found
    run kubectl --context "$ctx" -n dispatcher-system create secret generic "$name-kubeconfig" \
      --from-file=kubeconfig="$OUT_DIR/$name.internal.kubeconfig"
  done
  # API tokens for the dispatcher's HTTP API (kept in kind/out/api-tokens for curl).
  write_file "$OUT_DIR/api-tokens" <<EOF
read $(capture '<read-token>' "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')
admin $(capture '<admin-token>' "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')
EOF
  run kubectl --context "$ctx" -n dispatcher-system delete secret kueue-dispatcher-api-tokens --ignore-not-found
  run kubectl --context "$ctx" -n dispatcher-system create secret generic kueue-dispatcher-api-tokens \
    --from-file=tokens="$OUT_DIR/api-tokens"
  run kubectl --context "$ctx" apply --server-side -k "$MANIFESTS/dispatcher/"
  run kubectl --context "$ctx" -n dispatcher-system rollout status deployment/kueue-dispatcher --timeout=180s
}

run mkdir -p "$OUT_DIR"
create_clusters
setup_manager
for cluster in "${WORKERS[@]}"; do
  install_kueue "$cluster"
  apply_queues "$cluster"
  if [[ $cluster == "$GPU_WORKER" ]]; then fake_hami_nodes "$cluster"; fi
  worker_access "$cluster"
done
write_config
if [[ $DEPLOY == 1 ]]; then deploy_dispatcher; fi

log "done. Run the dispatcher on this host:"
log "  dispatcher run --config $OUT_DIR/clusters.yaml"
log "submit a Job to the manager (context $(context "$MANAGER")), stop a worker with kind/drill.sh worker-1 60,"
log "and remove everything with kind/down.sh"
