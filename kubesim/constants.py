"""Names the simulated clusters use: annotations that script a pod's life, and defaults."""

from __future__ import annotations

#: Pod (or pod template) annotation: seconds a simulated container runs before it exits.
RUN_SECONDS = "sim.dispatcher.io/run-seconds"
#: Pod (or pod template) annotation: the exit code of the simulated container ("0" succeeds).
EXIT_CODE = "sim.dispatcher.io/exit-code"
#: How long a pod runs when it carries no ``RUN_SECONDS`` annotation.
DEFAULT_RUN_SECONDS = 2.0

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"
