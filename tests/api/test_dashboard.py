"""The dashboard at ``/``: its files are open, its data calls need a token, and it renders in a real browser.

The browser test drives Debian's headless Chromium over the Chrome DevTools Protocol (aiohttp websockets, no
extra dependency): it loads the page from a served API (the world of ``test_api``: three workers, a SQLite Repo
with workloads placed on them, plus a failover event), waits until the page has refreshed twice on its own,
then checks the rendered DOM, that nothing was logged as an error (exceptions, console.error, CSP violations,
failed requests), and saves a screenshot.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from dispatcher.api import TokenStore, bound_address, make_app, serve
from dispatcher.store.models import AuditEvent, utcnow
from tests.api.test_api import ADMIN_TOKEN, READ, READ_TOKEN, World, assert_error, assert_schema, build_world

STATIC = Path(__file__).resolve().parents[2] / "dispatcher" / "api" / "static"


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    w = await build_world(tmp_path)
    wid = w.ids["team-a/train-1"]
    await w.dispatcher.repo.record(
        [
            AuditEvent(
                at=utcnow(),
                workload_id=wid,
                cluster="worker-2",
                type="FailedOver",
                message="worker worker-2 was lost; placing it again (generation 2) <b>not bold</b>",
                data={"from": "worker-2"},
            ),
            AuditEvent(at=utcnow(), workload_id=None, cluster="worker-2", type="Fenced", message="deleted stale copy"),
            AuditEvent(at=utcnow(), workload_id=wid, cluster="worker-1", type="Placed", message="placed on worker-1"),
        ]
    )
    yield w
    for e in w.engines:
        await e.dispose()


# -- the files and the events endpoint ------------------------------------------------------------------------


async def test_the_dashboard_files_are_served_without_a_token(world: World) -> None:
    app = make_app(world.dispatcher, world.tokens)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as client:
        for path, kind, name in (
            ("/", "text/html", "index.html"),
            ("/dashboard.js", "text/javascript", "dashboard.js"),
            ("/dashboard.css", "text/css", "dashboard.css"),
        ):
            resp = await client.get(path)
            assert resp.status == 200, path
            assert resp.headers["Content-Type"] == f"{kind}; charset=utf-8"
            assert resp.headers["X-Content-Type-Options"] == "nosniff"
            assert await resp.read() == (STATIC / name).read_bytes()
        page = await client.get("/")
        assert "script-src 'self'" in page.headers["Content-Security-Policy"]
        # The page holds no data: without a token the data calls are refused.
        resp = await client.get("/api/v1/events")
        assert resp.status == 401
        assert_error(await resp.json(), 401, "token")
        resp = await client.get("/?x=1")
        assert resp.status == 400


def test_the_script_never_inserts_markup() -> None:
    script = (STATIC / "dashboard.js").read_text()
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", script)
    html = (STATIC / "index.html").read_text()
    assert "http://" not in html and "https://" not in html  # no CDN: everything is served by the API


async def test_events_lists_recent_failovers_newest_first(world: World) -> None:
    app = make_app(world.dispatcher, world.tokens)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/api/v1/events", headers=READ)
        assert resp.status == 200
        body = await resp.json()
        assert_schema(body, "EventList")
        assert [e["type"] for e in body["items"]] == ["Fenced", "FailedOver"]
        assert body["items"][1]["workload"] == "team-a/train-1" and body["items"][1]["cluster"] == "worker-2"
        assert body["items"][0]["workload"] is None and body["items"][0]["workloadId"] is None
        resp = await client.get("/api/v1/events?type=Placed,FailedOver&limit=1", headers=READ)
        body = await resp.json()
        assert_schema(body, "EventList")
        assert [e["type"] for e in body["items"]] == ["Placed"]
        for query, words in (
            ("type=Failed%20Over", ("type:", "comma-separated")),
            ("type=", ("type:",)),
            ("limit=0", ("limit:", "1 to 200")),
            ("limit=201", ("limit:",)),
            ("since=1", ("unknown query parameter 'since'",)),
        ):
            resp = await client.get(f"/api/v1/events?{query}", headers=READ)
            assert resp.status == 400, query
            assert_error(await resp.json(), 400, *words)


# -- in a browser ---------------------------------------------------------------------------------------------------


class DevTools:
    """A minimal Chrome DevTools Protocol client: commands by id, events collected in order."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> Any:
        msg_id = next(self.ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[msg_id] = future
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self.ws.send_str(json.dumps(msg))
        reply = await asyncio.wait_for(future, 30)
        assert "error" not in reply, (method, reply["error"])
        return reply["result"]

    async def evaluate(self, session: str, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def problems(self) -> list[str]:
        """Exceptions, console errors and warnings, and browser log errors (CSP, failed requests)."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append(f"exception: {p['exceptionDetails']}")
            elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: {[a.get('value', a.get('description')) for a in p['args']]}")
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning"):
                out.append(f"log {p['entry']['level']}: {p['entry']['text']} {p['entry'].get('url', '')}")
        return out


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("no chromium on PATH: install Debian's chromium package (apt-get install -y chromium)")
    return path


@contextlib.asynccontextmanager
async def browser(profile: Path) -> AsyncIterator[tuple[DevTools, str]]:
    """Headless Chromium with a blank page attached: (the DevTools client, the page's session id)."""
    proc = await asyncio.create_subprocess_exec(
        _chromium(),
        "--headless=new",
        "--no-sandbox",  # the tests run as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--remote-debugging-port=0",
        f"--user-data-dir={profile}",
        "--window-size=1280,900",
        "about:blank",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        endpoint = None
        seen: list[str] = []
        async with asyncio.timeout(30):
            while endpoint is None:
                line = (await proc.stderr.readline()).decode(errors="replace")
                if not line:
                    pytest.fail(f"chromium exited before DevTools listened:\n{''.join(seen)[-3000:]}")
                seen.append(line)
                m = re.search(r"DevTools listening on (ws://\S+)", line)
                endpoint = m.group(1) if m else None
        drain = asyncio.ensure_future(proc.stderr.read())  # keep the pipe from filling up
        async with aiohttp.ClientSession() as http, http.ws_connect(endpoint, max_msg_size=64 * 2**20) as ws:
            cdp = DevTools(ws)
            target = await cdp.send("Target.createTarget", {"url": "about:blank"})
            attached = await cdp.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
            session = attached["sessionId"]
            for domain in ("Runtime", "Log", "Page"):
                await cdp.send(f"{domain}.enable", session=session)
            await cdp.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session,
            )
            try:
                yield cdp, session
            finally:
                cdp.reader.cancel()
        drain.cancel()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def wait_for(cdp: DevTools, session: str, expression: str, timeout: float = 20.0) -> None:
    async with asyncio.timeout(timeout):
        # false until it holds (also while the page is still loading and has no body yet)
        check = f"(() => {{ try {{ return !!({expression}); }} catch (e) {{ return false; }} }})()"
        while not await cdp.evaluate(session, check):  # noqa: ASYNC110 - polling the page in the browser
            await asyncio.sleep(0.1)


PAGE_TEXT = "document.body.innerText"
ROW = "(n => [...document.querySelectorAll(`tr[data-workload='${n}'] td`)].map(td => td.textContent))"


@pytest.mark.parametrize("tokens", ["token in the address", "no tokens on loopback"])
async def test_the_dashboard_renders_workers_workloads_and_failovers(world: World, tmp_path: Path, tokens: str) -> None:
    store = world.tokens if tokens == "token in the address" else TokenStore([])
    # worker-2 refuses the dispatcher's credentials: NotReady, and the card says why.
    world.dispatcher.capacities["worker-2"].health = "NotReady"
    world.dispatcher.capacities["worker-2"].health_reason = "Unauthorized: the API server refused the credentials"
    runner = await serve(make_app(world.dispatcher, store), "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        host, port = bound_address(runner)
        url = f"http://{host}:{port}/" + (f"#token={READ_TOKEN}" if tokens == "token in the address" else "")
        async with browser(tmp_path / "profile") as (cdp, session):
            await cdp.send("Page.navigate", {"url": url}, session)
            # Two refreshes: the first load and at least one of the page's own, 2 s later.
            await wait_for(cdp, session, "Number(document.body.dataset.refreshes) >= 2")
            text = await cdp.evaluate(session, PAGE_TEXT)
            cards = await cdp.evaluate(
                session,
                "[...document.querySelectorAll('[data-cluster]')].map(c => [c.dataset.cluster, "
                "c.querySelector('.badge').textContent, c.querySelectorAll('.bar').length])",
            )
            running = await cdp.evaluate(session, f"{ROW}('team-a/train-1')")
            placing = await cdp.evaluate(session, f"{ROW}('team-a/train-2')")
            events = await cdp.evaluate(
                session, "[...document.querySelectorAll('#events tbody tr')].map(r => r.innerText)"
            )
            bold = await cdp.evaluate(session, "document.querySelectorAll('main b').length")
            address = await cdp.evaluate(session, "location.href")
            shot = await cdp.send("Page.captureScreenshot", {"format": "png"}, session)
            problems = cdp.problems()
    finally:
        await runner.cleanup()
    png = tmp_path / "dashboard.png"
    png.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot: {png}")

    assert problems == [], problems
    # Workers with their health, capacity bars (cq-a and cq-b, cpu and memory), and worker-3's vGPUs.
    assert cards == [["worker-1", "Ready", 4], ["worker-2", "NotReady", 4], ["worker-3", "Ready", 7]], cards
    assert "Unauthorized: the API server refused the credentials" in text
    assert "cq-a / default" in text and "HAMi vGPUs" in text and "free / 40" in text
    # Workloads with their state and the cluster they are placed on.
    assert running[:6] == ["team-a/train-1", "Job", "user-queue", "100 (high)", "Running", "worker-1"], running
    assert placing[4:6] == ["Placing", "worker-3"], placing
    assert "Pending 13" in text
    # Recent failovers, newest first; the message's markup is shown as text, not interpreted.
    assert len(events) == 2 and "Fenced" in events[0] and "FailedOver" in events[1], events
    assert "team-a/train-1" in events[1] and "<b>not bold</b>" in events[1]
    assert bold == 0
    assert READ_TOKEN not in address and ADMIN_TOKEN not in text  # the token leaves the address bar
    assert "needs a token" not in text  # the token form stays hidden


async def test_the_dashboard_asks_for_a_token_when_it_has_none(world: World, tmp_path: Path) -> None:
    runner = await serve(make_app(world.dispatcher, world.tokens), "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        host, port = bound_address(runner)
        async with browser(tmp_path / "profile") as (cdp, session):
            await cdp.send("Page.navigate", {"url": f"http://{host}:{port}/"}, session)
            await wait_for(cdp, session, "!document.getElementById('token-form').hidden")
            text = await cdp.evaluate(session, PAGE_TEXT)
            assert "worker-1" not in text and "train-1" not in text
            assert "needs a token" in text
            # The user types the token: the data appears, and the token stays in this tab's sessionStorage.
            await cdp.evaluate(
                session,
                f"document.getElementById('token').value = {json.dumps(READ_TOKEN)};"
                "document.getElementById('token-form').requestSubmit(); true",
            )
            await wait_for(cdp, session, "Number(document.body.dataset.refreshes) >= 1")
            text = await cdp.evaluate(session, PAGE_TEXT)
            assert "worker-1" in text and "team-a/train-1" in text
            assert await cdp.evaluate(session, "document.getElementById('token-form').hidden")
            exceptions = [p for p in cdp.problems() if not p.startswith("log error: Failed to load resource")]
    finally:
        await runner.cleanup()
    assert exceptions == [], exceptions


async def test_the_page_route_needs_no_token_even_with_a_bad_one(world: World) -> None:
    app: web.Application = make_app(world.dispatcher, world.tokens)  # type: ignore[arg-type]
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/", headers={"Authorization": "Bearer nope"})
        assert resp.status == 200
