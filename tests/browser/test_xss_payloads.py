"""XSS payloads in prompts and answers, checked in the real browser (Playwright + Debian's Chromium): the
pool prompts, a prompt the rater types, and both models' answers carry the payloads; the rater's battle
page before and after the vote, and the manager's console pages listing and showing them, are opened.
No dialog fires (alert, confirm, prompt), no payload's script sets its marker, and the pages' DOM
(what the browser built, not the server's text) has no script-capable markup from the payloads.

The Content-Security-Policy would block most inline handlers even if sanitising failed; the DOM check
is what shows the sanitiser itself holds, the dialog check that the two together do."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import AbstractUser
from django.urls import reverse
from playwright.sync_api import BrowserContext, Dialog, Page
from pytest_django.live_server_helper import LiveServer

from battles.models import Battle, Campaign, Prompt
from tests.conftest import Tenant
from tests.html_safety import unsafe_markup
from tests.planting import answers_planted, planting

from .conftest import logged_in

pytestmark = [pytest.mark.triton, pytest.mark.browser, pytest.mark.reliability]

# Each sets window.__xss (or opens a dialog) if it ever runs.
PAYLOADS = [
    "<script>alert(1);window.__xss=1</script>",
    '<img src=x onerror="alert(2);window.__xss=2">',
    '<svg onload="alert(3)">',
    "<svg><script>alert(4)</script></svg>",
    '"><script>alert(5)</script>',
    "'><img src=x onerror=alert(6)>",
    '<iframe src="javascript:alert(7)"></iframe>',
    "[click](javascript:alert(8))",
    "[x](JaVaScRiPt:alert(9))",
    "![x](javascript:alert(10))",
    '<a href="javascript:alert(11)">link</a>',
    '<body onload="alert(12)">',
    '<details open ontoggle="alert(13)">',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(14)>",
    '<object data="data:text/html,<script>alert(15)</script>"></object>',
    "`<script>alert(16)</script>`",
    "<scr<script>ipt>alert(17)</scr</script>ipt>",
]
JOINED = "\n\n".join(PAYLOADS)


def _watch(page: Page, fired: list[str]) -> None:
    def on_dialog(dialog: Dialog) -> None:
        fired.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)


def _check(page: Page, url: str, fired: list[str]) -> None:
    page.goto(url)
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)  # onload / ontoggle / onerror handlers would have run by now
    assert page.evaluate("() => window.__xss === undefined"), url
    main = page.evaluate("() => document.body.innerHTML")
    problems = [p for p in unsafe_markup(main) if "alert" in p or "javascript" in p.lower() or "xss" in p]
    assert problems == [], (url, problems)
    assert fired == [], (url, fired)


def test_no_payload_runs_in_the_browser(
    vote_log_purge: None,
    triton_server: Any,
    live_server: LiveServer,
    acme: Tenant,
    alice: AbstractUser,
    bob: AbstractUser,
    browser_context: BrowserContext,  # noqa: F811  # the imported fixture
) -> None:
    with planting():
        Prompt.objects.filter(campaign=acme.campaign).update(text=JOINED)
    Campaign.objects.filter(pk=acme.campaign.pk).update(allow_rater_prompts=True)
    logged_in(browser_context, live_server.url, bob)
    page = browser_context.new_page()
    fired: list[str] = []
    _watch(page, fired)

    # A pool prompt carrying the payloads: the battle page, its answers replaced by the payloads too.
    page.goto(f"{live_server.url}/c/{acme.campaign.pk}/")
    page.locator("#start").click()
    page.wait_for_url("**/b/*/")
    battle = Battle.objects.order_by("-created_at").first()
    assert battle is not None
    page.wait_for_function("() => !document.getElementById('preparing')", timeout=30000)
    with planting():
        answers_planted(battle.generations, JOINED)
    url = live_server.url + reverse("battles:battle", args=[battle.pk])
    _check(page, url, fired)
    assert page.inner_text(".battle").count("<script>alert(1)") >= 3  # prompt and both answers, as text
    page.locator('button[name="choice"][value="left"]').click()
    page.wait_for_load_state("load")
    _check(page, url, fired)  # revealed: the models' names and the answers again

    # A prompt the rater types, with the payloads; its battle page once both models echoed it.
    page.goto(f"{live_server.url}/c/{acme.campaign.pk}/")
    page.locator("#own-prompt").fill("Summarise: " + JOINED)
    page.locator("#own-prompt-form button[type='submit']").click()
    page.wait_for_url("**/b/*/")
    page.wait_for_function("() => !document.getElementById('preparing')", timeout=30000)
    _check(page, page.url, fired)

    # The manager's console: the prompts' list and a battle's page.
    assert browser_context.browser is not None
    manager = browser_context.browser.new_context()
    logged_in(manager, live_server.url, alice)
    console = manager.new_page()
    _watch(console, fired)
    prompt = Prompt.objects.filter(campaign=acme.campaign).first()
    assert prompt is not None
    for path in (
        reverse("admin:battles_prompt_changelist"),
        reverse("admin:battles_prompt_change", args=[prompt.pk]),
        reverse("admin:battles_battle_change", args=[battle.pk]),
    ):
        _check(console, live_server.url + path, fired)
    manager.close()
