"""Decoding of built-in kinds: Go ``encoding/json`` errors, quantities, times, unknown fields.

Expected messages are the real apiserver's (``shared/real-apiserver-answers.md`` and Go's wording).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesim.errors import ApiError
from kubesim.schema import KindSchema, Schemas
from kubesim.schema.gosemantics import canonical_quantity, go_float, parse_go_time

QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


@pytest.fixture(scope="module")
def job() -> KindSchema:
    return Schemas.load().get("batch", "v1", "Job")


def _job(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "default", "labels": {"app": "x"}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
                    ],
                }
            }
        },
    }
    body["spec"].update(spec)
    return body


def _error(schema: KindSchema, body: dict[str, Any], **kw: Any) -> ApiError:
    with pytest.raises(ApiError) as info:
        schema.decode_builtin(body, **kw)
    return info.value


def test_well_formed_job_decodes_unchanged(job: KindSchema) -> None:
    body = _job(parallelism=2, completions=4)
    out, warnings = job.decode_builtin(copy.deepcopy(body))
    assert out == body
    assert warnings == []


def test_string_for_int32_is_400_with_go_message(job: KindSchema) -> None:
    err = _error(job, _job(parallelism="two"))
    assert err.code == 400
    assert err.reason == "BadRequest"
    assert err.details is None
    assert err.message == (
        'Job in version "v1" cannot be handled as a Job: json: cannot unmarshal string into Go struct field '
        "JobSpec.spec.parallelism of type int32"
    )


def test_malformed_quantity_is_400(job: KindSchema) -> None:
    body = _job()
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1.5.3"
    err = _error(job, body)
    assert err.code == 400
    assert err.message == f'Job in version "v1" cannot be handled as a Job: {QUANTITY_MSG}'


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"parallelism": 1.5},
            "json: cannot unmarshal number 1.5 into Go struct field JobSpec.spec.parallelism of type int32",
        ),
        (
            {"parallelism": 3000000000},
            "json: cannot unmarshal number 3000000000 into Go struct field JobSpec.spec.parallelism of type int32",
        ),
        ({"suspend": "yes"}, "json: cannot unmarshal string into Go struct field JobSpec.spec.suspend of type bool"),
        (
            {"selector": "x"},
            "json: cannot unmarshal string into Go struct field JobSpec.spec.selector of type v1.LabelSelector",
        ),
        (
            {"template": {"spec": {"containers": "x"}}},
            "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type "
            "[]v1.Container",
        ),
        (
            {"template": {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": "80"}]}]}}},
            "json: cannot unmarshal string into Go struct field ContainerPort.spec.template.spec.containers.ports."
            "containerPort of type int32",
        ),
        (
            {"template": {"spec": {"nodeSelector": {"a": 1}}}},
            "json: cannot unmarshal number into Go struct field PodSpec.spec.template.spec.nodeSelector of type string",
        ),
    ],
)
def test_type_errors(job: KindSchema, spec: dict[str, Any], message: str) -> None:
    err = _error(job, _job(**spec))
    assert err.code == 400
    assert err.message == f'Job in version "v1" cannot be handled as a Job: {message}'


def test_metadata_is_decoded_as_object_meta(job: KindSchema) -> None:
    body = _job()
    body["metadata"]["labels"] = {"a": 5}
    err = _error(job, body)
    assert err.message.endswith(
        "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
    )


def test_first_type_error_wins_but_unmarshaler_error_aborts(job: KindSchema) -> None:
    body = _job(parallelism="two", completions="three")
    assert "JobSpec.spec.parallelism" in _error(job, body).message
    body["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "x"
    # Quantity's UnmarshalJSON error is returned at once and replaces the saved type error, as in Go.
    assert _error(job, body).message.endswith(QUANTITY_MSG)


def test_strict_unknown_fields_all_listed(job: KindSchema) -> None:
    body = _job(bogus=1)
    body["metadata"]["extra"] = True
    body["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    err = _error(job, body, field_validation="Strict")
    assert err.code == 400
    assert err.message == (
        'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field "metadata.extra", '
        'unknown field "spec.template.spec.containers[0].imagee", unknown field "spec.bogus"'
    )


def test_type_error_takes_precedence_over_strict(job: KindSchema) -> None:
    err = _error(job, _job(bogus=1, parallelism="two"), field_validation="Strict")
    assert "cannot unmarshal string" in err.message


def test_warn_drops_and_warns(job: KindSchema) -> None:
    body = _job(bogus=1)
    out, warnings = job.decode_builtin(body, field_validation="Warn")
    assert "bogus" not in out["spec"]
    assert warnings == ['unknown field "spec.bogus"']
    out, warnings = job.decode_builtin(body, field_validation="Ignore")
    assert "bogus" not in out["spec"]
    assert warnings == []
    _out, warnings = job.decode_builtin(body)
    assert warnings == ['unknown field "spec.bogus"']


def test_nulls_are_zero_values(job: KindSchema) -> None:
    body = _job(parallelism=None, completions=2)
    body["metadata"]["labels"] = {"a": None}
    body["metadata"]["creationTimestamp"] = None
    out, _ = job.decode_builtin(body)
    assert "parallelism" not in out["spec"]
    assert out["spec"]["completions"] == 2
    assert out["metadata"]["labels"] == {"a": ""}
    assert "creationTimestamp" not in out["metadata"]


def test_quantities_are_stored_canonical(job: KindSchema) -> None:
    body = _job()
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": 0.5, "memory": "1024Mi", "nvidia.com/gpu": 1},
        "limits": {"cpu": "1500m", "memory": "1.5Gi", "ephemeral-storage": "1000"},
    }
    out, _ = job.decode_builtin(body)
    res = out["spec"]["template"]["spec"]["containers"][0]["resources"]
    assert res == {
        "requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
        "limits": {"cpu": "1500m", "memory": "1536Mi", "ephemeral-storage": "1k"},
    }


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("1", "1"),
        ("0", "0"),
        ("100m", "100m"),
        ("0.1", "100m"),
        ("2000m", "2"),
        ("1.5", "1500m"),
        ("1e3", "1e3"),
        ("1.5e3", "1500"),
        ("1E6", "1e6"),
        ("0.5Ki", "512"),
        ("2048Ki", "2Mi"),
        ("1025Ki", "1025Ki"),
        ("1000Mi", "1000Mi"),
        ("0.0000000001", "1n"),
        ("-1.5", "-1500m"),
        ("10G", "10G"),
        ("12345", "12345"),
        (" 1 ", "1"),
        (2, "2"),
        (0.25, "250m"),
    ],
)
def test_canonical_quantity(given: str | int | float, canonical: str) -> None:
    assert canonical_quantity(given) == canonical


def test_int_or_string(job: KindSchema) -> None:
    deploy = Schemas.load().get("apps", "v1", "Deployment")
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}},
    }
    out, _ = deploy.decode_builtin(body)
    assert out["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": 1}
    body["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = 1.5
    err = _error(deploy, body)
    assert err.message == (
        'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal number 1.5 into Go '
        "value of type int32"
    )
    body["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = True
    assert _error(deploy, body).message.endswith("json: cannot unmarshal bool into Go value of type int32")


def test_times_are_parsed_and_stored_in_utc(job: KindSchema) -> None:
    body = _job()
    body["status"] = {"startTime": "2024-05-01T12:00:00.123+02:00"}
    out, _ = job.decode_builtin(body)
    assert out["status"]["startTime"] == "2024-05-01T10:00:00Z"
    body["status"] = {"startTime": "yesterday"}
    assert _error(job, body).message == (
        'Job in version "v1" cannot be handled as a Job: parsing time "yesterday" as "2006-01-02T15:04:05Z07:00": '
        'cannot parse "yesterday" as "2006"'
    )
    body["status"] = {"startTime": 5}
    assert _error(job, body).message.endswith("json: cannot unmarshal number into Go value of type string")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2024-13-01T00:00:00Z", 'parsing time "2024-13-01T00:00:00Z": month out of range'),
        ("2024-02-30T00:00:00Z", 'parsing time "2024-02-30T00:00:00Z": day out of range'),
        (
            "2024-01-01 00:00:00Z",
            'parsing time "2024-01-01 00:00:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse " 00:00:00Z" as "T"',
        ),
        (
            "2024-01-01T00:00:00",
            'parsing time "2024-01-01T00:00:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"',
        ),
        ("2024-01-01T00:00:00Zjunk", 'parsing time "2024-01-01T00:00:00Zjunk": extra text: "junk"'),
    ],
)
def test_go_time_errors(value: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_go_time(value)
    assert str(info.value) == message


def test_micro_time_for_leases() -> None:
    lease = Schemas.load().get("coordination.k8s.io", "v1", "Lease")
    body = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "l"},
        "spec": {"holderIdentity": "me", "renewTime": "2024-01-01T00:00:00.123456Z", "leaseDurationSeconds": 15},
    }
    out, _ = lease.decode_builtin(body)
    assert out["spec"]["renewTime"] == "2024-01-01T00:00:00.123456Z"
    body["spec"]["renewTime"] = "2024-01-01T00:00:00Z"
    with pytest.raises(ApiError) as info:
        lease.decode_builtin(body)
    assert info.value.message.endswith(
        'parsing time "2024-01-01T00:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as ".000000"'
    )


def test_secret_data_must_be_base64() -> None:
    secret = Schemas.load().get("", "v1", "Secret")
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": "aGVsbG8="}}
    assert secret.decode_builtin(body)[0]["data"] == {"a": "aGVsbG8="}
    body["data"] = {"a": "not base64!"}
    with pytest.raises(ApiError) as info:
        secret.decode_builtin(body)
    assert info.value.message == (
        'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'
    )


def test_managed_fields_are_kept_as_raw_json(job: KindSchema) -> None:
    body = _job()
    body["metadata"]["managedFields"] = [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "batch/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:parallelism": {}}},
        }
    ]
    out, warnings = job.decode_builtin(body)
    assert out["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:parallelism": {}}}
    assert warnings == []


def test_go_float_formatting() -> None:
    assert go_float(0.0) == "0"
    assert go_float(1.0) == "1"
    assert go_float(1.5) == "1.5"
    assert go_float(100000.0) == "100000"
    assert go_float(1e6) == "1e+06"
    assert go_float(2147483647.0) == "2.147483647e+09"
    assert go_float(0.0001) == "0.0001"
    assert go_float(0.00001) == "1e-05"
