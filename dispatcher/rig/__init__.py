"""The real rig: real Kubernetes components (kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok,
Kueue, JobSet), built from their Go modules by ``rig/build.sh``, started on loopback by ``dispatcher rig up --real``.

An entry point like the simulator: the service's modules never import it.
"""
