"""Retake the manual's screenshots from the real demo: ``.venv/bin/python docs/screenshots.py``.

It starts ``manage.py demo`` on a free port with a fresh SQLite database in a temporary folder (the
demo's own ``var/arena.sqlite3`` is left alone) and its Triton on free ports, then drives Debian's
Chromium with Playwright:

1. logs in as the demo rater, opens the campaign, starts rating and screenshots the first battle once
   both answers are there (``docs/img/battle.png``: what a rater sees before the vote);
2. votes on ``--votes`` battles (waiting past the campaign's minimum decision time, so no vote is
   excluded as too fast): a seeded draw picks the longer answer two times in three, else the shorter one
   or a tie, so the board has a winner and finite intervals;
3. logs in as the demo manager and screenshots the campaign's leaderboard (``docs/img/leaderboard.png``)
   once the board counts every vote (the demo's in-process worker recomputes it 30 s after the first
   vote it has not counted: ``ARENA_RANKING_DEBOUNCE_S``).

The demo and its Triton are stopped at the end, whatever happened. Needs the set-up of ``scripts/demo``
(both virtual environments) and a Chromium (``/usr/bin/chromium``, or ``--chromium PATH``).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img"
RATER = "rater@arena.demo"
MANAGER = "manager@arena.demo"
PASSWORD = "arena-demo-2026"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTH = 1200
TIMEOUT_MS = 60_000
# The demo campaign's minimum decision time is 1.5 s: a faster vote is stored but left out of the board.
DECIDE_S = 2.0
# The demo's worker recomputes the board 30 s after the first vote it has not counted yet.
BOARD_WAIT_S = 120
SEED = 2026


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def demo_server(log: Path) -> Iterator[str]:
    """``manage.py demo`` in its own process group on free ports; yields its address, stops it (and its
    Triton) on the way out."""
    port = free_port()
    workdir = Path(tempfile.mkdtemp(prefix="arena-screenshots-"))
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        DATABASE_URL=f"sqlite:///{workdir / 'demo.sqlite3'}",
        ARENA_TRITON_HTTP_PORT=str(free_port()),
        ARENA_TRITON_GRPC_PORT=str(free_port()),
    )
    env.pop("ARENA_MODEL_HOSTS", None)  # arena.settings.local then allows exactly the two ports above
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                raise SystemExit(f"the demo exited with {process.returncode}; see {log}")
            try:
                with urllib.request.urlopen(url + "accounts/login/", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"the demo did not answer within 300 s; see {log}")
            time.sleep(1)
        yield url
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)  # uvicorn stops, then the demo stops its Triton
            try:
                process.wait(timeout=45)
            except subprocess.TimeoutExpired:
                pass
        with _ignore_missing():
            os.killpg(process.pid, signal.SIGKILL)  # anything of the group still there (Triton included)
        process.wait()
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def _ignore_missing() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass


def log_in(page: Page, url: str, email: str) -> None:
    page.goto(url + "accounts/login/")
    page.get_by_label("Email").fill(email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign In").click()
    page.wait_for_url(url)


def battle_ready(page: Page) -> None:
    """Wait (through the preparing page's reloads) until the vote buttons are there and enabled."""
    page.locator("#vote-form button[value=left]:not([disabled])").wait_for(state="visible", timeout=TIMEOUT_MS)


def answer_lengths(page: Page) -> tuple[int, int]:
    texts = page.locator(".battle > .panes .pane .md").all_inner_texts()
    return len(texts[0]), len(texts[1])


def rater_session(browser: Browser, url: str, votes: int) -> tuple[int, int]:
    """Screenshot the first battle, vote on ``votes`` battles; return the campaign's id and the votes cast."""
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, url, RATER)
    page.locator("#rate-campaigns a").first.click()
    match = re.search(r"/c/(\d+)/", page.url)
    if match is None:
        raise SystemExit(f"not a campaign page: {page.url}")
    campaign_id = int(match.group(1))
    page.locator("#start").click()
    cast = 0
    rng = random.Random(SEED)
    for number in range(votes):
        battle_ready(page)
        if number == 0:
            page.screenshot(path=str(OUT / "battle.png"), full_page=True)
        time.sleep(DECIDE_S)
        left, right = answer_lengths(page)
        draw = rng.random()
        longer, shorter = ("left", "right") if left >= right else ("right", "left")
        choice = "tie" if draw < 0.1 else longer if draw < 0.75 else shorter
        page.locator(f"#vote-form button[value={choice}]").click()
        page.locator("#result").wait_for()
        cast += 1
        if number + 1 < votes:
            next_button = page.locator("#next-form button")
            if not next_button.count():
                print(f"no next battle after {number + 1} votes (a cap): stopping there")
                break
            next_button.click()
    context.close()
    return campaign_id, cast


def leaderboard(browser: Browser, url: str, campaign_id: int, votes: int) -> None:
    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    log_in(page, url, MANAGER)
    deadline = time.monotonic() + BOARD_WAIT_S
    while True:
        page.goto(f"{url}leaderboard/{campaign_id}/")
        counted = re.search(r"from\s+\d+\s+of\s+(\d+)\s+votes", page.content())
        if counted and int(counted.group(1)) >= votes:
            break
        if time.monotonic() > deadline:
            print(f"the board does not count all {votes} votes after {BOARD_WAIT_S} s: taking it as it is")
            break
        time.sleep(5)
    page.screenshot(path=str(OUT / "leaderboard.png"), full_page=True)
    context.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=20, help="battles to vote on (20: the session cap)")
    parser.add_argument("--chromium", default="/usr/bin/chromium", help="the Chromium binary to drive")
    parser.add_argument("--log", type=Path, default=Path(tempfile.gettempdir()) / "docs_demo.log")
    options = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    with demo_server(options.log) as url, sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=options.chromium, args=CHROMIUM_ARGS)
        try:
            campaign_id, cast = rater_session(browser, url, options.votes)
            leaderboard(browser, url, campaign_id, cast)
        finally:
            browser.close()
    for name in ("battle.png", "leaderboard.png"):
        print(f"{OUT / name}: {(OUT / name).stat().st_size // 1024} KiB")


if __name__ == "__main__":
    main()
