"""Simulated Kubernetes clusters: loopback API servers with Kueue, job and HAMi emulation.

A separate world, installed with the dispatcher but apart from it: the product never imports this package (only
the entry points that start rigs do: ``dispatcher.cli``, ``dispatcher.demo``, ``dispatcher.drill``,
``dispatcher.ha_drill`` and ``dispatcher.rig``; and benchmarks and tests), and it imports nothing of the dispatcher,
only the neutral :mod:`kubecommon` (quantity parsing). ``.importlinter`` checks both directions.
"""
