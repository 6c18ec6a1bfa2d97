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
from dispatcher.store.models import AuditEvent, PlacementState, WorkloadState, utcnow
from dispatcher.store.repo import PlacementIntent, Transition
from tests.api.test_api import (
    ADMIN_TOKEN,
    READ,
    READ_TOKEN,
    World,
    admitted,
    assert_error,
    assert_schema,
    build_world,
    decision,
)

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
            ("/format.js", "text/javascript", "format.js"),
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
    for name in ("dashboard.js", "format.js"):
        script = (STATIC / name).read_text()
        assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function", script), (
            name
        )
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
        async with asyncio.timeout(30):
            reply = await future
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
ROW = "(n => [...document.querySelectorAll(`#workloads tr[data-workload='${n}'] td`)].map(td => td.textContent))"


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
            fencing = await cdp.evaluate(session, "document.getElementById('fencing-note').innerText")
            unknown = await cdp.evaluate(
                session, "document.querySelector('[data-cluster=worker-2] .unknown').innerText"
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
    # Workers with their health, capacity bars (cq-a and cq-b, cpu and memory), and worker-3's vGPUs; worker-2
    # refuses the dispatcher, so its numbers are the last ones seen: not drawn.
    assert cards == [["worker-1", "Ready", 4], ["worker-2", "NotReady", 0], ["worker-3", "Ready", 7]], cards
    assert "Unauthorized: the API server refused the credentials" in text
    # Every card says whether a job failed over from that worker can run twice (issue 21: fencing: none here).
    assert text.count("fencing: none — failover from this worker is at-least-once") == 3, text
    assert unknown.startswith("capacity unknown: worker NotReady"), unknown
    assert "cq-a / default" in text and "HAMi vGPUs" in text and "free / 40" in text
    # Workloads with their state and the cluster they are placed on.
    assert running[:6] == ["team-a/train-1", "Job", "user-queue", "100 (high)", "Running", "worker-1"], running
    assert placing[4:6] == ["Placing", "worker-3"], placing
    assert "Pending 13" in text
    # Recent failovers; the message's markup is shown as text, not interpreted. Fencing is only counted.
    assert len(events) == 1 and "FailedOver" in events[0], events
    assert "team-a/train-1" in events[0] and "<b>not bold</b>" in events[0]
    assert fencing.startswith("1 fencing row") and "on worker-2" in fencing, fencing
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


# -- the views of issue 16 item 11, each in the browser -----------------------------------------------------------


class Page:
    """One dashboard page in headless Chromium, with the API served from ``world``."""

    def __init__(self, cdp: DevTools, session: str, base: str) -> None:
        self.cdp, self.session, self.base = cdp, session, base
        #: Browser log lines a test provokes on purpose (a 404 for a page of something not stored).
        self.expected: list[str] = []

    async def js(self, expression: str) -> Any:
        return await self.cdp.evaluate(self.session, expression)

    async def wait(self, expression: str, timeout: float = 20.0) -> None:
        await wait_for(self.cdp, self.session, expression, timeout)

    async def refreshed(self) -> None:
        """Wait for the next refresh of the page (the data now is what the page shows)."""
        seen = int(await self.js("Number(document.body.dataset.refreshes)"))
        await self.wait(f"Number(document.body.dataset.refreshes) > {seen}")

    async def click(self, selector: str) -> None:
        assert await self.js(f"(e => e ? (e.click(), true) : false)(document.querySelector({json.dumps(selector)}))"), (
            f"nothing to click at {selector}"
        )

    async def texts(self, selector: str) -> list[str]:
        return list(await self.js(f"[...document.querySelectorAll({json.dumps(selector)})].map(e => e.innerText)"))

    def requests(self) -> list[str]:
        """The URLs the page fetched (Network.enable is on)."""
        return [e["params"]["request"]["url"] for e in self.cdp.events if e["method"] == "Network.requestWillBeSent"]


@contextlib.asynccontextmanager
async def dashboard(world: World, tmp_path: Path, fragment: str = f"#token={READ_TOKEN}") -> AsyncIterator[Page]:
    """The dashboard at ``/`` + ``fragment``, after its first refresh; on the way out, nothing went wrong in it."""
    runner = await serve(make_app(world.dispatcher, world.tokens), "127.0.0.1", 0)  # type: ignore[arg-type]
    try:
        host, port = bound_address(runner)
        base = f"http://{host}:{port}/"
        async with browser(tmp_path / "profile") as (cdp, session):
            await cdp.send("Network.enable", session=session)
            await cdp.send("Page.navigate", {"url": base + fragment}, session)
            await wait_for(cdp, session, "Number(document.body.dataset.refreshes) >= 1")
            page = Page(cdp, session, base)
            yield page
            shot = await cdp.send("Page.captureScreenshot", {"format": "png"}, session)
            (tmp_path / "page.png").write_bytes(base64.b64decode(shot["data"]))
            problems = [p for p in cdp.problems() if not any(x in p for x in page.expected)]
    finally:
        await runner.cleanup()
    assert problems == [], problems


CARD = "document.querySelector('[data-cluster={}]')"


async def test_units_are_one_per_resource(world: World, tmp_path: Path) -> None:
    async with dashboard(world, tmp_path) as page:
        cases = [
            ("cpu", 1500),
            ("cpu", 2000),
            ("cpu", 250),
            ("cpu", 12345),
            ("memory", 2 * 2**30),
            ("memory", 1536 * 2**20),
            ("memory", 10**9),
            ("memory", 2**20),
            ("memory", 0),
            ("nvidia.com/gpumem", 40960),
            ("nvidia.com/total-gpumem", 100000),
            ("nvidia.com/gpu", 3),
            ("nvidia.com/gpucores", 250),
            ("pods", 110),
            ("ephemeral-storage", 50 * 2**30),
            ("cpu", 2**63 - 1),
        ]
        got = await page.js(f"{json.dumps(cases)}.map(([r, v]) => window.kueueDispatcher.formatAmount(r, v))")
        worker1 = await page.texts("[data-cluster=worker-1] .row .nums")
        worker3 = await page.js(CARD.format("worker-3") + ".innerText")
    assert got == [
        "1.5 cores",
        "2 cores",
        "0.25 cores",
        "12.35 cores",
        "2 GiB",
        "1.5 GiB",
        "0.93 GiB",
        "<0.01 GiB",
        "0 GiB",
        "40 GiB",
        "97.66 GiB",
        "3",
        "250%",
        "110",
        "50 GiB",
        "unlimited",
    ], got
    # cq-a: cpu, memory; cq-b: cpu, memory. 1.5 cores and 2 GiB reserved: never "1500m" beside "8".
    assert worker1 == ["1.5 / 8 cores", "2 / 32 GiB", "0 / 4 cores", "0 / 16 GiB"], worker1
    assert "160 free / 160 GiB" in worker3
    assert not re.search(r"\d(m|Mi|Gi|Ki)\b", worker3), worker3


async def test_borrowing_is_shown_as_borrowing(world: World, tmp_path: Path) -> None:
    # cq-a: 8 cores nominal in cohort org; 10.5 cores admitted and 1.5 reserved: 12 in use, 4 of them borrowed.
    world.dispatcher.capacities["worker-1"].workload_event("ADDED", admitted("big", "cq-a", "10500m", "16Gi"))
    async with dashboard(world, tmp_path) as page:
        rows = await page.texts("[data-cluster=worker-1] .row .nums")
        borrowing = await page.texts("[data-cluster=worker-1] .row.borrowing .res")
        widths = await page.js(
            "[...document.querySelector('[data-cluster=worker-1] .row.borrowing .bar').children]"
            ".map(p => [p.className, Math.round(parseFloat(p.style.width))])"
        )
        title = await page.js("document.querySelector('[data-cluster=worker-1] .row.borrowing .nums').title")
        text = await page.js(CARD.format("worker-1") + ".innerText")
    assert rows[0] == "8 / 8 cores + 4 borrowed", rows
    assert rows[1] == "18 / 32 GiB", rows  # memory is within nominal
    assert borrowing == ["cpu"]
    assert "12 / 8" not in text
    # The bar spans nominal + borrowed: 10.5 of 12 admitted... within nominal 8 admitted, then 4 borrowed.
    assert widths == [["used", 67], ["reserved", 0], ["borrowed", 33]], widths
    assert "10.5 cores admitted" in title and "4 cores borrowed from cohort org" in title, title


async def test_a_lost_worker_shows_its_capacity_as_unknown(world: World, tmp_path: Path) -> None:
    d = world.dispatcher
    await d.repo.ensure_clusters(d.capacities)
    await d.repo.record_health("worker-2", "Ready")
    await d.repo.record_health("worker-2", "Lost")
    d.capacities["worker-2"].health = "Lost"
    async with dashboard(world, tmp_path) as page:
        card = await page.js(CARD.format("worker-2") + ".innerText")
        bars = await page.js(CARD.format("worker-2") + ".querySelectorAll('.bar').length")
        other = await page.js(CARD.format("worker-1") + ".querySelectorAll('.bar').length")
    assert "capacity unknown: worker Lost since " in card and "ago)" in card, card
    assert bars == 0 and "cq-a" not in card and "cores" not in card, card  # no stale numbers
    assert other == 4


async def test_summary_tables_filter_the_workload_list_on_the_server(world: World, tmp_path: Path) -> None:
    async with dashboard(world, tmp_path) as page:
        queues = await page.texts("#queues tbody tr")
        namespaces = await page.texts("#namespaces tbody tr")
        assert [q.split("\t") for q in queues] == [
            ["team-a/user-queue", "10", "1", "1", "12"],
            ["team-b/other-queue", "3", "·", "·", "3"],
        ], queues
        assert [n.split("\t")[0] for n in namespaces] == ["team-a", "team-b"]
        # A count: that queue's workloads in that state, asked of the server.
        await page.click("#queues tr[data-key='team-b/other-queue'] td[data-state=Pending] a")
        await page.wait("location.hash === '#/?namespace=team-b&queue=other-queue&state=Pending'")
        await page.wait("document.querySelectorAll('#workloads tbody tr[data-workload]').length === 3")
        listed = await page.js("[...document.querySelectorAll('#workloads tbody tr')].map(r => r.dataset.workload)")
        chips = await page.texts("#filters .chip")
        count = await page.js("document.getElementById('workloads-count').innerText")
        assert sorted(listed) == ["team-b/train-0", "team-b/train-1", "team-b/train-2"]
        assert [c.split(" ")[0] for c in chips] == ["namespace:", "queue:", "state:"], chips
        assert count == "(3)"
        assert any(
            "api/v1/workloads?namespace=team-b&queue=other-queue&state=Pending&limit=" in u for u in page.requests()
        )
        # A namespace: every one of its workloads; then a filter removed from its chip.
        await page.click("#namespaces tr[data-key='team-a'] td:first-child a")
        await page.wait("document.querySelectorAll('#workloads tbody tr[data-workload]').length === 12")
        await page.click("#states a.badge.state-Running")
        await page.wait("location.hash === '#/?namespace=team-a&state=Running'")
        await page.wait("document.querySelectorAll('#workloads tbody tr[data-workload]').length === 1")
        assert await page.js("document.querySelector('#workloads tbody tr').dataset.workload") == "team-a/train-1"
        await page.click("#filters .chip[data-filter=namespace] a.remove")
        await page.wait("location.hash === '#/?state=Running'")
        await page.click("#filters a.clear")
        await page.wait("document.querySelectorAll('#workloads tbody tr[data-workload]').length === 15")
        assert any(u.endswith("api/v1/workloads?namespace=team-a&state=Running&limit=100") for u in page.requests())


async def test_the_workload_page_shows_its_decision_copies_events_and_timeline(world: World, tmp_path: Path) -> None:
    # A link to the page, with the token: the token is taken, the route stays.
    async with dashboard(world, tmp_path, f"#/workloads/team-a/train-1?token={READ_TOKEN}") as page:
        await page.wait("!document.getElementById('workload-body').hidden")
        assert await page.js("document.getElementById('workload-title').innerText") == "team-a/train-1"
        address = await page.js("location.href")
        meta = await page.js("document.getElementById('workload-meta').innerText")
        steps = await page.js(
            "[...document.querySelectorAll('#workload-timeline li')].map(li => [li.dataset.step, li.className])"
        )
        decision = await page.js("document.getElementById('workload-decision').innerText")
        verdicts = await page.texts("#workload-decision tbody tr")
        copies = await page.texts("#copies tbody tr")
        events = await page.texts("#workload-events tbody tr")
        bold = await page.js("document.querySelectorAll('main b').length")
        # Back to the overview, and into another workload from its row.
        await page.click(".back a")
        await page.wait("document.querySelector(`#workloads tr[data-workload='team-a/train-2'] a`)")
        await page.click("#workloads tr[data-workload='team-a/train-2'] a")
        await page.wait("!document.getElementById('workload-body').hidden")
        assert await page.js("document.getElementById('workload-title').innerText") == "team-a/train-2"
        await page.wait("document.querySelectorAll('#copies tbody tr[data-placement]').length === 1")
        other = await page.texts("#copies tbody tr")
        # A workload that is not stored.
        page.expected.append("404 (Not Found) " + page.base + "api/v1/workloads/team-a/nope")
        await page.js("location.hash = '#/workloads/team-a/nope'; true")
        await page.wait("!document.getElementById('workload-missing').hidden")
        missing = await page.js("document.getElementById('workload-missing').innerText")
    assert address == page.base + "#/workloads/team-a/train-1", address
    assert "Running" in meta and "queue user-queue" in meta and "priority 100 (high)" in meta and "on worker-1" in meta
    assert "not again on worker-2" in meta
    assert steps[:5] == [
        ["Submitted", "done"],
        ["Placed", "done"],
        ["Admitted", "done"],
        ["Started", "done"],
        ["Finished", "todo"],
    ], steps
    assert "placed on worker-1, score 0.69" in decision and "strategy scored · mode binpack" in decision
    assert verdicts[0].split("\t")[:4] == ["worker-1", "chosen", "0.690", "cq-a"], verdicts
    assert verdicts[1].split("\t")[1:2] == ["not feasible"] and "not Ready (Suspect)" in verdicts[1]
    # Copies, newest first: the running one, then the one that timed out.
    assert [c.split("\t")[:6] for c in copies] == [
        [
            "2",
            "worker-1",
            "scored",
            "0.690",
            "Running",
            "placed on worker-1, score 0.69: the only worker that can take it",
        ],
        ["1", "worker-2", "scored", "0.500", "TimedOut", "not admitted in time"],
    ], copies
    # Its events, oldest first, the fixture's FailedOver among them, its markup as text.
    types = [e.split("\t")[1] for e in events]
    assert types[:3] == ["Submitted", "Placing", "Placing"] and "FailedOver" in types and "Placed" in types, events
    assert any("<b>not bold</b>" in e for e in events) and bold == 0
    assert other[0].split("\t")[1] == "worker-3" and "Creating" in other[0]
    assert "no workload team-a/nope is stored" in missing


async def test_a_worker_page_shows_its_health_history(world: World, tmp_path: Path) -> None:
    d = world.dispatcher
    await d.repo.ensure_clusters(d.capacities)
    await d.repo.record_health("worker-2", "Ready")
    await d.repo.record_health("worker-2", "NotReady", "Unauthorized: the API server refused the credentials")
    await d.repo.record_health("worker-2", "Ready")
    await d.repo.record_health("worker-1", "Ready")
    async with dashboard(world, tmp_path) as page:
        line = await page.js(CARD.format("worker-2") + ".querySelector('.history').innerText")
        await page.click("[data-cluster=worker-2] a.name")
        await page.wait("location.hash === '#/workers/worker-2'")
        await page.wait("document.querySelectorAll('#health-history tbody tr[data-to]').length === 3")
        history = await page.texts("#health-history tbody tr")
        title = await page.js("document.getElementById('worker-title').innerText")
        failovers = await page.texts("#worker-events tbody tr")
        cards = await page.js("document.querySelectorAll('#worker-card [data-cluster=worker-2] .bar').length")
    assert line.startswith("health: NotReady → Ready") and "Ready → NotReady" in line, line
    assert title == "worker-2"
    changes = [h.split("\t")[2:] for h in history]
    assert changes == [
        ["NotReady → Ready", ""],
        ["Ready → NotReady", "Unauthorized: the API server refused the credentials"],
        ["Unknown → Ready", ""],
    ], history
    assert any("FailedOver" in f and "team-a/train-1" in f for f in failovers), failovers
    assert any("Fenced" in f for f in failovers), failovers
    assert cards == 4  # worker-2 is Suspect in this world: current numbers


async def test_failed_jobs_are_listed_and_fencing_does_not_flood_the_failovers(world: World, tmp_path: Path) -> None:
    d = world.dispatcher
    repo = d.repo
    # Failed on its worker (the Job's own failure: nothing to fail over) ...
    wid = world.ids["team-a/train-5"]
    (intent,) = await repo.begin_placements([PlacementIntent(wid, 1, "worker-1", "scored", 0.5, decision("worker-1"))])
    ok = await repo.apply(
        [
            Transition(
                wid,
                1,
                {
                    "state": WorkloadState.FAILED,
                    "finished_at": utcnow(),
                    "reason": "failed on worker-1: BackoffLimitExceeded",
                },
                placement_id=intent.placement_id,
                placement_values={"state": PlacementState.FAILED, "outcome": "the Job failed: BackoffLimitExceeded"},
            )
        ]
    )
    assert ok == [True]
    # ... and one whose worker was lost, marked not to fail over.
    lost = world.ids["team-a/train-2"]
    train2 = await repo.get_workload("team-a", "train-2")
    assert train2 is not None and train2.placement_id is not None
    await repo.fail_over(
        "worker-3",
        [],
        [(lost, 1, train2.placement_id)],
        from_states=[WorkloadState.PLACING],
        move_reason="moved",
        fail_reason="worker worker-3 was lost; kueue-dispatcher.io/no-failover is set, so it failed",
    )
    # Routine fencing after a worker came back: 40 stale copies deleted.
    await repo.record(
        [
            AuditEvent(at=utcnow(), cluster="worker-3", type="Fenced", message=f"deleted stale copy {i}")
            for i in range(40)
        ]
    )
    async with dashboard(world, tmp_path) as page:
        await page.wait("document.querySelectorAll('#failed tbody tr[data-failed]').length === 2")
        failed = await page.texts("#failed tbody tr")
        count = await page.js("document.getElementById('failed-count').innerText")
        events = await page.js("[...document.querySelectorAll('#events tbody tr')].map(r => r.dataset.type)")
        note = await page.js("document.getElementById('fencing-note').innerText")
        await page.click("#fencing-toggle")
        shown = await page.js("[...document.querySelectorAll('#events tbody tr')].map(r => r.dataset.type)")
        await page.refreshed()  # the choice holds across refreshes
        after = await page.js("document.querySelectorAll('#events tbody tr[data-type=Fenced]').length")
        await page.click("a.more-link[href='#/?state=Failed']")
        await page.wait("location.hash === '#/?state=Failed'")
        await page.wait("document.querySelectorAll('#workloads tbody tr[data-workload]').length === 2")
    by_name = {f.split("\t")[0]: f for f in failed}
    assert set(by_name) == {"team-a/train-5", "team-a/train-2"}, failed
    assert "BackoffLimitExceeded" in by_name["team-a/train-5"] and "worker-1" in by_name["team-a/train-5"]
    assert "no-failover is set" in by_name["team-a/train-2"] and "worker-3" in by_name["team-a/train-2"]
    assert count == "(2)"
    assert events == ["WorkerLost", "FailedOver"], events  # newest first, no Fenced row
    assert note.startswith("41 fencing rows") and "on worker-3" in note, note
    assert shown.count("Fenced") == 41 and shown.count("WorkerLost") == 1 and after == 41
