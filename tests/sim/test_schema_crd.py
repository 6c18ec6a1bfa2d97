"""Custom resources: pruning, defaulting and OpenAPI validation as apiextensions-apiserver does them.

Messages are kube-openapi's, rendered through ``field.Error`` as the apiserver renders them; the ClusterQueue
cases are the ones recorded in ``shared/real-apiserver-answers.md``.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesim.errors import ApiError
from kubesim.schema import KindSchema, Schemas

QUOTA = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
NOT_CHECKED = (
    "Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)


@pytest.fixture(scope="module")
def cq() -> KindSchema:
    return Schemas.load().get("kueue.x-k8s.io", "v1beta2", "ClusterQueue")


def _cq(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 10}]}],
                }
            ],
        },
    }
    body["spec"].update(spec)
    return body


def _invalid(schema: KindSchema, body: dict[str, Any], **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        schema.apply_crd(body, **kw)
    assert info.value.code == 422, info.value.message
    return info.value


def _causes(err: ApiError) -> list[tuple[str, str, str]]:
    return [(c["field"], c["reason"], c["message"]) for c in (err.details or {})["causes"]]


def test_defaults_of_a_new_cluster_queue(cq: KindSchema) -> None:
    out, warnings = cq.apply_crd(_cq())
    assert warnings == []
    spec = out["spec"]
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["stopPolicy"] == "None"
    assert spec["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    # Defaults inside a defaulted object apply too.
    assert spec["preemption"] == {
        "borrowWithinCohort": {"policy": "Never"},
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
    }
    assert spec["namespaceSelector"] == {}


def test_explicit_values_are_kept_and_input_not_mutated(cq: KindSchema) -> None:
    body = _cq(queueingStrategy="StrictFIFO", preemption={"withinClusterQueue": "LowerPriority"})
    before = copy.deepcopy(body)
    out, _ = cq.apply_crd(body)
    assert body == before
    assert out["spec"]["queueingStrategy"] == "StrictFIFO"
    assert out["spec"]["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert out["spec"]["preemption"]["reclaimWithinCohort"] == "Never"


def test_type_error_is_422_with_field_path(cq: KindSchema) -> None:
    body = _cq()
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = {"x": 1}
    err = _invalid(cq, body)
    assert err.reason == "Invalid"
    assert err.details is not None
    assert err.details["kind"] == "ClusterQueue"
    assert err.details["group"] == "kueue.x-k8s.io"
    assert err.details["name"] == "cq"
    assert _causes(err) == [
        (
            QUOTA,
            "FieldValueTypeInvalid",
            f'Invalid value: "object": {QUOTA} in body must be of type integer,string: "object"',
        ),
        ("<nil>", "FieldValueInvalid", f'Invalid value: "": "{QUOTA}" must validate at least one schema (anyOf)'),
        (QUOTA, "FieldValueTypeInvalid", f'Invalid value: "object": {QUOTA} in body must be of type integer: "object"'),
        ("<nil>", "FieldValueInvalid", NOT_CHECKED),
    ]
    assert err.message.startswith(
        f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: [{QUOTA}: Invalid value: "object": {QUOTA} in body must be '
        'of type integer,string: "object", '
    )


def test_unknown_field_pruned_with_warning(cq: KindSchema) -> None:
    body = _cq(bogusField=1)
    body["metadata"]["bogusMeta"] = "x"
    out, warnings = cq.apply_crd(body)
    assert "bogusField" not in out["spec"]
    assert "bogusMeta" not in out["metadata"]
    # Pruned paths come sorted (PruneWithOptions sorts them), metadata's from ObjectMeta coercion after them.
    assert warnings == ['unknown field "spec.bogusField"', 'unknown field "metadata.bogusMeta"']
    assert cq.apply_crd(body, field_validation="Ignore")[1] == []
    body = _cq(zzz=1, aaa=2)
    assert cq.apply_crd(body)[1] == ['unknown field "spec.aaa"', 'unknown field "spec.zzz"']


def test_integral_floats_are_stored_as_integers(cq: KindSchema) -> None:
    body = _cq()
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 10.0
    out, _ = cq.apply_crd(body)
    value = out["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert value == 10 and type(value) is int


def test_unknown_field_strict_is_400(cq: KindSchema) -> None:
    body = _cq(bogusField=1, other=2)
    with pytest.raises(ApiError) as info:
        cq.apply_crd(body, field_validation="Strict")
    assert info.value.code == 400
    assert info.value.message == (
        'ClusterQueue in version "v1beta2" cannot be handled as a ClusterQueue: strict decoding error: '
        'unknown field "spec.bogusField", unknown field "spec.other"'
    )


def test_enum_violation(cq: KindSchema) -> None:
    err = _invalid(cq, _cq(queueingStrategy="Bogus"))
    assert _causes(err)[0] == (
        "spec.queueingStrategy",
        "FieldValueNotSupported",
        'Unsupported value: "Bogus": supported values: "StrictFIFO", "BestEffortFIFO"',
    )


def test_required_missing(cq: KindSchema) -> None:
    body = _cq()
    del body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    err = _invalid(cq, body)
    assert _causes(err) == [
        (QUOTA, "FieldValueRequired", "Required value"),
        ("<nil>", "FieldValueInvalid", NOT_CHECKED),
    ]
    assert err.message == (
        f'ClusterQueue.kueue.x-k8s.io "cq" is invalid: [{QUOTA}: Required value, <nil>: {NOT_CHECKED}]'
    )


def test_pattern_and_length_and_items(cq: KindSchema) -> None:
    body = _cq()
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1.5.3"
    [(field, reason, message)] = _causes(_invalid(cq, body))
    assert (field, reason) == (QUOTA, "FieldValueInvalid")
    assert message.startswith(f'Invalid value: "1.5.3": {QUOTA} in body should match \'^(\\+|-)?')

    body = _cq()
    body["spec"]["resourceGroups"][0]["coveredResources"] = [f"r{i}" for i in range(65)]
    assert _causes(_invalid(cq, body))[0] == (
        "spec.resourceGroups[0].coveredResources",
        "FieldValueTooMany",
        "Too many: 65: must have at most 64 items",
    )

    body = _cq()
    body["spec"]["resourceGroups"][0]["coveredResources"] = []
    assert _causes(_invalid(cq, body))[0] == (
        "spec.resourceGroups[0].coveredResources",
        "FieldValueInvalid",
        "Invalid value: 0: spec.resourceGroups[0].coveredResources in body should have at least 1 items",
    )

    err = _invalid(cq, _cq(cohortName="x" * 254))
    assert ("spec.cohortName", "FieldValueTooLong", "Too long: may not be more than 253 bytes") in _causes(err)


def test_minimum(cq: KindSchema) -> None:
    lq = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "Workload")
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "d"},
        "spec": {
            "queueName": "q",
            "podSets": [{"name": "main", "count": -1, "template": {"spec": {"containers": [{"name": "c"}]}}}],
        },
    }
    causes = _causes(_invalid(lq, body))
    assert causes[0] == (
        "spec.podSets[0].count",
        "FieldValueInvalid",
        "Invalid value: -1: spec.podSets[0].count in body should be greater than or equal to 0",
    )


def test_list_map_keys_must_be_unique(cq: KindSchema) -> None:
    body = _cq()
    flavors = body["spec"]["resourceGroups"][0]["flavors"]
    flavors.append(copy.deepcopy(flavors[0]))
    assert _causes(_invalid(cq, body)) == [
        (
            "spec.resourceGroups[0].flavors[1]",
            "FieldValueDuplicate",
            'Duplicate value: map[string]interface {}{"name":"default"}',
        )
    ]


def test_date_time_format_is_checked() -> None:
    wl = Schemas.load().get("kueue.x-k8s.io", "v1beta2", "Workload")
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "d"},
        "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}]},
        "status": {
            "conditions": [
                {"type": "X", "status": "True", "reason": "R", "message": "", "lastTransitionTime": "yesterday"}
            ]
        },
    }
    field = "status.conditions[0].lastTransitionTime"
    assert _causes(_invalid(wl, body))[0] == (
        field,
        "FieldValueTypeInvalid",
        f'Invalid value: "yesterday": {field} in body must be of type date-time: "yesterday"',
    )
    body["status"]["conditions"][0]["lastTransitionTime"] = "2024-01-01T00:00:00Z"
    wl.apply_crd(body)


def test_non_nullable_nulls_are_dropped_or_defaulted(cq: KindSchema) -> None:
    out, _ = cq.apply_crd(_cq(cohortName=None, queueingStrategy=None))
    assert "cohortName" not in out["spec"]
    assert out["spec"]["queueingStrategy"] == "BestEffortFIFO"


def test_ratcheting_keeps_unchanged_invalid_values(cq: KindSchema) -> None:
    stored, _ = cq.apply_crd(_cq())
    stored["spec"]["queueingStrategy"] = "LegacyValue"  # stored before a schema change, say
    update = copy.deepcopy(stored)
    update["spec"]["stopPolicy"] = "Hold"
    out, _ = cq.apply_crd(update, old=stored)
    assert out["spec"]["stopPolicy"] == "Hold"
    # Touching the invalid value itself is validated.
    update["spec"]["queueingStrategy"] = "OtherLegacy"
    _invalid(cq, update, old=stored)


def test_other_versions_and_kinds_prune_and_default() -> None:
    schemas = Schemas.load()
    old_cq = schemas.get("kueue.x-k8s.io", "v1beta1", "ClusterQueue")
    out, _ = old_cq.apply_crd(
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "x"}, "spec": {}}
    )
    assert out["spec"]["queueingStrategy"] == "BestEffortFIFO"
    js = schemas.get("jobset.x-k8s.io", "v1alpha2", "JobSet")
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "d"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "template": {
                        "metadata": {"labels": {"a": "b"}, "junk": 1},
                        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "bad": 1}]}}},
                    },
                }
            ]
        },
    }
    out, warnings = js.apply_crd(body)
    job = out["spec"]["replicatedJobs"][0]
    assert job["replicas"] == 1
    assert job["template"]["metadata"] == {"labels": {"a": "b"}}
    assert warnings == [
        'unknown field "spec.replicatedJobs[0].template.metadata.junk"',
        'unknown field "spec.replicatedJobs[0].template.spec.template.spec.containers[0].bad"',
    ]


def test_metadata_type_errors_are_400(cq: KindSchema) -> None:
    body = _cq()
    body["metadata"]["labels"] = {"a": 1}
    with pytest.raises(ApiError) as info:
        cq.apply_crd(body)
    assert info.value.code == 400
    assert info.value.message.endswith("into Go struct field ObjectMeta.metadata.labels of type string")
