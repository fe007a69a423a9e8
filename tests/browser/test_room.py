"""The room server (``python -m workbench_room``): Host guard, token, kernels reclaimed, upload limit.

The Host and token tests speak plain HTTP; the others drive Debian's headless
Chromium through Playwright with every request outside the server aborted.
Kernels are counted as the server's ``ipykernel_launcher`` child processes. A
short cull timeout (5 s, checked every 2 s) keeps the tests quick; the 60 s
bound asserted is the room's promise with its defaults (30 s, every 10 s).
"""

from __future__ import annotations

import http.client
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from room_server import (
    CHROMIUM,
    CHROMIUM_ARGS,
    REPO,
    kernel_id_of,
    kernel_processes,
    room_server,
)

RECLAIM_S = 60
PAGE_TIMEOUT_MS = 120_000
EIGHT_PAGES_TIMEOUT_MS = 300_000  # all 8 pages drawn within this, measured from the first wait
PLOTS = "document.querySelectorAll('.js-plotly-plot')"
SHORT_CULL = ("--cull-idle-s", "5", "--cull-interval-s", "2")


def get(port: int, path: str, host: str) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def loopback_server():
    pytest.importorskip("voila", reason="voila is not installed")
    with room_server(*SHORT_CULL, "--upload-limit-mib", "1", log_name="room_test.log") as server:
        yield server


def test_a_foreign_host_header_gets_403_on_pages_static_files_and_websockets(loopback_server):
    _, port, url, _ = loopback_server
    assert url == f"http://127.0.0.1:{port}/"  # loopback: no token
    for path in (
        "/",
        "/voila/render/trace_explorer.ipynb",
        "/voila/static/voila.js",
        "/api/kernels/00000000-0000-0000-0000-000000000000/channels",
        "/workbench/room/config.js",
    ):
        status, _, body = get(port, path, f"rebind.evil.example:{port}")
        assert status == 403, (path, status)
        assert b"not served here" in body
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        status, _, _ = get(port, "/", host)
        assert status == 200, host
    status, _, body = get(port, "/workbench/room/config.js", f"127.0.0.1:{port}")
    assert status == 200 and body == b"window.workbenchUploadLimitBytes = 1048576;\n"


def test_a_token_is_required_by_default_off_loopback():
    pytest.importorskip("voila", reason="voila is not installed")
    # no pool (one preheated kernel per dashboard by default): a kernel here is one a visitor started
    with room_server("--host", "0.0.0.0", "--pool", "0", log_name="room_token.log") as (
        proc,
        port,
        url,
        _,
    ):
        token = parse_qs(urlparse(url).query)["token"][0]
        assert len(token) == 32
        for path in ("/", "/voila/render/trace_explorer.ipynb", "/?token=not-" + token):
            status, headers, _ = get(port, path, f"127.0.0.1:{port}")
            assert (status, headers["Location"].split("?")[0]) == (302, "/login"), path
        assert kernel_processes(proc) == []  # no kernel for a visitor without the token
        status, _, _ = get(port, f"/?token={token}", f"127.0.0.1:{port}")
        assert status == 200
        status, _, _ = get(port, f"/?token={token}", "rebind.evil.example")
        assert status == 403


def browser_context(pw, port):
    """A headless Chromium and a context whose pages may reach only the room server."""
    browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    return browser, local_context(browser, port)


def local_context(browser, port):
    """A browser context (a student's own browser) whose requests outside the server are aborted."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.blocked = []
    local = (f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", "data:", "blob:")

    def route(r):
        if r.request.url.startswith(local):
            r.continue_()
        else:
            context.blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    return context


def need_browser():
    if not CHROMIUM.exists():
        pytest.skip(
            "/usr/bin/chromium is missing (Debian package 'chromium'; `make browser` installs it)"
        )
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed")


def wait_for_plots(page, count: int, timeout_ms: int = PAGE_TIMEOUT_MS) -> None:
    page.wait_for_function(
        f"""() => document.body.innerText.includes('There was an error when executing cell')
                 || Array.from({PLOTS}).filter(el => el.data && el.data.length > 0).length >= {count}""",
        timeout=timeout_ms,
        polling=500,
    )  # a timer, not requestAnimationFrame: 8 pages do not all get frames
    assert "There was an error when executing cell" not in page.inner_text("body")


def page_state(page) -> str:
    """What a page got to: its kernel, widget views, drawn plots (for a failure message)."""
    try:
        return page.evaluate(f"""() => {{
            const cfg = document.getElementById('jupyter-config-data');
            const kernel = cfg ? JSON.parse(cfg.textContent).kernelId : null;
            return `kernel ${{kernel}}, ${{document.querySelectorAll('.jupyter-widgets').length}} widget views, `
                 + `${{Array.from({PLOTS}).filter(el => el.data && el.data.length > 0).length}} plots drawn`;
        }}""")
    except Exception as exc:  # a page that is gone or still navigating
        return f"unreadable ({type(exc).__name__})"


def page_kernel_id(page) -> str:
    """The page's kernel, from the page config Voila writes into it."""
    return page.evaluate(
        "() => JSON.parse(document.getElementById('jupyter-config-data').textContent).kernelId"
    )


def wait_until_gone(proc, kernel_ids: set[str], timeout_s: float) -> float:
    """Seconds until none of ``kernel_ids`` runs; fails after ``timeout_s``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        alive = {kernel_id_of(p) for p in kernel_processes(proc)} & kernel_ids
        if not alive:
            return time.monotonic() - started
        time.sleep(0.5)
    raise AssertionError(
        f"kernels {sorted(alive)} still run {timeout_s} s after their pages closed"
    )


@pytest.mark.browser
def test_closed_pages_have_their_kernels_and_scratch_folders_reclaimed(loopback_server):
    """One page closes normally (its shutdown request now carries the _xsrf cookie), one closes
    without unload handlers, as a crashed tab would (culling reclaims it)."""
    need_browser()
    from playwright.sync_api import sync_playwright

    proc, port, url, log = loopback_server
    with sync_playwright() as pw:
        browser, context = browser_context(pw, port)
        pages = [context.new_page(), context.new_page()]
        for page in pages:
            page.goto(f"{url}voila/render/trace_explorer.ipynb", timeout=PAGE_TIMEOUT_MS)
        for page in pages:
            wait_for_plots(page, 6)
        ids = [page_kernel_id(page) for page in pages]
        running = {kernel_id_of(p): p for p in kernel_processes(proc)}
        assert set(ids) <= set(running), (ids, sorted(running))
        scratch = [Path(running[k].environ()["WORKBENCH_SCRATCH_DIR"]) for k in ids]
        assert all(s.is_dir() for s in scratch)
        pages[0].close(run_before_unload=True)
        beacon_s = wait_until_gone(proc, {ids[0]}, RECLAIM_S)
        pages[1].close()  # no beforeunload: only the culler can tell
        cull_s = wait_until_gone(proc, {ids[1]}, RECLAIM_S)
        assert context.blocked == []
        browser.close()
    assert not any(s.exists() for s in scratch)
    text = log.read_text()
    assert "_xsrf' argument missing" not in text, "the page's shutdown request was refused"
    print(
        f"\nkernel gone {beacon_s:.1f} s after a normal close, {cull_s:.1f} s after a silent close (cull 5 s)"
    )


@pytest.mark.browser
def test_an_upload_over_the_page_limit_says_so_in_the_page(loopback_server):
    need_browser()
    from playwright.sync_api import sync_playwright

    proc, port, url, _ = loopback_server
    with sync_playwright() as pw:
        browser, context = browser_context(pw, port)
        page = context.new_page()
        page.goto(f"{url}voila/render/trace_explorer.ipynb", timeout=PAGE_TIMEOUT_MS)
        wait_for_plots(page, 6)
        with page.expect_file_chooser() as chooser:
            page.get_by_role("button", name="upload trace").click()
        chooser.value.set_files(
            [{"name": "big.json.gz", "mimeType": "application/gzip", "buffer": b"\0" * (3 << 19)}]
        )  # 1.5 MiB against a 1 MiB limit
        note = page.locator(".workbench-upload-too-large")
        note.wait_for(timeout=10_000)
        assert note.inner_text() == (
            "big.json.gz is 1.5 MiB: uploads here are limited to 1.0 MiB. "
            "Analyze it on the command line: python -m workbench analyze big.json.gz"
        )
        # the kernel connection survived: a small broken upload still gets its TraceError message
        with page.expect_file_chooser() as chooser:
            page.get_by_role("button", name="upload trace").click()
        chooser.value.set_files(
            [
                {
                    "name": "broken.json",
                    "mimeType": "application/json",
                    "buffer": b'{"traceEvents": [{"ph": "X"',
                }
            ]
        )
        page.wait_for_function(
            "() => document.body.innerText.includes('broken.json')", timeout=30_000
        )
        assert page.locator(".workbench-upload-too-large").count() == 0
        assert context.blocked == []
        browser.close()


@pytest.mark.browser
@pytest.mark.slow
def test_eight_concurrent_pages_render_and_every_kernel_is_reclaimed():
    """Issue 14: 8 pages at once against a pooled server, no failure, each page's kernel gone within
    60 s of its page closing; the preheated pool stays (Voila never culls pooled kernels).

    On a busy machine this once failed: pages drew nothing because the server dropped their widget
    output after nbclient's 4 s iopub wait (room.md; the room now waits 120 s)."""
    need_browser()
    pytest.importorskip("voila", reason="voila is not installed")
    from playwright.sync_api import sync_playwright

    # the 8 pages share one address (127.0.0.1), where a room's students have one each: the per-address
    # bound on pages loaded and not yet connected (3) answered the later pages 503 when the first ones
    # loaded faster than they connected (a fresh clone's CI, 2026-11-27); tests/room checks that bound
    with room_server(
        *SHORT_CULL,
        "--pool",
        "1",
        "--max-unconnected-per-client",
        "0",
        log_name="room_8_pages.log",
    ) as (
        proc,
        port,
        url,
        log,
    ):
        with sync_playwright() as pw:
            # one context per page, as each student has a browser of their own (Chromium keeps
            # 6 connections per host and profile; 8 streaming Voila pages in one would queue)
            browser, first = browser_context(pw, port)
            contexts = [first, *(local_context(browser, port) for _ in range(7))]
            pages = [context.new_page() for context in contexts]
            names = ["latency_explorer.ipynb", "trace_explorer.ipynb"] * 4
            console = {id(page): [] for page in pages}
            for page in pages:
                page.on(
                    "console",
                    lambda m, page=page: (
                        m.type in ("error", "warning") and console[id(page)].append(m.text[:200])
                    ),
                )
            for page, name in zip(pages, names):
                page.goto(f"{url}voila/render/{name}", wait_until="commit", timeout=PAGE_TIMEOUT_MS)
            started = time.monotonic()
            for page, name in zip(
                pages, names
            ):  # 8 at once on a busy 2-core machine took up to 3 minutes
                left_ms = max(1, int(EIGHT_PAGES_TIMEOUT_MS - 1000 * (time.monotonic() - started)))
                try:
                    wait_for_plots(page, 3 if name.startswith("latency") else 6, left_ms)
                except (
                    Exception
                ) as exc:  # say which pages stalled where, with the server log's name
                    states = "\n".join(
                        f"  {n}: {page_state(p)}; console: {console[id(p)][-3:]}"
                        for p, n in zip(pages, names)
                    )
                    raise AssertionError(
                        f"{name} drew no figure in time ({type(exc).__name__}); pages:\n{states}\n"
                        f"server log: {log}"
                    ) from exc
                assert page.locator(".workbench-error").count() == 0, name
            ids = {page_kernel_id(page) for page in pages}
            assert len(ids) == 8
            for page in pages:
                page.close()
            closed = time.monotonic()
            wait_until_gone(proc, ids, RECLAIM_S)
            reclaimed_s = time.monotonic() - closed
            assert [url for context in contexts for url in context.blocked] == []
            browser.close()
        pooled = kernel_processes(proc)
        dashboards = len(list((REPO / "notebooks" / "dashboards").glob("*.ipynb")))
        assert len(pooled) <= dashboards, (
            f"{len(pooled)} kernels left; the pool holds one per dashboard"
        )
    print(
        f"\n8 pages: every kernel reclaimed {reclaimed_s:.1f} s after the pages closed; {len(pooled)} pooled"
    )
