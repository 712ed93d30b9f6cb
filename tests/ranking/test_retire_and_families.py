"""Retire, never delete; and the model-family disclosure next to every board.

A competitor with votes cannot be deleted (service, campaign page, competitor page: a clear message,
never a ProtectedError page); the *Retire* action stops its battles for good with an audit row and keeps
its history: it stays on every board marked retired (page, API, published board, CSV). Next to every
board the campaign says how many variants of each model family it tested, retired ones counted, a
competitor without a family counting as its own model name."""

from __future__ import annotations

import csv
import io
import random

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from battles import selectors, services
from battles.models import Battle, Campaign, Competitor, Prompt
from core.errors import Conflict
from ranking.selectors import family_disclosure
from ranking.services import board_publish, leaderboards_recompute
from raters.models import AuditAction, AuditEvent
from tests.conftest import Tenant, api_client
from tests.factories import CompetitorFactory, ModelEndpointFactory
from tests.raters.admin_forms import campaign_form_data, form_errors

from .synth import votes_write

pytestmark = pytest.mark.django_db

NOTICE = (
    "3 variants of llama were tested here (1 retired); the best of several variants of one family is favoured "
    "by selection."
)


@pytest.fixture
def voted(acme: Tenant, bob: User) -> tuple[Campaign, Competitor]:
    """Acme's campaign with a third competitor, three llama variants among the four (one family left blank:
    its model name), votes between all of them, and the third competitor retired."""
    campaign = acme.campaign
    url = acme.left.endpoint.url  # type: ignore[union-attr]
    third = CompetitorFactory.create(
        campaign=campaign,
        endpoint=ModelEndpointFactory(organization=acme.organization, name="Llama-3-8B", url=url),
        version_label="2026-10",
        family="Llama",  # case does not split a family
    )
    fourth = CompetitorFactory.create(
        campaign=campaign,
        endpoint=ModelEndpointFactory(organization=acme.organization, name="Qwen-7B", url=url),
        version_label="1",
    )
    Competitor.objects.filter(pk__in=[acme.left.pk, acme.right.pk]).update(family="llama")
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[bob],
        prompts=list(Prompt.objects.filter(campaign=campaign)),
        competitors=[acme.left, acme.right, third, fourth],
        strengths=(2.0, 1.0, 0.7, 0.5),
        n=160,
        seed=5,
    )
    Campaign.objects.filter(pk=campaign.pk).update(ranking_min_votes=10, ranking_bootstrap_rounds=20, min_decision_ms=0)
    campaign.refresh_from_db()
    return campaign, third


def test_a_competitor_with_votes_cannot_be_deleted_only_retired(voted, alice: User, bob: User, acme: Tenant):
    campaign, third = voted
    with pytest.raises(Conflict, match="Retire it instead"):
        services.competitor_delete(competitor=third, actor=alice)
    open_battle = Battle.objects.create(
        organization=acme.organization,
        campaign=campaign,
        rater=bob,
        pool=acme.pool,
        prompt=Prompt.objects.filter(campaign=campaign).earliest("id"),
        left=third,
        right=acme.left,
        status=Battle.Status.READY,
        ready_at=timezone.now(),
    )
    battles_before = Battle.objects.filter(left=third).count()
    services.competitor_retire(competitor=third, actor=alice)
    third.refresh_from_db()
    assert third.retired and not third.active and third.retired_at is not None
    open_battle.refresh_from_db()
    assert open_battle.status == Battle.Status.VOID  # no new battles, not even one handed out already
    assert Battle.objects.filter(left=third).count() == battles_before  # history kept
    event = AuditEvent.objects.get(action=AuditAction.COMPETITOR_RETIRED, object_id=str(third.pk))
    assert event.actor == alice and event.data["battles_voided"] == 1
    with pytest.raises(Conflict, match="retired already"):
        services.competitor_retire(competitor=third, actor=alice)
    third.active = True  # retiring is final
    with pytest.raises(Conflict, match="retiring is final"):
        services.competitor_save(competitor=third, actor=alice, changed=["active"])
    picked = {selectors.pair_pick(campaign=campaign, rng=random.Random(seed)) for seed in range(30)}
    assert all(third not in pair for pair in picked if pair)


def test_the_console_refuses_the_delete_in_words_and_retires_with_an_audit_row(
    voted, alice: User, alice_client: Client
):
    campaign, third = voted
    # The campaign page's inline delete box: a form error, not Django's protected-objects page.
    data = campaign_form_data(campaign, competitor_changes={third.pk: {"DELETE": True}})
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[campaign.pk]), data)
    assert response.status_code == 200 and "Retire it instead" in form_errors(response)
    assert Competitor.objects.filter(pk=third.pk).exists()
    # The competitor's own delete page: sent back with the message.
    response = alice_client.get(reverse("admin:battles_competitor_delete", args=[third.pk]), follow=True)
    assert response.status_code == 200 and "Retire it instead" in response.content.decode()
    response = alice_client.post(reverse("admin:battles_competitor_delete", args=[third.pk]), {"post": "yes"})
    assert response.status_code == 302 and Competitor.objects.filter(pk=third.pk).exists()
    # No bulk delete; the Retire action instead.
    changelist = reverse("admin:battles_competitor_changelist")
    page = alice_client.get(changelist).content.decode()
    assert "delete_selected" not in page and "retire_competitors" in page
    response = alice_client.post(
        changelist, {"action": "retire_competitors", "_selected_action": [third.pk]}, follow=True
    )
    assert "Retired: " in response.content.decode()
    third.refresh_from_db()
    assert third.retired
    assert AuditEvent.objects.filter(action=AuditAction.COMPETITOR_RETIRED, actor=alice).count() == 1
    # Ticking 'active' again is refused on the form.
    data = campaign_form_data(campaign, competitor_changes={third.pk: {"active": True}})
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[campaign.pk]), data)
    assert response.status_code == 200 and "retiring is final" in form_errors(response)


def test_managers_set_the_family_in_the_console(acme: Tenant, alice_client: Client):
    data = campaign_form_data(acme.campaign, competitor_changes={acme.left.pk: {"family": "zen"}})
    response = alice_client.post(reverse("admin:battles_campaign_change", args=[acme.campaign.pk]), data)
    assert response.status_code == 302, form_errors(response)
    acme.left.refresh_from_db()
    assert acme.left.family == "zen"
    response = alice_client.post(
        reverse("admin:battles_competitor_change", args=[acme.right.pk]),
        {"endpoint": acme.right.endpoint_id, "version_label": acme.right.version_label, "family": "trigram",
         "active": "on"},
    )  # fmt: skip
    assert response.status_code == 302, form_errors(response)
    acme.right.refresh_from_db()
    assert acme.right.family == "trigram"
    assert AuditEvent.objects.filter(action=AuditAction.COMPETITOR_CHANGED, data__fields=["family"]).count() == 2


def test_family_disclosure_counts_variants_retired_included_and_blank_as_model_name(voted):
    campaign, third = voted
    services.competitor_retire(competitor=third, actor=None)
    disclosure = family_disclosure(campaign=campaign)
    families = {f["family"]: f for f in disclosure["families"]}
    assert families["llama"]["variants"] == 3 and families["llama"]["retired"] == 1
    assert families["qwen-7b"]["variants"] == 1  # no family: its own model name
    assert disclosure["notice"] == NOTICE
    Competitor.objects.filter(campaign=campaign).update(family="")
    assert family_disclosure(campaign=campaign)["notice"] == ""  # every "family" has one variant now


def test_retired_competitors_stay_on_every_board_marked_with_the_family_notice(
    voted, alice: User, alice_client: Client
):
    campaign, third = voted
    services.competitor_retire(competitor=third, actor=alice)
    leaderboards_recompute(campaign_id=campaign.pk)
    # The page.
    html = alice_client.get(reverse("ranking:leaderboard", args=[campaign.pk])).content.decode()
    row = html.split(f'data-competitor="{third.pk}"')[1].split("</tr>")[0]
    assert '<span class="badge">retired</span>' in row
    assert NOTICE in html
    # The API (latest and a version).
    client = api_client(campaign.organization)
    body = client.get(reverse("leaderboard", args=[campaign.pk])).json()
    rows = {r["competitor_id"]: r for r in body["rows"]}
    assert rows[third.pk]["retired"] is True and rows[third.pk]["votes"] > 0 and rows[third.pk]["score"] is not None
    assert body["families"]["notice"] == NOTICE
    assert body["families"]["families"][0] == {
        "family": "llama",
        "variants": 3,
        "retired": 1,
        "competitors": sorted([third.pk, *(c.pk for c in campaign.competitors.filter(family="llama"))]),
    }
    version = client.get(reverse("leaderboard-version", args=[campaign.pk, body["version"]])).json()
    assert version["families"]["notice"] == NOTICE
    competitors = client.get(reverse("api:competitors", args=[campaign.pk])).json()["results"]
    mine = next(c for c in competitors if c["id"] == third.pk)
    assert mine["retired"] is True and mine["family"] == "llama" and mine["retired_at"]
    # The CSV.
    csv_url = reverse("ranking:leaderboard-download", args=[campaign.pk, body["version"], "csv"])
    table = list(csv.DictReader(io.StringIO(alice_client.get(csv_url).content.decode())))
    by_id = {int(r["competitor_id"]): r for r in table}
    assert by_id[third.pk]["retired"] == "True" and by_id[third.pk]["family"] == "llama"
    assert sum(r["retired"] == "True" for r in table) == 1
    # The published board (page and JSON).
    publication, _ = board_publish(campaign=campaign, actor=alice)
    public = Client().get(f"/boards/{publication.slug}/").content.decode()
    assert "retired" in public.split(f'data-competitor="{third.pk}"')[1].split("</tr>")[0]
    assert NOTICE in public
    data = Client().get(f"/api/v1/public/boards/{publication.slug}/").json()
    assert data["families"]["notice"] == NOTICE
    assert [r["retired"] for r in data["rows"] if r["competitor_id"] == third.pk] == [True]
