"""Watches over HTTP: the chunked stream of events (or Table rows) a watch request gets, with bookmarks, the
request's timeout, a too-old version answered as an ERROR event, and faults holding events back; an encoded
event is shared by every watcher of the same change."""

from __future__ import annotations

import asyncio
import contextlib
import random

from aiohttp import web

from ..api import WatchStream
from ..errors import ApiError
from ..table import to_table
from .common import Obj, ServerBase, _dumps, _flag, _Target

__all__ = ["Watches"]

#: The most events one write of a watch carries.
_BATCH = 64


class Watches(ServerBase):
    """The watch requests of a simulated API server."""

    # -- watch ---------------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, t: _Target, table: bool) -> web.StreamResponse:
        q = request.query
        bookmarks = _flag(q.get("allowWatchBookmarks"))
        timeout = float(q["timeoutSeconds"]) if q.get("timeoutSeconds") else random.uniform(1800, 3600)
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json", "Cache-Control": "no-cache"})
        try:
            stream = self.api.watch(
                t.rt,
                t.version,
                t.namespace,
                resource_version=q.get("resourceVersion"),
                label_selector=q.get("labelSelector"),
                field_selector=q.get("fieldSelector"),
                send_initial_events=_flag(q.get("sendInitialEvents")),
            )
        except ApiError as err:
            if err.code != 410:
                raise
            # A too-old version is answered inside a 200 stream, as an ERROR event carrying the Status.
            await resp.prepare(request)
            await resp.write(_dumps({"type": "ERROR", "object": err.status()}) + b"\n")
            await resp.write_eof()
            return resp
        task = asyncio.current_task()
        assert task is not None
        self._watch_tasks.add(task)
        try:
            await resp.prepare(request)
            await self._pump(resp, stream, t, table, bookmarks, timeout, inside=self._inside(request))
        except ConnectionResetError:
            return resp  # the client went away: the watch simply ends, as on a real server
        except asyncio.CancelledError:
            stream.close()
            raise
        finally:
            stream.close()
            self._watch_tasks.discard(task)
        with contextlib.suppress(ConnectionResetError):
            await resp.write_eof()
        return resp

    async def _pump(
        self,
        resp: web.StreamResponse,
        stream: WatchStream,
        t: _Target,
        table: bool,
        bookmarks: bool,
        seconds: float,
        *,
        inside: bool = False,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        # kube-apiserver's cacher sends a bookmark after about a minute without one and one more 2 s before the
        # watch's deadline (``nextBookmarkTime``), so that the client's next watch starts from there.
        pre_deadline: float | None = deadline - 2.0 if seconds > 2.0 else None
        first = True
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            wait = remaining
            if bookmarks:
                wait = min(wait, self.bookmark_interval)
                if pre_deadline is not None:
                    wait = min(wait, max(0.0, pre_deadline - loop.time()))
            try:
                async with asyncio.timeout(wait):
                    event = await stream.next()
            except TimeoutError:
                if bookmarks and loop.time() < deadline:
                    if pre_deadline is not None and loop.time() >= pre_deadline:
                        pre_deadline = None
                    if not inside:
                        await self.faults.wait_healed()
                    await resp.write(_dumps({"type": "BOOKMARK", "object": self.api.bookmark(t.rt, t.version)}) + b"\n")
                continue
            if event is None:
                break
            if not inside:
                await self.faults.wait_healed()
            kind, obj = event
            if kind == "BOOKMARK" and not bookmarks:
                continue
            if table and kind != "BOOKMARK":
                obj = to_table(
                    t.rt, t.version, [obj], resource_version=obj["metadata"].get("resourceVersion", ""), header=first
                )
                first = False
                await resp.write(_dumps({"type": kind, "object": obj}) + b"\n")
                continue
            # What else is queued already goes out in the same write, as kube-apiserver's watch handler flushes
            # only once its channel is empty: one TLS record and one send per burst, not per event.
            lines = [self._event_line(t, kind, obj)]
            more, ended = stream.ready(_BATCH - 1)
            lines += [self._event_line(t, k, o) for k, o in more if k != "BOOKMARK" or bookmarks]
            await resp.write(b"".join(lines))
            if ended:
                break

    def _event_line(self, t: _Target, kind: str, obj: Obj) -> bytes:
        meta = obj.get("metadata") or {}
        uid, rv = meta.get("uid"), meta.get("resourceVersion")
        if kind == "BOOKMARK" or not uid or not rv:
            return _dumps({"type": kind, "object": obj}) + b"\n"
        key = (t.rt.key, t.version, kind, str(uid), str(rv))
        line = self._event_cache.get(key)
        if line is None:
            if len(self._event_cache) >= 4096:
                self._event_cache.clear()
            line = self._event_cache[key] = _dumps({"type": kind, "object": obj}) + b"\n"
        return line
