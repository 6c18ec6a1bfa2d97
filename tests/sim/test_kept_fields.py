"""A top-level field sent exactly as stored is not walked again: ``apply_crd(old_as_stored=True)`` leaves it out of
pruning and defaulting, ``decode_builtin(stored=...)`` out of decoding. Every write of a simulated cluster running
Jobs through Kueue must store the same object (same JSON, same key order) and warn the same as the full walk."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from simclient import wait_for

from kubecommon import fastjson
from kubesim.api import RequestOptions
from kubesim.cluster import ClusterOptions, SimCluster
from kubesim.errors import ApiError
from kubesim.schema import crd, decode
from kubesim.schema.model import Node
from kubesim.topology import default_topology


def _job(i: int) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"j{i}", "namespace": "default", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "suspend": True,
            "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
        },
    }


async def test_writes_store_what_the_full_walk_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    full = crd.apply_crd
    compared: list[int] = []

    def both(schema: Any, obj: Any, **kw: Any) -> tuple[dict[str, Any], list[str]]:
        kept = kw.get("old_as_stored") and isinstance(kw.get("old"), dict)
        try:
            got = full(schema, obj, **kw)
        except ApiError as exc:
            if kept:
                with pytest.raises(ApiError) as again:
                    full(schema, obj, **{**kw, "old_as_stored": False})
                assert (again.value.code, again.value.message) == (exc.code, exc.message)
            raise
        if kept:
            want = full(schema, obj, **{**kw, "old_as_stored": False})
            assert fastjson.dumps(got[0]) == fastjson.dumps(want[0]) and got[1] == want[1]
            compared.append(sum(fastjson.dumps(v) == fastjson.dumps(kw["old"].get(k)) for k, v in obj.items()))
        return got

    monkeypatch.setattr(crd, "apply_crd", both)
    whole = decode.decode_builtin
    decoded: list[int] = []

    def both_builtin(schema: Any, obj: Any, **kw: Any) -> tuple[dict[str, Any], list[str]]:
        got = whole(schema, obj, **kw)  # what fails, fails the same way: nothing is kept before the walk
        if kw.get("stored") is not None:
            want = whole(schema, obj, **{**kw, "stored": None})
            assert fastjson.dumps(got[0]) == fastjson.dumps(want[0]) and got[1] == want[1]
            kept = [k for k, v in obj.items() if fastjson.dumps(v) == fastjson.dumps(kw["stored"].get(k))]
            decoded.append(len(kept))
            sent = fastjson.dumps(obj)
            for key in kept:
                if isinstance(got[0][key], dict):
                    got[0][key]["changed"] = True  # the stored copy is not the caller's
                    assert fastjson.dumps(obj) == sent
                    del got[0][key]["changed"]
        return got

    monkeypatch.setattr(decode, "decode_builtin", both_builtin)
    cluster = SimCluster("w", ClusterOptions(default_run_seconds=0.2))
    topology = default_topology()
    for group in topology.cpu_worker.nodes:
        cluster.add_nodes(group)
    for obj in topology.cpu_worker.objects:
        cluster.apply(obj)
    await cluster.start()
    try:
        jobs = cluster.api.rt("batch", "Job")
        for i in range(6):
            cluster.api.create(jobs, "v1", "default", _job(i), RequestOptions(field_manager="t"))

        def finished() -> int:
            return sum(
                any(c.get("type") == "Complete" for c in (j.get("status") or {}).get("conditions") or ())
                for j in cluster.store.list(jobs.key, "default")
            )

        await wait_for(lambda: finished() == 6, "six Jobs to complete", timeout=30)
    finally:
        await cluster.stop()
    # Workloads' status writes and finalizer removals, queues' status writes: most kept a field.
    assert len(compared) > 20 and sum(n > 0 for n in compared) > 20
    # Jobs' and Pods' status writes, binding, suspend: most kept a field.
    assert len(decoded) > 20 and sum(n > 0 for n in decoded) > 20


def test_a_changed_field_is_still_pruned_and_defaulted() -> None:
    cluster = SimCluster("w", ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False))
    cq = next(o for o in default_topology().cpu_worker.objects if o["kind"] == "ClusterQueue")
    cluster.apply(cq)
    rt = cluster.api.rt("kueue.x-k8s.io", "ClusterQueue")
    stored = cluster.store.get(rt.key, "", cq["metadata"]["name"])
    assert stored is not None and stored["spec"]["queueingStrategy"] == "BestEffortFIFO"
    body = fastjson.clone(stored)
    del body["spec"]["queueingStrategy"]  # defaulted again
    body["spec"]["surprise"] = 1  # pruned, with a warning
    body["metadata"]["labels"] = {"a": "b"}
    schema = cluster.api.schemas.get(rt.group, rt.storage_version, rt.kind)
    got, warnings = schema.apply_crd(body, old=stored, old_as_stored=True)
    want, want_warnings = schema.apply_crd(body, old=stored)
    assert fastjson.dumps(got) == fastjson.dumps(want)
    assert got["spec"]["queueingStrategy"] == "BestEffortFIFO" and "surprise" not in got["spec"]
    assert warnings == want_warnings == ['unknown field "spec.surprise"']
    # A top-level default (no shipped CRD has one) still lands beside a kept field.
    raw = fastjson.clone(schema.root.raw)
    raw["p"]["status"] = {**raw["p"]["status"], "df": {"pendingWorkloads": 0}}
    root = Node(schema.schemas, raw)
    defaulting = SimpleNamespace(
        root=root, kind=schema.kind, version=schema.version, has_rules=schema.has_rules, schemas=schema.schemas
    )
    body = fastjson.clone(stored)
    body.pop("status", None)
    body["spec"]["cohortName"] = "other"
    got, _ = crd.apply_crd(defaulting, body, old=stored, old_as_stored=True)  # type: ignore[arg-type]
    want, _ = crd.apply_crd(defaulting, body, old=stored)  # type: ignore[arg-type]
    assert fastjson.dumps(got) == fastjson.dumps(want) and got["status"] == {"pendingWorkloads": 0}
