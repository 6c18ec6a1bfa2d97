"""A multi-cluster dispatcher for Kubernetes batch and AI workloads, in the style of Kueue's MultiKueue."""

__version__ = "0.1.0"

#: The value of ``spec.managedBy`` that hands a manager Job to the dispatcher (MultiKueue's own value).
DEFAULT_CONTROLLER_NAME = "kueue.x-k8s.io/multikueue"
