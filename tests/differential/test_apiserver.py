"""The same API call sequence against the simulator's API server and a real kube-apiserver (the real rig's
manager), compared field by field: error codes, reasons, messages and causes, defaulting, generation, the status
subresource, merge / JSON / strategic / server-side-apply patches, paging, selectors, watches, delete propagation,
CRD pruning and validation.

Every answer is normalised (uids, resourceVersions, times, generated names) and the two sequences must be equal;
a difference is fixed in the simulator, or listed in the README's "known differences" with its reason and left out
of the comparison here by name (``KNOWN``).
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from realrig import RealRig, clean

from dispatcher.config import KubeconfigRef
from dispatcher.kube.client import ClusterClient, Resource, connect

Obj = dict[str, Any]
JOBS = Resource("batch", "v1", "jobs", "Job")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
CQS = Resource("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False)
NS = "default"

#: Steps whose answers differ for a reason the README gives ("Known differences"), compared only as listed.
KNOWN: dict[str, str] = {}

_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_VOLATILE_META = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "deletionTimestamp")


def _norm(value: Any) -> Any:
    """Uids, versions and times out; dictionaries sorted by key."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _VOLATILE_META or k in ("continue", "lastProbeTime", "lastTransitionTime"):
                out[k] = "<volatile>" if v not in (None, "") else v
                continue
            out[k] = _norm(v)
        return out
    if isinstance(value, list):
        return [_norm(v) for v in value]
    if isinstance(value, str):
        return _UID.sub("<uid>", value)
    return value


async def _call(
    client: ClusterClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Obj | None = None,
    content_type: str = "application/json",
) -> Obj:
    """One call's observable answer: code, Status reason/message/details or the object, and Warning headers."""
    resp = await client._send(method, path, query=query, body=body, content_type=content_type)
    async with resp:
        raw = await resp.read()
        warnings = sorted(resp.headers.getall("Warning", []))
        code = resp.status
    try:
        data = json.loads(raw) if raw else {}
    except json.JSONDecodeError:
        data = {"raw": raw.decode(errors="replace")[:200]}
    return {"code": code, "warnings": [_UID.sub("<uid>", w) for w in warnings], "body": _norm(data)}


def _job(name: str, **spec: Any) -> Obj:
    base: Obj = {
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
            }
        },
        "suspend": True,
        # Managed by nobody here: no Job controller writes its status while the sequence runs (the real one and
        # the simulated one would race the test, each at its own pace).
        "managedBy": "example.com/nobody",
    }
    base.update(spec)
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NS}, "spec": base}


def _cq(name: str, quota: Any, **extra: Any) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": quota}]}],
                }
            ],
            **extra,
        },
    }


Step = Callable[[ClusterClient, str], Awaitable[Obj]]


async def sequence(client: ClusterClient, tag: str) -> dict[str, Obj]:
    """Run every step on one server; names carry ``tag`` so that runs never collide; answers use ``{tag}``."""
    out: dict[str, Obj] = {}
    jobs = JOBS.path(NS)

    def name(base: str) -> str:
        return f"{base}-{tag}"

    async def record(step: str, answer: Obj) -> None:
        out[step] = json.loads(json.dumps(answer).replace(tag, "{tag}"))

    # -- errors on create --------------------------------------------------------------------------
    await record("job-type-error", await _call(client, "POST", jobs, body=_job(name("t"), parallelism="two")))
    bad_q = _job(name("q"))
    bad_q["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1.5.3"
    await record("job-bad-quantity", await _call(client, "POST", jobs, body=bad_q))
    await record("job-invalid", await _call(client, "POST", jobs, body=_job(name("i"), parallelism=-1)))
    no_containers = _job(name("n"))
    no_containers["spec"]["template"]["spec"]["containers"] = []
    await record("job-no-containers", await _call(client, "POST", jobs, body=no_containers))
    await record("cr-type-error", await _call(client, "POST", CQS.path(), body=_cq(name("cq-bad"), {"x": 1})))
    await record(
        "cr-unknown-field", await _call(client, "POST", CQS.path(), body=_cq(name("cq"), "4", bogusField=True))
    )
    kindless = _cq(name("cq-nokind"), "4")
    del kindless["kind"], kindless["apiVersion"]
    await record("cr-without-kind", await _call(client, "POST", CQS.path(), body=kindless))
    job_kindless = _job(name("nokind"))
    del job_kindless["kind"], job_kindless["apiVersion"]
    await record("job-without-kind", await _call(client, "POST", jobs, body=job_kindless))
    await record(
        "cr-strategic-patch",
        await _call(
            client,
            "PATCH",
            CQS.path(None, name("cq")),
            body={"metadata": {"labels": {"a": "b"}}},
            content_type="application/strategic-merge-patch+json",
        ),
    )

    # -- a Job's life: defaults, generation, status, conflicts --------------------------------------
    created = await _call(
        client, "POST", jobs, body=_job(name("j"), parallelism=2, completions=2), query={"fieldManager": "diff"}
    )
    await record("job-create", created)
    await record("job-exists", await _call(client, "POST", jobs, body=_job(name("j"))))
    await record("job-get-missing", await _call(client, "GET", JOBS.path(NS, name("missing"))))
    await record(
        "job-label-patch",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body={"metadata": {"labels": {"x": "1"}}},
            content_type="application/merge-patch+json",
        ),
    )
    await record(
        "job-spec-patch",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body={"spec": {"parallelism": 1}},
            content_type="application/merge-patch+json",
        ),
    )
    await record(
        "job-strategic-patch",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body={"metadata": {"annotations": {"s": "1"}}},
            content_type="application/strategic-merge-patch+json",
        ),
    )
    await record(
        "job-json-patch",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body=[{"op": "add", "path": "/metadata/annotations/j", "value": "2"}],
            content_type="application/json-patch+json",
        ),
    )
    await record(
        "job-json-patch-test-fails",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body=[{"op": "test", "path": "/spec/parallelism", "value": 9}],
            content_type="application/json-patch+json",
        ),
    )
    await record(
        "job-status-ignores-spec",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j"), "status"),
            body={"spec": {"parallelism": 3}, "status": {"active": 0}},
            content_type="application/merge-patch+json",
        ),
    )
    stale = (await client.get(JOBS, NS, name("j"))) or {}
    stale["metadata"]["resourceVersion"] = "1"
    await record("job-put-stale", await _call(client, "PUT", JOBS.path(NS, name("j")), body=stale))
    await record(
        "job-managedby-change",
        await _call(
            client,
            "PATCH",
            JOBS.path(NS, name("j")),
            body={"spec": {"managedBy": "other.io/x"}},
            content_type="application/merge-patch+json",
        ),
    )
    await record(
        "job-field-selector-unsupported",
        await _call(client, "GET", jobs, query={"fieldSelector": "spec.parallelism=1"}),
    )

    # -- server-side apply ---------------------------------------------------------------------------
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name("ssa"), "namespace": NS},
        "data": {"a": "1"},
    }
    await record(
        "ssa-first",
        await _call(
            client,
            "PATCH",
            CONFIGMAPS.path(NS, name("ssa")),
            body=cm,
            query={"fieldManager": "m1"},
            content_type="application/apply-patch+yaml",
        ),
    )
    cm["data"]["a"] = "2"
    await record(
        "ssa-conflict",
        await _call(
            client,
            "PATCH",
            CONFIGMAPS.path(NS, name("ssa")),
            body=cm,
            query={"fieldManager": "m2"},
            content_type="application/apply-patch+yaml",
        ),
    )

    # -- lists: paging and selectors ---------------------------------------------------------------
    for i in range(3):
        await client.create(
            CONFIGMAPS,
            NS,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name(f"page-{i}"), "labels": {"diff": tag, "i": str(i)}},
            },
        )
    page = await _call(client, "GET", CONFIGMAPS.path(NS), query={"labelSelector": f"diff={tag}", "limit": 2})
    await record(
        "list-page",
        {
            "code": page["code"],
            "names": [i["metadata"]["name"] for i in page["body"]["items"]],
            "continue": bool(page["body"]["metadata"].get("continue")),
            "remainingItemCount": page["body"]["metadata"].get("remainingItemCount"),
        },
    )
    sel = await _call(client, "GET", CONFIGMAPS.path(NS), query={"labelSelector": f"diff={tag},i in (0,2)"})
    await record("list-set-selector", {"names": [i["metadata"]["name"] for i in sel["body"]["items"]]})
    fsel = await _call(client, "GET", CONFIGMAPS.path(NS), query={"fieldSelector": f"metadata.name={name('page-1')}"})
    await record("list-field-selector", {"names": [i["metadata"]["name"] for i in fsel["body"]["items"]]})

    # -- watch: replay after a resourceVersion ------------------------------------------------------
    listed = await client.list(CONFIGMAPS, NS, label_selector=f"diff={tag}")
    rv = listed["metadata"]["resourceVersion"]
    await client.patch(CONFIGMAPS, NS, name("page-0"), {"data": {"k": "v"}})
    await client.delete(CONFIGMAPS, NS, name("page-1"))
    events: list[tuple[str, str]] = []
    watch = client.watch(CONFIGMAPS, NS, resource_version=rv, label_selector=f"diff={tag}", timeout_seconds=5)
    async for kind, obj in watch:
        if kind != "BOOKMARK":
            events.append((kind, str((obj.get("metadata") or {}).get("name"))))
        if len(events) == 2:
            break
    await watch.aclose()  # type: ignore[attr-defined]
    await record("watch-replay", {"events": events})

    # -- delete propagation --------------------------------------------------------------------------
    for n in ("d-orphan", "d-bg", "d-fg"):
        await client.create(JOBS, NS, _job(name(n)))
    await record("delete-no-body", await _call(client, "DELETE", JOBS.path(NS, name("d-orphan"))))
    await record(
        "delete-background",
        await _call(client, "DELETE", JOBS.path(NS, name("d-bg")), body={"propagationPolicy": "Background"}),
    )
    await record(
        "delete-foreground",
        await _call(client, "DELETE", JOBS.path(NS, name("d-fg")), body={"propagationPolicy": "Foreground"}),
    )
    return out


@pytest.mark.timeout(300)
async def test_the_simulator_answers_as_a_real_apiserver(real_rig_session: RealRig, tmp_path: Path) -> None:
    from kubesim.world import SimWorld, WorldOptions

    await clean(real_rig_session)
    tag = uuid.uuid4().hex[:6]
    world = SimWorld(WorldOptions(workers=1, gpu_workers=0))
    await world.start()
    try:
        await asyncio.to_thread(world.write_files, tmp_path)
        sim = await connect("sim-manager", KubeconfigRef(path=str(tmp_path / "manager.kubeconfig")))
        real = await real_rig_session.client("manager")
        try:
            got_sim = await sequence(sim, tag)
            got_real = await sequence(real, tag)
        finally:
            await sim.close()
            await real.close()
            for c in (real_rig_session,):
                del c
    finally:
        await world.stop()
    differences = {
        step: {"sim": got_sim.get(step), "real": got_real.get(step)}
        for step in got_real
        if step not in KNOWN and got_sim.get(step) != got_real.get(step)
    }
    report = tmp_path / "differences.json"
    report.write_text(json.dumps(differences, indent=1))
    assert not differences, f"the simulator differs from kube-apiserver in {sorted(differences)} (all of it: {report})"


def test_every_known_difference_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for step in KNOWN:
        assert f"`{step}`" in readme, f"KNOWN[{step!r}] must be explained in the README's known differences"
