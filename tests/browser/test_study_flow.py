"""A crowd participant's whole visit in a real browser: the vendor's link, the instructions and the
consent, the target number of battles voted with the keyboard (answers from the session's real
Triton server), and the completion page with the code and the link back to the vendor."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse
from playwright.sync_api import BrowserContext, Route, expect
from pytest_django.live_server_helper import LiveServer

from battles.models import Battle, Participant, Vote
from battles.views import STUDY_COMPLETION_REDIRECT_S
from tests.battles.test_study import CODE, PID, SESSION_ID, STUDY_ID, make_study
from tests.conftest import Tenant

pytestmark = [pytest.mark.browser, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]

BATTLE_URL = re.compile(r"/b/[0-9a-f-]{36}/$")


def test_a_prolific_participant_enters_consents_votes_the_target_and_gets_the_code(
    vote_log_purge: None,
    live_server: LiveServer,
    acme: Tenant,
    browser_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    study = make_study(acme, target_votes=2)
    page = browser_context.new_page()
    link = reverse("battles:study_enter", args=[study.slug])
    page.goto(f"{live_server.url}{link}?PROLIFIC_PID={PID}&STUDY_ID={STUDY_ID}&SESSION_ID={SESSION_ID}")
    page.wait_for_url(live_server.url + reverse("battles:study", args=[study.slug]))
    expect(page.locator("#study-progress")).to_have_text("0 of 2 votes")
    expect(page.locator(".instructions")).to_contain_text("Pick the better answer")
    expect(page.locator("#start")).to_have_count(0)  # no battle before consent
    page.screenshot(path=str(screenshot_dir / "arena-study-consent.png"), full_page=True)
    page.get_by_role("button", name="I agree", exact=True).click()
    page.get_by_role("button", name="Start rating").click()

    for number in (1, 2):
        page.wait_for_url(BATTLE_URL)
        expect(page.locator("#vote-form")).to_be_visible()
        expect(page.locator("#study-progress")).to_have_text(f"{number - 1} of 2 votes for this study")
        page.keyboard.press("1")
        expect(page.locator("#result")).to_contain_text("You voted")
        expect(page.locator("#study-progress")).to_have_text(f"{number} of 2 votes for this study")
        if number == 1:
            page.keyboard.press("N")
            page.wait_for_url(lambda url: BATTLE_URL.search(url) is not None and "vote" not in url)

    expect(page.locator("#next-form")).to_have_count(0)
    completion = f"https://app.prolific.com/submissions/complete?cc={CODE}"
    reached: list[str] = []  # the vendor's page, stubbed: nothing outside the machine is reached

    def vendor(route: Route) -> None:
        reached.append(route.request.url)
        route.fulfill(status=200, content_type="text/html", body="<title>Prolific</title>Submission complete")

    page.route("https://app.prolific.com/**", vendor)
    page.get_by_role("link", name="Finish: get your completion code").click()
    page.wait_for_url(live_server.url + reverse("battles:study", args=[study.slug]))
    expect(page.locator("#completion-code")).to_have_text(CODE)
    expect(page.locator("#completion-link")).to_have_attribute("href", completion)
    page.screenshot(path=str(screenshot_dir / "arena-study-complete.png"), full_page=True)
    assert PID not in page.content()

    participant = Participant.objects.get(study=study)
    assert participant.status == Participant.Status.COMPLETED and participant.consented_at is not None
    assert Vote.objects.filter(rater=participant.user).count() == 2
    # Left alone, the completed page takes the browser on to the vendor's completion URL by itself.
    page.wait_for_url(completion, timeout=(STUDY_COMPLETION_REDIRECT_S + 10) * 1000)
    assert reached == [completion]


def test_a_participant_leaves_early_and_their_battle_is_withdrawn(
    live_server: LiveServer, acme: Tenant, browser_context: BrowserContext
) -> None:
    study = make_study(acme, consent_text="")
    page = browser_context.new_page()
    link = reverse("battles:study_enter", args=[study.slug])
    page.goto(f"{live_server.url}{link}?PROLIFIC_PID={PID}&STUDY_ID={STUDY_ID}&SESSION_ID={SESSION_ID}")
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(BATTLE_URL)
    expect(page.locator("#leave")).to_be_hidden()  # behind a disclosure: one stray click does not end it
    page.get_by_text("Leave the study", exact=True).click()
    page.get_by_role("button", name="Leave the study now").click()
    page.wait_for_url(live_server.url + reverse("battles:study", args=[study.slug]))
    expect(page.locator("#study h1")).to_have_text("You left the study")
    participant = Participant.objects.get(study=study)
    assert participant.status == Participant.Status.LEFT
    assert set(Battle.objects.filter(rater=participant.user).values_list("status", flat=True)) == {"void"}
