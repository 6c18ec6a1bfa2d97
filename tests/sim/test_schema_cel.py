"""CEL rules (x-kubernetes-validations) of the shipped CRDs, enforced as the apiserver enforces them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesim.errors import ApiError
from kubesim.schema import KindSchema, Schemas, cel
from kubesim.schema.cel import compile_rules, evaluate, unenforced_rules

#: Rules the simulator does not enforce (apiVersion, kind, path, rule, why). Empty: every rule of the shipped
#: CRDs compiles with the evaluator and uses only supported functions. A CRD update that adds a rule needing
#: e.g. ``quantity()`` or ``url()`` shows up here.
EXPECTED_UNENFORCED: list[tuple[str, str, str, str, str]] = []


@pytest.fixture(autouse=True)
def _check_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rule evaluated in these tests also runs on the whole value, and must answer the same."""
    monkeypatch.setattr(cel, "CHECK_PROJECTION", True)


def _invalid(schema: KindSchema, body: dict[str, Any], **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        schema.apply_crd(body, **kw)
    assert info.value.code == 422, info.value.message
    return info.value


def _causes(err: ApiError) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in (err.details or {})["causes"]]


def _rayjob(managed_by: str) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "rj", "namespace": "default"},
        "spec": {"managedBy": managed_by, "entrypoint": "python x.py"},
    }


def test_every_rule_is_enforced_or_listed() -> None:
    assert unenforced_rules(Schemas.load()) == EXPECTED_UNENFORCED


def test_ray_managed_by_values() -> None:
    rj = Schemas.load().get("ray.io", "v1", "RayJob")
    err = _invalid(rj, _rayjob("other.io/x"))
    assert _causes(err) == [
        (
            "spec.managedBy",
            "FieldValueInvalid",
            "Invalid value: \"string\": the managedBy field value must be either 'ray.io/kuberay-operator' or "
            "'kueue.x-k8s.io/multikueue'",
        )
    ]
    assert err.message.startswith('RayJob.ray.io "rj" is invalid: spec.managedBy: Invalid value: "string": ')
    for ok in ("ray.io/kuberay-operator", "kueue.x-k8s.io/multikueue"):
        rj.apply_crd(_rayjob(ok))
    rc = Schemas.load().get("ray.io", "v1", "RayCluster")
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "c", "namespace": "d"},
        "spec": {"managedBy": "x", "headGroupSpec": {"template": {"spec": {"containers": []}}}},
    }
    assert [c[0] for c in _causes(_invalid(rc, body))] == ["spec.managedBy"]


def test_immutability_rules_fire_only_on_update() -> None:
    rj = Schemas.load().get("ray.io", "v1", "RayJob")
    stored, _ = rj.apply_crd(_rayjob("kueue.x-k8s.io/multikueue"))
    changed = copy.deepcopy(stored)
    changed["spec"]["managedBy"] = "ray.io/kuberay-operator"
    rj.apply_crd(changed)  # a create: no oldSelf, the transition rule does not run
    err = _invalid(rj, changed, old=stored)
    assert _causes(err) == [
        ("spec.managedBy", "FieldValueInvalid", 'Invalid value: "string": the managedBy field is immutable')
    ]
    rj.apply_crd(copy.deepcopy(stored), old=stored)  # unchanged: fine


def test_kubeflow_and_jobset_transition_rules() -> None:
    schemas = Schemas.load()
    pt = schemas.get("kubeflow.org", "v1", "PyTorchJob")
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "p", "namespace": "d"},
        "spec": {
            "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue", "schedulingPolicy": {"queue": "a"}},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}}
            },
        },
    }
    stored, _ = pt.apply_crd(body)
    changed = copy.deepcopy(stored)
    changed["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "b"
    assert _causes(_invalid(pt, changed, old=stored)) == [
        (
            "spec.runPolicy.schedulingPolicy.queue",
            "FieldValueInvalid",
            'Invalid value: "string": spec.runPolicy.schedulingPolicy.queue is immutable',
        )
    ]
    js = schemas.get("jobset.x-k8s.io", "v1alpha2", "JobSet")
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "d"},
        "spec": {
            "failurePolicy": {"maxRestarts": 1},
            "replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {"containers": []}}}}}],
        },
    }
    stored, _ = js.apply_crd(body)
    changed = copy.deepcopy(stored)
    changed["spec"]["failurePolicy"]["maxRestarts"] = 3
    assert _causes(_invalid(js, changed, old=stored)) == [
        ("spec.failurePolicy", "FieldValueInvalid", 'Invalid value: "object": Value is immutable')
    ]


def _cq(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]}
                    ],
                }
            ],
            **spec,
        },
    }


def test_cluster_queue_rules() -> None:
    cq = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "ClusterQueue")
    causes = _causes(_invalid(cq, _cq()))
    assert causes == [
        ("spec", "FieldValueInvalid", 'Invalid value: "object": borrowingLimit must be nil when cohort is empty'),
        (
            "spec.resourceGroups[0]",
            "FieldValueInvalid",
            'Invalid value: "object": flavors must have the same number of resources as the coveredResources',
        ),
    ]
    body = _cq(
        cohortName="org",
        flavorFungibility={"preference": "BorrowingOverPreemption"},
        preemption={"reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "LowerPriority"}},
    )
    body["spec"]["resourceGroups"][0]["coveredResources"] = ["cpu"]
    assert _causes(_invalid(cq, body)) == [
        (
            "spec.flavorFungibility",
            "FieldValueInvalid",
            'Invalid value: "object": preference can only be set when both whenCanBorrow and whenCanPreempt are '
            "TryNextFlavor",
        ),
        (
            "spec.preemption",
            "FieldValueInvalid",
            'Invalid value: "object": reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never',
        ),
    ]


def test_resource_flavor_rules_and_evaluation_errors() -> None:
    rf = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "ResourceFlavor")
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "f"},
        "spec": {"topologyName": "t"},
    }
    # The rule reads self.nodeLabels, which is absent: an evaluation error, worded as cel-go words it.
    assert _causes(_invalid(rf, body)) == [
        (
            "spec",
            "FieldValueInvalid",
            'Invalid value: "object": no such key: nodeLabels evaluating rule: at least one nodeLabel is required '
            "when topology is set",
        )
    ]
    body["spec"] = {"tolerations": [{"key": "k", "operator": "Exists", "value": "v", "effect": "NoSchedule"}]}
    assert _causes(_invalid(rf, body)) == [
        (
            "spec.tolerations",
            "FieldValueInvalid",
            "Invalid value: \"array\": a value must be empty when 'operator' is 'Exists'",
        )
    ]
    stored, _ = rf.apply_crd({**body, "spec": {"topologyName": "t", "nodeLabels": {"a": "b"}}})
    changed = copy.deepcopy(stored)
    changed["spec"]["topologyName"] = "u"
    assert _causes(_invalid(rf, changed, old=stored))[0][2] == (
        'Invalid value: "object": topologyName is immutable when topologyName is set'
    )


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "d"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {"name": "main", "count": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ],
        },
    }


def test_workload_rules() -> None:
    wl = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "Workload")
    body = _workload()
    body["spec"]["podSets"][0]["minCount"] = 3
    assert _causes(_invalid(wl, body)) == [
        (
            "spec.podSets[0]",
            "FieldValueInvalid",
            'Invalid value: "object": minCount should be positive and less or equal to count',
        )
    ]
    stored, _ = wl.apply_crd(_workload())
    stored["status"] = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "",
                "lastTransitionTime": "2024-01-01T00:00:00Z",
            }
        ],
        "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 2}]},
    }
    stored, _ = wl.apply_crd(stored, old=stored)
    changed = copy.deepcopy(stored)
    changed["spec"]["queueName"] = "other"
    # A rule on the object root: the apiserver reports it on a nil field path.
    assert _causes(_invalid(wl, changed, old=stored)) == [
        ("<nil>", "FieldValueInvalid", 'Invalid value: "object": queueName is immutable while workload quota reserved')
    ]


def test_blocking_schema_errors_skip_cel() -> None:
    rj = Schemas.load().get("ray.io", "v1", "RayJob")
    body = _rayjob("other.io/x")
    body["spec"]["suspend"] = "yes"
    causes = _causes(_invalid(rj, body))
    assert [c[0] for c in causes] == ["spec.suspend", "<nil>"]
    assert causes[1][2].startswith("Invalid value: null: some validation rules were not checked")


def test_rule_options() -> None:
    """messageExpression, fieldPath, reason, optionalOldSelf and the default message, on synthetic rules."""
    rules = compile_rules(
        [
            {"rule": "self.a > 0", "msg": "static"},
            {"rule": "self.a > 1", "mexp": "'a is ' + string(self.a)"},
            {"rule": "self.a > 2"},
            {"rule": "self.a.lowerAscii() == 'x'"},
            {"rule": "oldSelf.hasValue() ? oldSelf.value().a == self.a : true", "oos": True},
            {"rule": "self == oldSelf", "msg": "immutable"},
            {"rule": "quantity(self.q).isGreaterThan(quantity('1'))"},
            {"rule": "self.a >"},
        ]
    )
    assert [r.enforced for r in rules] == [True, True, True, True, True, True, False, False]
    assert rules[6].error == "unsupported function(s): isGreaterThan, quantity"
    assert rules[7].error is not None and rules[7].error.startswith("compile error")
    out = list(evaluate(rules, {"a": 0}, None, False))
    # The oldSelf rule without optionalOldSelf is skipped on create; the optional one runs with none().
    assert [(o.rule.rule, o.passed, o.message, o.error) for o in out] == [
        ("self.a > 0", False, "static", None),
        ("self.a > 1", False, "a is 0", None),
        ("self.a > 2", False, "failed rule: self.a > 2", None),
        ("self.a.lowerAscii() == 'x'", False, None, "no such overload"),
        ("oldSelf.hasValue() ? oldSelf.value().a == self.a : true", True, None, None),
    ]
    out = list(evaluate(rules, {"a": 3}, {"a": 4}, True))
    assert [(o.rule.rule, o.passed) for o in out] == [
        ("self.a > 0", True),
        ("self.a > 1", True),
        ("self.a > 2", True),
        ("self.a.lowerAscii() == 'x'", False),
        ("oldSelf.hasValue() ? oldSelf.value().a == self.a : true", False),
        ("self == oldSelf", False),
    ]
