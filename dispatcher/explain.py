"""``dispatcher explain``: why a workload went where it went, or why it waits.

Reads SQL only (works while the service runs, or after): the latest decision stored for the
workload, one row per worker with its score and the terms behind it, or the reason it could not
take the workload; then the placement attempts in order.
"""

from __future__ import annotations

from typing import Any

from .store.models import Workload
from .store.repo import Repo

__all__ = ["explain", "render_decision", "render_workload"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]


def render_decision(decision: dict[str, Any]) -> list[str]:
    rows = [["WORKER", "FEASIBLE", "SCORE", "DETAILS"]]
    chosen = decision.get("chosen")
    for w in decision.get("workers") or []:
        name = str(w.get("cluster", ""))
        mark = " *" if name == chosen else ""
        if w.get("feasible"):
            terms = ", ".join(f"{k}={v:.2f}" for k, v in sorted((w.get("terms") or {}).items()))
            details = f"{terms}; ClusterQueue {w.get('clusterQueue')}"
            if w.get("preempts"):
                details += f"; would preempt {w['preempts']}"
                if w.get("preemptionReasons"):
                    details += f" ({w['preemptionReasons']})"
            if w.get("partial"):
                details += f"; {w['partial']}"
            if w.get("topology"):
                details += f"; topology: {w['topology']}"
            fair = w.get("fairShare")
            if isinstance(fair, dict) and fair.get("share") is not None:
                details += f"; fair share after admission {fair['share']} ({fair.get('resource')})"
            rows.append([name + mark, "yes", f"{float(w.get('score') or 0):.3f}", details])
        else:
            rows.append([name, "no", "-", str(w.get("reason", ""))])
    return _table(rows)


async def explain(repo: Repo, namespace: str, name: str) -> str | None:
    wl = await repo.get_workload(namespace, name)
    if wl is None:
        return None
    return render_workload(wl)


def render_workload(wl: Workload) -> str:
    """The explanation of one workload row (loaded with its placements)."""
    lines = [
        f"Workload {wl.namespace}/{wl.name} ({wl.kind}, queue {wl.queue}, priority {wl.priority})",
        f"State: {wl.state}" + (f" on {wl.cluster}" if wl.cluster else "") + (f", generation {wl.generation}"),
    ]
    if wl.problem:
        lines.append(f"Problem: {wl.problem} (not placed until the object is fixed)")
    if wl.reason:
        lines.append(f"Reason: {wl.reason}")
    decision = wl.last_decision
    if decision:
        lines.append(
            f"Decision ({decision.get('strategy', 'scored')}, {decision.get('mode', '')}): "
            f"{decision.get('summary', '')}"
        )
        lines.extend(render_decision(decision))
        chosen, fencing = decision.get("chosen"), decision.get("fencing")
        if chosen and fencing == "agent":
            lines.append(
                f"Failover: exactly once: a fencing agent runs on {chosen}, so if {chosen} is cut off its copy is "
                "stopped there before the workload starts elsewhere"
            )
        elif chosen and fencing == "none":
            lines.append(
                f"Failover: at-least-once: {chosen} has fencing: none, so if it is cut off (alive, unreachable) its "
                "copy may keep running while the workload runs again elsewhere"
            )
        nominated = decision.get("nominated")
        if decision.get("strategy") == "kueue-external" and nominated:
            lines.append(
                f"Nominated: {', '.join(str(n) for n in nominated)} (the manager Workload's "
                "status.nominatedClusterNames: MultiKueue creates its copy there and keeps the first one a worker "
                "admits, as status.clusterName)"
            )
        copies = decision.get("copies")
        if copies:  # allAtOnce / incremental (MultiKueue's strategies)
            lines.append(f"Strategy {decision.get('strategy')}: copies on {', '.join(str(c) for c in copies)}")
            winner = decision.get("winner")
            lines.append(
                f"Winner: {winner} (its Kueue admitted first; the other copies were deleted)"
                if winner
                else "Winner: none yet (the first worker whose Kueue admits its copy wins)"
            )
    elif not wl.problem:
        lines.append("No decision yet (the placement loop has not reached it).")
    if wl.placements:
        lines.append("")
        lines.append("Placements:")
        rows = [["#", "GENERATION", "CLUSTER", "SCORE", "STATE", "OUTCOME"]]
        for p in sorted(wl.placements, key=lambda p: p.id):
            rows.append(
                [
                    str(p.id),
                    str(p.generation),
                    p.cluster,
                    f"{p.score:.3f}" if p.score is not None else "-",
                    p.state,
                    (p.outcome or "")[:80],
                ]
            )
        lines.extend(_table(rows))
    return "\n".join(lines)
