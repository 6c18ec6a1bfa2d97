"""Simulated Kubernetes clusters: loopback API servers with Kueue, job and HAMi emulation.

A separate world: the dispatcher's service modules never import this package; only the entry points
that start simulated clusters (``cli``, ``demo``, ``drill``), benchmarks and tests do.
"""
