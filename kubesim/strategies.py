"""Per-kind behaviour of built-in resources: defaults, validation, and what a status write may change.

The rules and messages follow ``../shared/real-apiserver-answers.md`` (Job defaults, Job status rules,
immutability) and the Kubernetes validation code they come from.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from .errors import ApiError, Cause, field_invalid
from .job_status import validate_job_status
from .patch import clone

__all__ = ["STRATEGIES", "Strategy", "strategy_for"]

Obj = dict[str, Any]

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DOMAIN_PREFIXED_PATH = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/\S+$")

DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def validate_name(name: str, *, label: bool) -> str | None:
    """The error text for an invalid object name, or None."""
    if label:
        if len(name) > 63:
            return "must be no more than 63 characters"
        return None if _DNS_LABEL.match(name) else DNS1123_LABEL_MSG
    if len(name) > 253:
        return "must be no more than 253 characters"
    return None if _DNS_SUBDOMAIN.match(name) else DNS1123_SUBDOMAIN_MSG


def validate_labels(labels: Any, path: str) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(labels, dict):
        return causes
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (
            (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))
            or not name
            or len(name) > 63
            or not (_QUALIFIED_NAME.match(name))
        ):
            causes.append(
                field_invalid(
                    path,
                    key,
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                )
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                field_invalid(
                    path,
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "
                    "'.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  "
                    "or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                )
            )
    return causes


def _cond(status: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True"
        for c in (status.get("conditions") or [])
        if isinstance(c, dict)
    )


class Strategy:
    """Generic behaviour; subclasses override for their kind."""

    #: Whether ``metadata.generation`` is kept (bumped on spec changes).
    generation = True
    #: DNS-1123 label (namespaces) rather than subdomain names.
    label_names = False
    #: Whether a PUT without ``metadata.resourceVersion`` is allowed (built-ins: yes; custom resources: no).
    unconditional_update = True

    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        if status_split:
            obj["status"] = {}

    def validate(self, obj: Obj, old: Obj | None) -> list[Cause]:
        return []

    def prepare_status(self, new: Obj, old: Obj) -> None:
        pass

    def validate_status(self, new: Obj, old: Obj) -> list[Cause]:
        return []


class CustomResourceStrategy(Strategy):
    unconditional_update = False

    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        if status_split:
            obj.pop("status", None)


class NamespaceStrategy(Strategy):
    generation = False
    label_names = True

    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        obj["status"] = {"phase": "Active"}
        obj.setdefault("spec", {})["finalizers"] = ["kubernetes"]
        obj.setdefault("metadata", {}).setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]


class NoGeneration(Strategy):
    generation = False


class SecretStrategy(Strategy):
    generation = False

    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        obj.setdefault("type", "Opaque")
        self._fold_string_data(obj)

    @staticmethod
    def _fold_string_data(obj: Obj) -> None:
        string_data = obj.pop("stringData", None)
        if string_data:
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
        for key, value in (obj.get("data") or {}).items():
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ApiError(
                    400,
                    "BadRequest",
                    'Secret in version "v1" cannot be handled as a Secret: '
                    f"illegal base64 data at input byte 0 (data[{key}])",
                ) from None

    def validate(self, obj: Obj, old: Obj | None) -> list[Cause]:
        self._fold_string_data(obj)
        if old is not None and old.get("type") != obj.get("type"):
            return [field_invalid("type", obj.get("type"), "field is immutable")]
        return []


_POD_SPEC_DEFAULTS = {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "securityContext": {},
}


def default_pod_spec(spec: Obj, *, restart_default: bool, requests_from_limits: bool = False) -> None:
    """Pod-spec defaults as the real server fills them (``SetDefaults_PodSpec`` and container defaults)."""
    for key, value in _POD_SPEC_DEFAULTS.items():
        if key == "restartPolicy" and not restart_default:
            continue
        spec.setdefault(key, clone(value))
    if requests_from_limits:
        # SetDefaults_Pod, not SetDefaults_PodSpec: a Pod gets it, a pod template (Job, JobSet…) does not.
        spec.setdefault("enableServiceLinks", True)
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            if not isinstance(c, dict):
                continue
            image = str(c.get("image", ""))
            tail = image.rsplit("/", 1)[-1]
            tagged = ":" in tail and not tail.endswith(":latest")
            c.setdefault("imagePullPolicy", "IfNotPresent" if (tagged or "@" in image) else "Always")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            c.setdefault("resources", {})
            res = c["resources"]
            # Limits stand in for missing requests on Pods (SetDefaults_Pod), not on pod templates.
            if requests_from_limits and isinstance(res, dict) and isinstance(res.get("limits"), dict):
                requests = res.setdefault("requests", {})
                for name, q in res["limits"].items():
                    requests.setdefault(name, q)


def _validate_pod_spec(spec: Any, path: str, *, job: bool) -> list[Cause]:
    causes: list[Cause] = []
    if not isinstance(spec, dict):
        return [Cause(path, "Required value", "FieldValueRequired")]
    containers = spec.get("containers")
    if not containers:
        causes.append(Cause(f"{path}.containers", "Required value", "FieldValueRequired"))
    names: set[str] = set()
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or []):
            cpath = f"{path}.{group}[{i}]"
            name = c.get("name") if isinstance(c, dict) else None
            if not name:
                causes.append(Cause(f"{cpath}.name", "Required value", "FieldValueRequired"))
            elif name in names:
                causes.append(Cause(f"{cpath}.name", f'Duplicate value: "{name}"', "FieldValueDuplicate"))
            else:
                names.add(name)
                if not _DNS_LABEL.match(name):
                    causes.append(field_invalid(f"{cpath}.name", name, DNS1123_LABEL_MSG))
            if isinstance(c, dict) and not c.get("image"):
                causes.append(Cause(f"{cpath}.image", "Required value", "FieldValueRequired"))
            res = c.get("resources") if isinstance(c, dict) else None
            if isinstance(res, dict):
                for kind in ("requests", "limits"):
                    for rname, q in (res.get(kind) or {}).items():
                        if str(q).startswith("-"):
                            causes.append(
                                field_invalid(
                                    f"{cpath}.resources.{kind}[{rname}]", q, "must be greater than or equal to 0"
                                )
                            )
                from kubecommon.quantity import parse_quantity

                req, lim = res.get("requests") or {}, res.get("limits") or {}
                for rname, q in req.items():
                    if rname in lim and parse_quantity(q) > parse_quantity(lim[rname]):
                        causes.append(
                            field_invalid(
                                f"{cpath}.resources.requests",
                                q,
                                f"must be less than or equal to {rname} limit of {lim[rname]}",
                            )
                        )
    restart = spec.get("restartPolicy")
    if job and restart not in ("OnFailure", "Never"):
        if restart is None:
            causes.append(
                Cause(
                    f"{path}.restartPolicy", 'Required value: valid values: "OnFailure", "Never"', "FieldValueRequired"
                )
            )
        else:
            causes.append(
                Cause(
                    f"{path}.restartPolicy",
                    f'Unsupported value: "{restart}": supported values: "OnFailure", "Never"',
                    "FieldValueNotSupported",
                )
            )
    return causes


class PodStrategy(Strategy):
    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        spec = obj.setdefault("spec", {})
        default_pod_spec(spec, restart_default=True, requests_from_limits=True)
        status = {"phase": "Pending"}
        qos = _qos_class(spec)
        if qos:
            status["qosClass"] = qos
        obj["status"] = status

    def validate(self, obj: Obj, old: Obj | None) -> list[Cause]:
        causes = _validate_pod_spec(obj.get("spec"), "spec", job=False)
        if old is not None:
            new_spec, old_spec = clone(obj.get("spec") or {}), clone(old.get("spec") or {})
            # Mutable: container images, activeDeadlineSeconds, tolerations (additions), schedulingGates (removal);
            # while the pod is gated, node selector additions (KEP-3838, mutable pod scheduling directives: how
            # Kueue's TAS ungater gives a pod its topology domain).
            if old_spec.get("schedulingGates"):
                old_selector = old_spec.get("nodeSelector") or {}
                new_selector = new_spec.get("nodeSelector") or {}
                if all(new_selector.get(k) == v for k, v in old_selector.items()):
                    old_spec.pop("nodeSelector", None)
                    new_spec.pop("nodeSelector", None)
            for s in (new_spec, old_spec):
                for group in ("containers", "initContainers"):
                    for c in s.get(group) or []:
                        c.pop("image", None)
                s.pop("activeDeadlineSeconds", None)
                s.pop("tolerations", None)
                s.pop("schedulingGates", None)
            if new_spec != old_spec:
                causes.append(
                    Cause(
                        "spec",
                        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
                        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                        "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
                        "set to 1 if it was previously negative)",
                        "FieldValueForbidden",
                    )
                )
        return causes


def _qos_class(spec: Obj) -> str:
    requests_any = False
    guaranteed = True
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if req or lim:
            requests_any = True
        for name in ("cpu", "memory"):
            if name not in lim or (name in req and req[name] != lim[name]):
                guaranteed = False
    if not requests_any:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")
_MUTABLE_SCHEDULING = ("nodeSelector", "tolerations", "affinity", "schedulingGates")


class JobStrategy(Strategy):
    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        meta = obj["metadata"]
        spec = obj.setdefault("spec", {})
        if "parallelism" not in spec and "completions" not in spec:
            spec["parallelism"] = 1
            spec["completions"] = 1
        elif "parallelism" not in spec:
            spec["parallelism"] = 1
        spec.setdefault("backoffLimit", 2147483647 if "backoffLimitPerIndex" in spec else 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("manualSelector", False)
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
        template = spec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        if not spec.get("manualSelector"):
            uid, name = meta["uid"], meta["name"]
            labels = tmeta.setdefault("labels", {})
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "controller-uid": uid,
                    "job-name": name,
                }
            )
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        if not meta.get("labels"):
            meta["labels"] = dict(tmeta.get("labels") or {})
        if isinstance(template.get("spec"), dict):
            default_pod_spec(template["spec"], restart_default=False)
        obj["status"] = {}

    def validate(self, obj: Obj, old: Obj | None) -> list[Cause]:
        spec = obj.get("spec") or {}
        causes: list[Cause] = []
        for name in ("parallelism", "completions", "backoffLimit"):
            value = spec.get(name)
            if isinstance(value, int) and value < 0:
                causes.append(field_invalid(f"spec.{name}", value, "must be greater than or equal to 0"))
        ads = spec.get("activeDeadlineSeconds")
        if isinstance(ads, int) and ads <= 0:
            causes.append(field_invalid("spec.activeDeadlineSeconds", ads, "must be greater than 0"))
        mode = spec.get("completionMode")
        if mode not in (None, "NonIndexed", "Indexed"):
            causes.append(
                Cause(
                    "spec.completionMode",
                    f'Unsupported value: "{mode}": supported values: "NonIndexed", "Indexed"',
                    "FieldValueNotSupported",
                )
            )
        if mode == "Indexed" and spec.get("completions") is None:
            causes.append(
                Cause("spec.completions", "Required value: when completion mode is Indexed", "FieldValueRequired")
            )
        managed_by = spec.get("managedBy")
        if managed_by is not None:
            if len(managed_by) > 63:
                causes.append(Cause("spec.managedBy", "Too long: may not be more than 63 bytes", "FieldValueTooLong"))
            elif not _DOMAIN_PREFIXED_PATH.match(managed_by):
                causes.append(
                    field_invalid(
                        "spec.managedBy", managed_by, 'must be a domain-prefixed path (such as "acme.io/foo")'
                    )
                )
        template = spec.get("template") or {}
        causes += _validate_pod_spec(template.get("spec"), "spec.template.spec", job=True)
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        tlabels = (template.get("metadata") or {}).get("labels") or {}
        if selector and any(tlabels.get(k) != v for k, v in selector.items()):
            causes.append(
                field_invalid("spec.template.metadata.labels", tlabels, "`selector` does not match template `labels`")
            )
        if old is not None:
            causes += self._validate_update(obj, old)
        return causes

    def _validate_update(self, obj: Obj, old: Obj) -> list[Cause]:
        causes: list[Cause] = []
        spec, ospec = obj.get("spec") or {}, old.get("spec") or {}
        for name in ("selector", "completionMode", "managedBy", "podFailurePolicy", "backoffLimitPerIndex"):
            if spec.get(name) != ospec.get(name):
                causes.append(field_invalid(f"spec.{name}", spec.get(name), "field is immutable"))
        if spec.get("completions") != ospec.get("completions"):
            elastic = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
            if not elastic:
                causes.append(field_invalid("spec.completions", spec.get("completions"), "field is immutable"))
        template, otemplate = spec.get("template") or {}, ospec.get("template") or {}
        if template != otemplate:
            mutable = bool(ospec.get("suspend")) and not (old.get("status") or {}).get("startTime")
            a, b = clone(template), clone(otemplate)
            if mutable:
                for t in (a, b):
                    t.setdefault("metadata", {}).pop("labels", None)
                    t["metadata"].pop("annotations", None)
                    for k in _MUTABLE_SCHEDULING:
                        (t.get("spec") or {}).pop(k, None)
            if a != b:
                causes.append(
                    Cause(
                        "spec.template",
                        f"Invalid value: {_go_struct_summary()}: field is immutable",
                        "FieldValueInvalid",
                    )
                )
        return causes

    def prepare_status(self, new: Obj, old: Obj) -> None:
        # JobStatus.active/succeeded/failed are int32 with omitempty: a zero is not stored (ready and terminating
        # are pointers and keep their zero). Found by the API differential test against kube-apiserver.
        status = new.get("status")
        if isinstance(status, dict):
            for name in ("active", "succeeded", "failed"):
                if status.get(name) == 0:
                    del status[name]

    def validate_status(self, new: Obj, old: Obj) -> list[Cause]:
        return validate_job_status(new, old)


def _go_struct_summary() -> str:
    return "core.PodTemplateSpec{...}"


class DeploymentStrategy(Strategy):
    def prepare_create(self, obj: Obj, *, status_split: bool) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("replicas", 1)
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault(
            "strategy", {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}
        )
        template = spec.setdefault("template", {})
        if isinstance(template.get("spec"), dict):
            default_pod_spec(template["spec"], restart_default=True)
        obj["status"] = {}


_BUILTIN: dict[str, Strategy] = {
    "namespaces": NamespaceStrategy(),
    "nodes": NoGeneration(),
    "pods": PodStrategy(),
    "secrets": SecretStrategy(),
    "configmaps": NoGeneration(),
    "serviceaccounts": NoGeneration(),
    "events": NoGeneration(),
    "jobs.batch": JobStrategy(),
    "leases.coordination.k8s.io": NoGeneration(),
    "deployments.apps": DeploymentStrategy(),
}
STRATEGIES = _BUILTIN
_CUSTOM = CustomResourceStrategy()


def strategy_for(resource_key: str, builtin: bool) -> Strategy:
    if not builtin:
        return _CUSTOM
    return _BUILTIN.get(resource_key, NoGeneration())
