"""API errors as a real kube-apiserver returns them: ``Status`` objects with the real reasons and codes.

See ``../shared/real-apiserver-answers.md`` for the observed answers these reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ApiError",
    "Cause",
    "already_exists",
    "bad_request",
    "conflict",
    "expired",
    "field_invalid",
    "forbidden",
    "invalid",
    "method_not_supported",
    "not_found",
    "unauthorized",
    "unsupported_media_type",
]


@dataclass(frozen=True, slots=True)
class Cause:
    """One field error, as ``field.Error`` renders into ``details.causes``.

    ``reason`` is the cause type (``FieldValueInvalid``, ``FieldValueRequired``, ``FieldValueNotSupported``,
    ``FieldValueTypeInvalid``, ``FieldValueForbidden``, ``FieldValueTooLong``, ``FieldValueDuplicate`` …);
    ``message`` is the text after ``field:``, e.g. ``Invalid value: -1: must be greater than or equal to 0``.
    """

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def render(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message, "field": self.field}


class ApiError(Exception):
    """An error answer. ``status()`` is the JSON body, ``code`` the HTTP status."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}
        #: Warning headers sent with the error (e.g. the pruned unknown fields of a refused custom resource).
        self.warnings: list[str] = []

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if not self.reason:
            del body["reason"]  # StatusReasonUnknown is "" and omitted
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str | None, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name is not None:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details.update(extra)
    return details


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(resource, group)} "{name}" not found',
        _details(name, group, resource),
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(resource, group)} "{name}" already exists',
        _details(name, group, resource),
    )


def conflict(resource: str, group: str, name: str, why: str, causes: list[Cause] | None = None) -> ApiError:
    extra: dict[str, Any] = {}
    if causes:
        extra["causes"] = [{"reason": c.reason, "message": c.message, "field": c.field} for c in causes]
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource, **extra),
    )


def invalid(kind: str, group: str, name: str, causes: list[Cause]) -> ApiError:
    """422 Invalid: ``Kind.group "x" is invalid: …`` (``Pod "x"`` in the core group), as apimachinery's
    ``NewInvalid`` writes it. (kubectl reprints it as ``The Job "x" is invalid``; the server never says that.)"""
    rendered = [c.render() for c in causes]
    text = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    subject = f'{kind}.{group} "{name}"' if group else f'{kind} "{name}"'
    return ApiError(
        422,
        "Invalid",
        f"{subject} is invalid: {text}",
        _details(name, group, kind, causes=[c.to_dict() for c in causes]),
    )


def field_invalid(field: str, value: Any, why: str) -> Cause:
    """``field: Invalid value: <value>: <why>``, with the value printed as Go's ``%#v`` would print it."""
    return Cause(field, f"Invalid value: {go_repr(value)}: {why}", "FieldValueInvalid")


def go_repr(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    return str(value)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_supported(resource: str, group: str, verb: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        _details(None, group, resource, verb=verb),
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    """415, as a server answers a patch type it does not take (strategic merge on a custom resource)."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
    )


def expired(message: str) -> ApiError:
    """410 Gone with reason ``Expired``: a watch or continue token older than the server's window."""
    return ApiError(410, "Expired", message)
