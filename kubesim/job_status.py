"""The Job status rules kube-apiserver enforces on every status write (``pkg/apis/batch/validation`` of
Kubernetes v1.36: ``validateJobStatus`` and ``ValidateJobStatusUpdate``, gated as ``pkg/registry/batch/job``'s
``JobStatusValidationOptions`` gates them: a rule applies when the fields it looks at changed in the write).

Found by the real rig: the dispatcher finished a manager Job with a merge patch that left the running copy's
``active`` and ``uncountedTerminatedPods`` in place, which the simulator accepted and a real server refuses.
Index rules (``completedIndexes``/``failedIndexes``) are not modelled.
"""

from __future__ import annotations

from typing import Any

from .errors import Cause, field_invalid

__all__ = ["validate_job_status"]

Obj = dict[str, Any]


def _cond(status: Obj, ctype: str) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def _cond_false(status: Obj, ctype: str) -> bool:
    return any(
        isinstance(c, dict) and c.get("type") == ctype and c.get("status") == "False"
        for c in status.get("conditions") or []
    )


def _omit(field: str, why: str) -> Cause:
    """``field.Invalid(path, field.OmitValueType{}, why)``: the message carries no value."""
    return Cause(field, f"Invalid value: {why}", "FieldValueInvalid")


def _uncounted(status: Obj) -> int:
    u = status.get("uncountedTerminatedPods") or {}
    return len(u.get("succeeded") or []) + len(u.get("failed") or [])


def validate_job_status(new: Obj, old: Obj) -> list[Cause]:
    """The causes a status write of ``new`` over ``old`` is refused with (empty: accepted)."""
    spec = new.get("spec") or {}
    s, o = new.get("status") or {}, old.get("status") or {}
    complete, failed = _cond(s, "Complete"), _cond(s, "Failed")
    finished = complete or failed
    was_finished = _cond(o, "Complete") or _cond(o, "Failed")

    def changed(name: str) -> bool:
        return s.get(name) != o.get(name)

    complete_changed = complete != _cond(o, "Complete")
    failed_changed = failed != _cond(o, "Failed")
    target_changed = _cond(s, "FailureTarget") != _cond(o, "FailureTarget")
    scm_changed = _cond(s, "SuccessCriteriaMet") != _cond(o, "SuccessCriteriaMet")
    finished_changed = finished != was_finished
    suspended_zero = spec.get("suspend") is True and spec.get("completions") == 0
    resuming = _cond(o, "Suspended") and _cond_false(s, "Suspended")

    causes: list[Cause] = []
    if (complete_changed or failed_changed) and complete and failed:
        causes.append(_omit("status.conditions", "cannot set Complete=True and Failed=true conditions"))
    if (complete_changed or target_changed) and complete and _cond(s, "FailureTarget"):
        causes.append(_omit("status.conditions", "cannot set Complete=True and FailureTarget=true conditions"))
    if (complete_changed or changed("completionTime")) and s.get("completionTime") and not complete:
        causes.append(
            field_invalid(
                "status.completionTime",
                s["completionTime"],
                "cannot set completionTime when there is no Complete=True condition",
            )
        )
    if (complete_changed or changed("completionTime")) and complete and not s.get("completionTime"):
        causes.append(
            Cause(
                "status.completionTime",
                "Required value: completionTime is required for Complete jobs",
                "FieldValueRequired",
            )
        )
    if (
        (changed("startTime") or changed("completionTime"))
        and s.get("startTime")
        and s.get("completionTime")
        and str(s["completionTime"]) < str(s["startTime"])
    ):
        causes.append(
            field_invalid("status.completionTime", s["completionTime"], "must be equal to or after `startTime`")
        )
    if failed_changed and failed and not _cond(s, "FailureTarget"):
        causes.append(
            _omit("status.conditions", "cannot set Failed=True condition without the FailureTarget=true condition")
        )
    if (complete_changed or scm_changed) and complete and not _cond(s, "SuccessCriteriaMet"):
        causes.append(
            _omit(
                "status.conditions", "cannot set Complete=True condition without the SuccessCriteriaMet=true condition"
            )
        )
    if (finished_changed or changed("active")) and finished and int(s.get("active") or 0) > 0:
        causes.append(field_invalid("status.active", int(s["active"]), "active>0 is invalid for finished job"))
    if (finished_changed or changed("startTime")) and not suspended_zero and finished and not s.get("startTime"):
        causes.append(
            Cause("status.startTime", "Required value: startTime is required for finished job", "FieldValueRequired")
        )
    if (finished_changed or changed("uncountedTerminatedPods")) and finished and _uncounted(s) > 0:
        causes.append(
            Cause(
                "status.uncountedTerminatedPods", "Invalid value: must be empty for finished job", "FieldValueInvalid"
            )
        )
    if (finished_changed or changed("terminating")) and finished and int(s.get("terminating") or 0) > 0:
        causes.append(
            field_invalid("status.terminating", int(s["terminating"]), "terminating>0 is invalid for finished job")
        )
    if (
        (changed("ready") or changed("active"))
        and s.get("ready") is not None
        and int(s["ready"]) > int(s.get("active") or 0)
    ):
        causes.append(field_invalid("status.ready", int(s["ready"]), "cannot set more ready pods than active"))
    if _cond(s, "SuccessCriteriaMet") and failed:
        causes.append(_omit("status.conditions", "cannot set SuccessCriteriaMet=True and Failed=true conditions"))
    if _cond(s, "SuccessCriteriaMet") and _cond(s, "FailureTarget"):
        causes.append(
            _omit("status.conditions", "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions")
        )
    for name in ("active", "ready", "succeeded", "failed", "terminating"):
        value = s.get(name)
        if isinstance(value, int) and value < 0:
            causes.append(field_invalid(f"status.{name}", value, "must be greater than or equal to 0"))

    # ValidateJobStatusUpdate
    for ctype in ("Failed", "Complete", "FailureTarget"):
        if _cond(o, ctype) and not _cond(s, ctype):
            causes.append(_omit("status.conditions", f"cannot disable the terminal {ctype}=True condition"))
    if int(s.get("failed") or 0) < int(o.get("failed") or 0):
        causes.append(field_invalid("status.failed", int(s.get("failed") or 0), "cannot decrease the failed counter"))
    elastic = spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism")
    if not elastic and int(s.get("succeeded") or 0) < int(o.get("succeeded") or 0):
        causes.append(
            field_invalid("status.succeeded", int(s.get("succeeded") or 0), "cannot decrease the succeeded counter")
        )
    if s.get("completionTime") and o.get("completionTime") and s["completionTime"] != o["completionTime"]:
        causes.append(field_invalid("status.completionTime", s["completionTime"], "field is immutable"))
    if changed("startTime") and not resuming and o.get("startTime") and not spec.get("suspend"):
        causes.append(
            field_invalid("status.startTime", s.get("startTime"), "field is immutable for unsuspended job once set")
        )
    if _cond(o, "SuccessCriteriaMet") and not _cond(s, "SuccessCriteriaMet"):
        causes.append(_omit("status.conditions", "cannot disable the SuccessCriteriaMet=True condition"))
    if _cond(o, "Complete") and not _cond(o, "SuccessCriteriaMet") and _cond(s, "SuccessCriteriaMet"):
        causes.append(
            _omit(
                "status.conditions", "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
            )
        )
    return causes
