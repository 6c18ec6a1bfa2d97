"""What every part of a drill shares: its options, its errors, its progress bar, its Job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from .. import labels as L

__all__ = ["MODES", "REPORT_KEYS", "DrillError", "DrillOptions", "bar", "drill_job"]

Obj = dict[str, Any]
MODES = ("down", "partition", "flaky")
REPORT_KEYS = (
    "mode",
    "victim",
    "jobs",
    "lost_timeout",
    "detection_seconds",
    "replacement_seconds",
    "affected",
    "duplicates",
    "overlap_seconds",
    "overlap_seconds_max",
    "fencing",
    "at_risk",
    "lost",
    "fenced",
    "fence_seconds",
)


class DrillError(Exception):
    """The drill cannot run as asked (its message names the option or the cluster)."""


@dataclass
class DrillOptions:
    workers: int = 3
    mode: str = "down"
    jobs: int = 100
    lost_timeout: float = 5.0
    json: bool = False
    timeout: float = 300.0
    # Against a running dispatcher (``--config/--api/--cluster``):
    config: str | None = None
    api: str | None = None
    token: str | None = None
    cluster: str | None = None
    namespace: str = "team-a"
    queue: str = "user-queue"
    sim_admin: str | None = None
    fault_command: str | None = None
    heal_command: str | None = None
    keep: bool = False
    # ``--sim``: fencing agents inside the workers (``agent``) or none; the Lease's timings (default: from the lost
    # timeout); ``agent_down``: the victim's agent is stopped before the fault (what is left at risk then).
    fencing: str = "agent"
    fencing_lease: float | None = None
    fencing_grace: float | None = None
    agent_down: bool = False


_last_bar: dict[str, int] = {}


def bar(done: int, total: int, label: str, out: TextIO) -> None:
    """A progress bar on ``out``, redrawn only when it changes."""
    if _last_bar.get(label) == done:
        return
    _last_bar[label] = done
    width = 30
    filled = int(width * done / max(total, 1))
    out.write(f"\r{label:<28} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    out.flush()


def drill_job(
    name: str,
    *,
    seconds: float = 3600.0,
    cpu: str = "10m",
    namespace: str = "team-a",
    queue: str = "user-queue",
) -> Obj:
    """A suspended Job of the drills and benchmarks: ``sleep`` for ``seconds`` on a real cluster, the same simulated
    run time on the simulator."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {L.QUEUE_NAME: queue}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"sim.dispatcher.io/run-seconds": f"{seconds:g}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox:1.36",
                            "command": ["sleep", f"{seconds:g}"],
                            "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}},
                        }
                    ],
                },
            },
        },
    }
