"""``manage.py demo`` as a new user runs it: DEBUG off unless ``--debug``, so a missing page is the
site's own 404 (never Django's debug page), and the stylesheet is still served (by WhiteNoise).

The command runs as a child process, as ``scripts/demo`` runs it, on its own SQLite file and free ports."""

from __future__ import annotations

import http.cookiejar
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from battles.demo import DEMO_MANAGER, DEMO_PASSWORD, DEMO_RATER

pytestmark = [pytest.mark.xdist_group("demo-server"), pytest.mark.server, pytest.mark.triton]

ROOT = Path(__file__).resolve().parents[2]
DEBUG_PAGE_MARKERS = ("Traceback", "DEBUG = True", "Using the URLconf", "technical_404", "settings.py")


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class Demo:
    url: str
    opener: urllib.request.OpenerDirector

    def get(self, path: str) -> tuple[int, str]:
        try:
            with self.opener.open(self.url + path, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def log_in(self, email: str, password: str) -> None:
        _, page = self.get("/accounts/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, page[:500]
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), "login": email, "password": password})
        request = urllib.request.Request(
            self.url + "/accounts/login/", data=data.encode(), headers={"Referer": self.url + "/accounts/login/"}
        )
        with self.opener.open(request, timeout=30) as response:
            assert response.url.rstrip("/") == self.url, response.url


def _start(tmp_path: Path, *args: str) -> Iterator[str]:
    """The demo running (its URL) until the generator is closed, then stopped with Ctrl-C."""
    web, http_port, grpc_port = _free_ports(3)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "arena.settings.local",
        "PYTHONUNBUFFERED": "1",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "ARENA_TRITON_HTTP_PORT": str(http_port),
        "ARENA_TRITON_GRPC_PORT": str(grpc_port),
    }
    env.pop("REDIS_URL", None)
    env.pop("DEBUG", None)
    env.pop("ARENA_REAL_MODELS", None)  # CI sets it; this demo is the plain one
    process = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--port", str(web), *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{web}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            try:
                with urllib.request.urlopen(url + "/accounts/login/", timeout=2):
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.5)
        else:
            process.kill()
            pytest.fail(f"the demo did not come up; output:\n{process.communicate()[0][-3000:]}")
        yield url
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)  # Ctrl-C, as a person stops it
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _browser(url: str) -> Demo:
    """A visitor of its own: a fresh cookie jar (no session, no CSRF cookie of another test)."""
    return Demo(url, urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())))


@pytest.fixture(scope="module")
def demo_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One demo (DEBUG off) for the module's tests that use it: each reads pages as a visitor of its own and
    what one writes (the streaming test's battle, as a rater) is not what the other reads (the error
    pages, the stylesheet, a leaderboard that does not exist), so they need no fresh process each."""
    yield from _start(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def demo(demo_url: str) -> Demo:
    return _browser(demo_url)


@pytest.fixture
def demo_debug(tmp_path: Path) -> Iterator[Demo]:
    for url in _start(tmp_path, "--debug"):
        yield _browser(url)


def test_demo_runs_with_debug_off_shows_the_sites_error_pages_and_serves_static_files(demo: Demo) -> None:
    status, css = demo.get("/static/arena/arena.css")
    assert status == 200 and ".pane" in css

    status, page = demo.get("/no/such/page/")
    assert status == 404
    assert "Page not found" in page and "arena/arena.css" in page  # the site's layout
    for marker in DEBUG_PAGE_MARKERS:
        assert marker not in page, marker

    # The case a new user met: a leaderboard that does not exist, asked for by the manager.
    demo.log_in(DEMO_MANAGER, DEMO_PASSWORD)
    status, page = demo.get("/leaderboard/987654/")
    assert status == 404 and "Page not found" in page and "Log out" in page
    for marker in DEBUG_PAGE_MARKERS:
        assert marker not in page, marker


def test_demo_with_debug_flag_shows_the_debug_page(demo_debug: Demo) -> None:
    status, page = demo_debug.get("/no/such/page/")
    assert status == 404 and "Using the URLconf" in page
    status, css = demo_debug.get("/static/arena/arena.css")
    assert status == 200 and ".pane" in css


def test_demo_hands_out_a_ready_battle_at_once_and_streams_a_typed_prompt_without_redis(demo: Demo) -> None:
    """The demo fills its buffer before it serves: the rater's first battle is ready at once, both answers
    on the page and the vote open (issue 22.4: it used to start empty, 'Preparing' for the first battle).
    It serves ASGI (uvicorn) and runs the workers in its process: a typed prompt returns at once to a
    battle page that streams, and the stream ends with both answers and the vote."""
    demo.log_in(DEMO_RATER, DEMO_PASSWORD)
    _, home = demo.get("/")
    campaign = re.search(r'href="/c/(\d+)/"', home)
    assert campaign, home[:1000]
    _, page = demo.get(f"/c/{campaign.group(1)}/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token
    data = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1)})
    request = urllib.request.Request(
        f"{demo.url}/c/{campaign.group(1)}/next/", data=data.encode(), headers={"Referer": demo.url + "/"}
    )
    with demo.opener.open(request, timeout=30) as response:
        first_url = response.url
        first = response.read().decode()
    assert "Preparing your next battle" not in first and "data-stream=" not in first
    assert "Answer A" in first and "Answer B" in first
    assert len(re.findall(r'name="choice"', first)) == 4 and " disabled>" not in first
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', first)
    assert token
    vote = urllib.request.Request(
        first_url + "vote/",
        data=urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), "choice": "left"}).encode(),
        headers={"Referer": first_url},
    )
    with demo.opener.open(vote, timeout=30) as response:
        assert "You voted" in response.read().decode()
    data = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), "prompt": "Why is the sky blue today?"})
    request = urllib.request.Request(
        f"{demo.url}/c/{campaign.group(1)}/next/", data=data.encode(), headers={"Referer": demo.url + "/"}
    )
    with demo.opener.open(request, timeout=30) as response:
        battle_url = response.url
        html = response.read().decode()
    assert re.search(r"/b/[0-9a-f-]{36}/$", battle_url), battle_url
    # Generated by the worker, not the request: the page streams, its four vote buttons closed until the end
    # (and the demo's box for a second turn with them).
    assert "data-stream=" in html and len(re.findall(r'name="choice"[^>]* disabled>', html)) == 4
    assert re.search(r'<textarea id="continue-text"[^>]* disabled>', html)
    events = []
    with demo.opener.open(battle_url + "stream", timeout=60) as stream:
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        for raw in stream:
            line = raw.decode().rstrip("\n")
            if line.startswith("event: "):
                events.append(line[len("event: ") :])
                if events[-1] in ("complete", "void"):
                    break
    assert events[-1] == "complete" and "frame" in events, events
    _, after = demo.get(battle_url[len(demo.url) :])
    assert 'id="vote-form"' in after and " disabled>" not in after
