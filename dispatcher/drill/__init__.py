"""Failover drills: lose a worker under load and measure what the dispatcher does.

Two ways to run one, with the same measurement and the same report:

- ``dispatcher drill --sim`` starts simulated clusters and a dispatcher of its own (SQLite in a temporary
  directory) and watches that dispatcher from inside.
- ``dispatcher drill --config clusters.yaml --api URL --cluster NAME`` drives a dispatcher that is already
  running: it submits the drill's Jobs to the manager named in ``clusters.yaml``, follows the workloads and
  the worker's health through the dispatcher's REST API, and watches the copies on every worker with the
  worker kubeconfigs of ``clusters.yaml``. The fault is made by the simulator's admin endpoint (found in the
  ``sim.json`` that ``dispatcher sim up`` writes beside ``clusters.yaml``, or ``--sim-admin``), by
  ``--fault-command``/``--heal-command`` (e.g. ``docker stop``/``docker start`` of a kind control plane), or
  by the operator: the drill then waits until the worker stops answering and counts from there.

The faults:

- ``down``: the whole cluster is down (its API refuses connections and nothing runs there);
- ``partition``: the cluster accepts connections and never answers, and keeps running its pods;
- ``flaky``: half of its API calls fail with 500/429.

The report: ``detection_seconds`` (fault to Lost), ``replacement_seconds`` (Lost to every affected job
admitted elsewhere), ``affected``, ``duplicates`` (jobs seen running on two clusters at the same instant,
sampled every 50 ms), ``overlap_seconds`` / ``overlap_seconds_max`` (for how long, summed over the jobs and for
the worst one: the GPU time run twice), ``lost`` (affected jobs not running anywhere at the end), and on the
worker's return ``fenced`` (stale copies deleted there) and ``fence_seconds``. The exit code is non-zero when a
duplicate or a loss happened. A partitioned cluster keeps running what it has, so ``partition`` shows the at-least-once
limit of failover (see :mod:`.failover`); against real clusters a partitioned worker cannot be looked into,
so only the copies on workers that answer are compared.
"""

from __future__ import annotations

from .common import DrillError, DrillOptions, drill_job
from .faults import CommandFault
from .run import run_drill, run_remote_drill

__all__ = ["CommandFault", "DrillError", "DrillOptions", "drill_job", "run_drill", "run_remote_drill"]
