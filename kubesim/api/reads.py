"""The API server's reads: get, list (selectors, paging with continue tokens) and watch (replay from the event
log or from a list, bookmarks), and the stream a watch reads its events from."""

from __future__ import annotations

import base64
import bisect
import itertools
import json
from collections.abc import Iterable

from .. import errors
from ..registry import ResourceType
from ..selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from ..store import StoreEvent, Subscription
from .base import ApiBase
from .types import ListResult, Obj

__all__ = ["ApiReads", "WatchStream"]


class WatchStream:
    """Events for one watch, filtered and converted to the requested version.

    ``initial`` holds the events to send first (synthetic ADDED for a watch without a version, or the
    replay from the log); then events come from the subscription.
    """

    def __init__(
        self,
        api: ApiBase,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        initial: list[tuple[str, Obj]],
        subscription: Subscription,
    ) -> None:
        self.api = api
        self.rt = rt
        self.version = version
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.initial = initial
        self.subscription = subscription

    def _matches(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if self.namespace is not None and meta.get("namespace", "") != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.get("labels")):
            return False
        return not self.fields.terms or self.fields.matches(obj, self.rt.field_getters)

    def translate(self, event: StoreEvent) -> tuple[str, Obj] | None:
        """The event as this watcher sees it (ADDED/MODIFIED/DELETED after selector filtering), or None."""
        now = self._matches(event.obj) if event.type != "DELETED" else False
        before = self._matches(event.prev)
        if event.type == "ADDED":
            kind = "ADDED" if now else None
        elif event.type == "MODIFIED":
            kind = "MODIFIED" if now and before else "ADDED" if now else "DELETED" if before else None
        else:
            kind = "DELETED" if before else None
        if kind is None:
            return None
        return kind, self.api.to_version(self.rt, event.obj, self.version)

    async def next(self) -> tuple[str, Obj] | None:
        """The next event, or None when the subscription ended (overflow or server shutdown)."""
        while self.initial:
            return self.initial.pop(0)
        while True:
            event = await self.subscription.get()
            if event is None:
                return None
            out = self.translate(event)
            if out is not None:
                return out

    def ready(self, limit: int) -> tuple[list[tuple[str, Obj]], bool]:
        """Up to ``limit`` events that are here already (no waiting), and whether the subscription ended."""
        out: list[tuple[str, Obj]] = []
        while self.initial and len(out) < limit:
            out.append(self.initial.pop(0))
        queue = self.subscription.queue
        while len(out) < limit and not queue.empty():
            event = queue.get_nowait()
            if event is None:
                return out, True
            translated = self.translate(event)
            if translated is not None:
                out.append(translated)
        return out, False

    def close(self) -> None:
        self.subscription.close()


class ApiReads(ApiBase):
    """The verbs that read: get, list, watch."""

    # -- reads ---------------------------------------------------------------------------------------

    def get(self, rt: ResourceType, version: str, namespace: str | None, name: str) -> Obj:
        obj = self.store.get(rt.key, self._ns(rt, namespace), name)
        if obj is None:
            raise self._not_found(rt, name)
        return self.to_version(rt, obj, version)

    def list(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> ListResult:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_getters, rt.kind)
        ns = self._ns(rt, namespace) if namespace else None
        start_after: tuple[str, str] | None = None
        list_rv = self.store.rv
        if continue_token:
            try:
                token = json.loads(base64.b64decode(continue_token))
                list_rv, start_after = int(token["rv"]), (token["start"][0], token["start"][1])
            except (ValueError, KeyError, TypeError, IndexError):
                raise errors.bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None
            if self.store.too_old(list_rv):
                raise errors.expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start "
                    "a new list without the continue parameter, or use the continue token in this response to "
                    "retrieve the remainder of the results. Continuing with the provided token results in an "
                    "inconsistent list - objects that were created, modified, or deleted between the time the first "
                    "chunk was returned and now may show up in the list."
                )
        pinned = fields.value_of("metadata.name")
        candidates: Iterable[Obj]
        total = 0
        if pinned is not None and ns is not None:
            one = self.store.get(rt.key, ns, pinned)
            candidates = [one] if one is not None else []
        else:
            # A continued page starts after the last key it was given (bisected, not scanned from the start).
            keys = self.store.sorted_keys(rt.key, ns)
            first = bisect.bisect_right(keys, start_after) if start_after is not None else 0
            total = len(keys) - first
            objects = self.store.objects_of(rt.key)
            candidates = (objects[k] for k in itertools.islice(keys, first, None))
        unfiltered = labels.empty and not fields.terms and pinned is None
        items: list[Obj] = []
        remaining = 0
        last_key: tuple[str, str] | None = None
        for seen, obj in enumerate(candidates):
            meta = obj["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if start_after is not None and key <= start_after:
                continue
            if not labels.empty and not labels.matches(meta.get("labels")):
                continue
            if fields.terms and not fields.matches(obj, rt.field_getters):
                continue
            if limit and len(items) >= limit:
                if unfiltered:  # every key left is an item left: no need to walk them
                    remaining = total - seen
                    break
                remaining += 1
                continue
            items.append(self.to_version(rt, obj, version))
            last_key = key
        token_out = None
        if remaining and last_key is not None:
            token_out = base64.b64encode(json.dumps({"rv": list_rv, "start": list(last_key)}).encode()).decode()
        # A continued list answers with the version of its first page, as a paginated etcd read does: a
        # watch started from it replays whatever changed while the pages were read.
        # The server counts what is left only for an unfiltered list (etcd3's GetList: pred.Empty()).
        counted = labels.empty and not fields.terms
        return ListResult(items, str(list_rv), token_out, remaining if token_out and counted else None)

    def watch(
        self,
        rt: ResourceType,
        version: str,
        namespace: str | None,
        *,
        resource_version: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        send_initial_events: bool = False,
    ) -> WatchStream:
        """Start a watch. Raises 410 Expired when ``resource_version`` is older than the log's horizon."""
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector, rt.field_getters, rt.kind)
        ns = self._ns(rt, namespace) if namespace else None
        resources = frozenset({rt.key})
        initial: list[tuple[str, Obj]] = []
        # Replay and subscription happen in one synchronous step: no event can fall between them.
        if not resource_version or resource_version == "0" or send_initial_events:
            stream = WatchStream(self, rt, version, ns, labels, fields, initial, self.store.subscribe(resources))
            for obj in self.store.list(rt.key, ns):
                if stream._matches(obj):
                    initial.append(("ADDED", self.to_version(rt, obj, version)))
            if send_initial_events:
                initial.append(("BOOKMARK", self._bookmark(rt, version, initial_end=True)))
            return stream
        try:
            rv = int(resource_version)
        except ValueError:
            raise errors.bad_request(f'invalid resource version "{resource_version}"') from None
        if self.store.too_old(rv):
            raise errors.expired(f"too old resource version: {rv} ({self.store.compacted_rv + 1})")
        stream = WatchStream(self, rt, version, ns, labels, fields, initial, self.store.subscribe(resources))
        for event in self.store.events_since(rv, resources):
            out = stream.translate(event)
            if out is not None:
                initial.append(out)
        return stream

    def _bookmark(self, rt: ResourceType, version: str, *, initial_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(self.store.rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version(version), "metadata": meta}

    def bookmark(self, rt: ResourceType, version: str) -> Obj:
        return self._bookmark(rt, version)
