"""Emulated controllers of a simulated cluster: garbage collector, namespaces, scheduler, kubelet,
job controller, Kueue and HAMi. Each can be switched on or off per cluster."""
