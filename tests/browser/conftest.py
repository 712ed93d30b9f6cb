"""A real headless Chromium, driven by Playwright's sync API, against pytest-django's live server.

Playwright's sync API keeps an asyncio loop in the main thread, and Django refuses ORM calls from a
thread with a running loop. The tests only read rows between browser steps, never concurrently with
them, so the guard is switched off for this folder before any query runs.

The browser is Debian's Chromium at /usr/bin/chromium unless ARENA_CHROMIUM names another binary;
without either, Playwright's own download is tried.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import pytest
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright.sync_api import Browser, BrowserContext, Page, Playwright, ViewportSize, sync_playwright  # noqa: E402
from playwright.sync_api import Error as PlaywrightError  # noqa: E402

from tests.factories import PASSWORD  # noqa: E402

SYSTEM_CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Wide enough for the two panes to sit side by side (they stack below 800 px).
VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
TIMEOUT_MS = 30_000


def chromium_executable() -> str | None:
    override = os.environ.get("ARENA_CHROMIUM")
    if override:
        if not Path(override).is_file():
            raise pytest.UsageError(f"ARENA_CHROMIUM={override!r} is not a file")
        return override
    return str(SYSTEM_CHROMIUM) if SYSTEM_CHROMIUM.is_file() else None


# Package-scoped, not session-scoped: Playwright's sync API keeps an event loop running in the main thread
# while it lives, and asgiref's async_to_sync refuses to run in such a thread. Under pytest-xdist a worker
# runs tests of other folders between this folder's (the streaming tests use async_to_sync); pytest ends a
# package's fixtures before it runs a test outside the package, so those tests find no loop.
@pytest.fixture(scope="package")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="package")
def chromium(playwright_driver: Playwright) -> Iterator[Browser]:
    executable = chromium_executable()
    try:
        browser = playwright_driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    except PlaywrightError as exc:
        # A missing browser is a broken set-up, not a reason to pass: scripts/test installs Debian's chromium.
        pytest.fail(f"no Chromium to drive (install Debian's chromium or set ARENA_CHROMIUM): {exc.message[:300]}")
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def browser_context(chromium: Browser) -> Iterator[BrowserContext]:
    """A fresh profile per test: no cookies or storage carried between tests."""
    context = chromium.new_context(viewport=VIEWPORT)
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def screenshot_dir() -> Path:
    """Where the tests leave screenshots of the pages for a person to look at (ARENA_SCREENSHOT_DIR)."""
    path = Path(os.environ.get("ARENA_SCREENSHOT_DIR") or tempfile.gettempdir())
    path.mkdir(parents=True, exist_ok=True)
    return path


def log_in(page: Page, base_url: str, *, email: str, password: str = PASSWORD) -> None:
    """Log in through the allauth form, as a person does (for the tests of logging in, or that watch
    every page the browser shows; the others use ``logged_in``)."""
    page.goto(base_url + reverse("account_login"))
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(base_url + reverse("battles:campaigns"))


def logged_in(context: BrowserContext, base_url: str, user: AbstractBaseUser) -> None:
    """Give the browser profile a logged-in session of ``user`` without the form: Django's
    ``force_login`` makes the session (committed: these tests are transactional, so the live server
    sees it) and the profile gets its cookie, as the form's response would set it. Two page loads and a
    password check fewer per test (about 0.7 s); the form itself is driven by ``log_in`` in
    tests/browser/test_rater_flow.py, test_csp.py and test_dashboard.py."""
    client = Client()
    client.force_login(cast(User, user))  # the suite's users are auth's User
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": base_url, "httpOnly": True}])


# A phone (390 px: the panes stack, the vote buttons wrap) and a desktop (1280 px: side by side).
WIDTHS = (390, 1280)


@pytest.fixture(params=WIDTHS, ids=[f"{width}px" for width in WIDTHS])
def sized_context(request: pytest.FixtureRequest, chromium: Browser) -> Iterator[BrowserContext]:
    """Like ``browser_context``, once per width in WIDTHS."""
    context = chromium.new_context(viewport={"width": request.param, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    try:
        yield context
    finally:
        context.close()


# How long the in-process worker's consumer waits on Redis at a time (kombu's BRPOP timeout, 1 s unless
# the transport's polling_interval sets it): stopping the worker waits for the BRPOP in flight.
WORKER_POLL_S = 0.05


@contextmanager
def quick_generation_worker(*, streaming: bool) -> Iterator[None]:
    """``battles.generation_worker.generation_worker`` (one worker for every queue, 2 threads) for one
    test, its consumer polling
    Redis every WORKER_POLL_S: stopping it at the test's end then takes milliseconds instead of up to a
    second (an idle worker's stop measured 0.15-0.9 s, all of it the BRPOP's wait). The same broker,
    queues and tasks; the option holds while the block runs, when the worker's consumer connects (a
    publisher's connection made meanwhile never polls, so it changes nothing there)."""
    from celery import current_app

    from battles.generation_worker import generation_worker

    previous = current_app.conf.broker_transport_options
    current_app.conf.broker_transport_options = {**previous, "polling_interval": WORKER_POLL_S}
    try:
        # One worker for every queue: two on the Redis broker were seen to hang in stop between tests.
        with generation_worker(concurrency=2, streaming=streaming, separate=False):
            yield
    finally:
        current_app.conf.broker_transport_options = previous


@dataclass
class AsgiServer:
    url: str


@pytest.fixture
def asgi_live_server(transactional_db: None) -> Iterator[AsgiServer]:
    """The platform under ASGI as production serves it (uvicorn; arena.asgi's application), on the test
    database, with a real Celery worker for the ``generation`` queue in this process (the one the demo
    runs): a live battle's page streams server-sent events, which pytest-django's WSGI live server
    cannot (it would collect the whole stream before sending any of it)."""
    import socket
    import threading
    import time

    import uvicorn
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
    from django.db import connections

    from core.asgi import web_application

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        # arena.asgi's application, as production builds it (the stubs want Django's handler; any ASGI app serves)
        ASGIStaticFilesHandler(web_application()),  # type: ignore[arg-type]
        host="127.0.0.1",
        port=port,
        lifespan="off",
        log_level="warning",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="arena-asgi-test-server", daemon=True)
    with quick_generation_worker(streaming=True):
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.05)
        try:
            yield AsgiServer(f"http://127.0.0.1:{port}")
        finally:
            server.should_exit = True
            thread.join(10)
    connections.close_all()


@pytest.fixture(autouse=True)
def generation_worker_for_live_server(request: pytest.FixtureRequest) -> Iterator[None]:
    """Battles are generated by the ``generation`` queue's workers (the buffer, the "preparing" page): a
    test against pytest-django's live server gets one in this process. Not streaming: that WSGI server
    would hold a server-sent events stream back until it ended (``asgi_live_server`` streams)."""
    if "live_server" not in request.fixturenames:
        yield
        return
    with quick_generation_worker(streaming=False):
        yield
