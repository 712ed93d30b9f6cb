"""The managers' console in a real browser, on a phone and a desktop: the rough edges a new manager
met — the organisation preselected, a default version label, the campaign's link to its leaderboard,
and a warning (never the server's own words) when Triton does not have an endpoint's model ready."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import AbstractUser
from django.urls import reverse
from django.utils import timezone
from playwright.sync_api import BrowserContext
from pytest_django.live_server_helper import LiveServer

from battles.models import Competitor
from serving.models import ModelEndpoint
from tests.conftest import Tenant

from .conftest import logged_in

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_console_preselects_the_organisation_defaults_the_version_and_links_the_leaderboard(
    live_server: LiveServer,
    acme: Tenant,
    alice: AbstractUser,
    sized_context: BrowserContext,
    screenshot_dir: Path,
) -> None:
    logged_in(sized_context, live_server.url, alice)
    page = sized_context.new_page()
    width = page.viewport_size["width"] if page.viewport_size else 0

    # A new endpoint: the only organisation alice manages is already chosen. Nothing listens at the
    # address, so the console warns in its own words after saving.
    page.goto(live_server.url + reverse("admin:serving_modelendpoint_add"))
    organisation = page.locator("select#id_organization")
    assert organisation.input_value() == str(acme.organization.pk)
    page.fill("#id_name", "Acme-docs")
    page.fill("#id_url", "127.0.0.1:9")
    page.fill("#id_model_name", "docs-markdown")
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/serving/modelendpoint/")
    warning = page.locator(".messagelist .warning").inner_text()
    assert "docs-markdown" in warning and "Triton" in warning
    page.screenshot(path=str(screenshot_dir / f"console-endpoint-warning-{width}.png"), full_page=True)
    endpoint = ModelEndpoint.objects.get(name="Acme-docs")

    # The campaign: a competitor added without a version label gets today's date; the page links to
    # the leaderboard.
    page.goto(live_server.url + reverse("admin:battles_campaign_change", args=[acme.campaign.pk]))
    leaderboard = page.get_by_role("link", name="leaderboard", exact=False).first
    assert leaderboard.get_attribute("href") == reverse("ranking:leaderboard", args=[acme.campaign.pk])
    page.get_by_text("Add another Competitor", exact=False).first.click()
    new_row = page.locator("select[name$='-endpoint']:not([name*='__prefix__'])").last
    new_row.select_option(str(endpoint.pk))
    page.locator("input[name=_save]").click()
    page.wait_for_url("**/battles/campaign/")
    added = Competitor.objects.get(campaign=acme.campaign, endpoint=endpoint)
    assert added.version_label == timezone.localdate().isoformat()
    page.screenshot(path=str(screenshot_dir / f"console-campaigns-{width}.png"), full_page=True)
