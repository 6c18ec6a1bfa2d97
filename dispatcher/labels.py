"""Label and annotation names the dispatcher reads and writes."""

from __future__ import annotations

DOMAIN = "kueue-dispatcher.io"

#: Kueue's queue-name label: the manager object's LocalQueue, kept on the remote copy.
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
#: Kueue's WorkloadPriorityClass label.
PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"

# On remote copies: which manager, which workload, which placement generation.
ORIGIN = f"{DOMAIN}/origin"
WORKLOAD_UID = f"{DOMAIN}/workload-uid"
GENERATION = f"{DOMAIN}/generation"
PLACEMENT_ID = f"{DOMAIN}/placement-id"
#: allAtOnce / incremental: the pod scheduling gate on every pod template of a race copy (a losing copy's pods
#: never start, even when its worker's Kueue admitted it before the copy was deleted), and the pod label, valued
#: with the origin, that selects such pods for the dispatcher to lift the gate on the winner's.
RACE_GATE = f"{DOMAIN}/race"

# Fencing (dispatcher/agent.py, dispatcher/worker_lease.py).
#: On the Lease a dispatcher renews in each worker, valued with its origin: what the worker's fencing agent watches.
FENCING = f"{DOMAIN}/fencing"
#: On a copy the fencing agent stopped: when and why (the dispatcher places such a workload again).
FENCED = f"{DOMAIN}/fenced"
#: On the fencing agent's own heartbeat Lease; its status (per origin: expired, fenced) in AGENT_STATUS.
AGENT = f"{DOMAIN}/agent"
AGENT_STATUS = f"{DOMAIN}/agent-status"

# On manager objects, written by the dispatcher.
CLUSTER = f"{DOMAIN}/cluster"
STATE = f"{DOMAIN}/state"
MESSAGE = f"{DOMAIN}/message"
REMOTE_STATUS = f"{DOMAIN}/remote-status"

# On manager objects, written by users.
#: "true": never run this workload twice; on worker loss it fails with reason WorkerLost.
NO_FAILOVER = f"{DOMAIN}/no-failover"
#: "key=value,key2=value2": only workers whose labels match all pairs may take it.
CLUSTER_SELECTOR = f"{DOMAIN}/cluster-selector"

#: Labels the API server generates for a Job; a copy must not carry the manager's values.
JOB_GENERATED_LABELS = (
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
    "controller-uid",
    "job-name",
)
