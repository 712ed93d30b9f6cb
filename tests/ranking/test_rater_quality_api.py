"""GET /api/v1/campaigns/<id>/rater-quality/: agreement on shared items (the copies of one answer pair
shown to several raters) and outlier raters, from the vote log; tenancy."""

from __future__ import annotations

import numpy as np
import pytest
from django.test import Client
from django.urls import reverse

from battles.models import Battle, Prompt
from ranking.quality import item_categories
from ranking.selectors import rater_quality
from tests.conftest import api_client
from tests.factories import CompetitorFactory, ModelEndpointFactory, UserFactory

from .synth import votes_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared(acme, bob):  # type: ignore[no-untyped-def]
    """Acme's campaign: three competitors of clearly different strength, five honest raters (bob among
    them) voting on shared items (copies of one answer pair), and one rater who always prefers the
    weaker side, on the same items."""
    campaign = acme.campaign
    endpoint = ModelEndpointFactory(organization=acme.organization, name="third")
    competitors = [
        acme.left,
        acme.right,
        CompetitorFactory.create(campaign=campaign, endpoint=endpoint, version_label="1"),
    ]
    prompts = list(Prompt.objects.filter(campaign=campaign))[:2]
    honest = [bob] + [UserFactory.create() for _ in range(4)]
    for member in honest:
        acme.pool.members.add(member)
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=honest,
        prompts=prompts,
        competitors=competitors,
        strengths=(30.0, 3.0, 0.3),
        n=400,
        seed=1,
        tie_rate=0.05,
        shared=True,
    )
    adversary = UserFactory.create()
    acme.pool.members.add(adversary)
    votes_write(
        campaign=campaign,
        pool=acme.pool,
        raters=[adversary],
        prompts=prompts,
        competitors=competitors,
        strengths=(0.3, 3.0, 30.0),  # the reverse order: votes for the weaker side
        n=60,
        seed=2,
        tie_rate=0.0,
        shared=True,
    )
    return campaign, honest, adversary


def _url(campaign_id: int) -> str:
    return reverse("api-rater-quality", args=[campaign_id])


def test_item_key_normalises_sides() -> None:
    key = np.array([5, 5, 5, 6])
    left = np.array([1, 2, 1, 1])
    right = np.array([2, 1, 2, 2])
    outcome = np.array([0, 1, 2, 0])  # 1 won; 1 won (shown right); tie; another item
    item, category = item_categories(key, left, right, outcome)
    assert item[0] == item[1] == item[2] != item[3]
    assert category.tolist() == [0, 0, 2, 0]


def test_rater_quality_for_an_owner(shared, alice_client: Client, acme) -> None:  # type: ignore[no-untyped-def]
    campaign, honest, adversary = shared
    response = alice_client.get(_url(campaign.pk))
    assert response.status_code == 200
    body = response.json()
    assert body["campaign_id"] == campaign.pk and body["votes"] == 460
    overall = body["overall"]
    # Items are the shared battles' keys: those with two raters or more count, whatever their prompt.
    from collections import Counter

    raters_of = Counter(Battle.objects.filter(campaign=campaign).values_list("item_key", flat=True))
    assert overall["shared_items"] == sum(1 for n in raters_of.values() if n >= 2) > 6
    assert overall["items"] == len(raters_of)
    assert overall["raters"] == 6
    assert overall["repeat_votes"] == 0  # the copies of one item go to different raters
    fleiss, alpha = overall["fleiss_kappa"], overall["krippendorff_alpha"]
    assert fleiss["value"] is not None and fleiss["lower"] <= fleiss["value"] <= fleiss["upper"]
    assert alpha["value"] is not None and "bootstrap" in alpha["interval_method"]
    assert fleiss["raters_per_item"] == "varying"
    # Cohen's kappa for the pairs with at least min_common items in common: all 15 at a low bar, none
    # at a bar above any pair's common items.
    pairs = alice_client.get(_url(campaign.pk) + "?min_common=2").json()["overall"]["rater_pairs"]
    assert len(pairs) == 15
    assert {p["rater_a"] for p in pairs} | {p["rater_b"] for p in pairs} == {u.pk for u in honest} | {adversary.pk}
    assert alice_client.get(_url(campaign.pk) + "?min_common=90").json()["overall"]["rater_pairs"] == []

    rows = {row["rater_id"]: row for row in body["raters"]}
    assert set(rows) == {u.pk for u in honest} | {adversary.pk}
    assert rows[adversary.pk]["flagged"] is True
    assert rows[adversary.pk]["votes_to_flag"] is not None and rows[adversary.pk]["votes_to_flag"] <= 30
    assert rows[adversary.pk]["flag_vote_id"] is not None
    assert not any(rows[u.pk]["flagged"] for u in honest)
    assert rows[adversary.pk]["agreement"] < min(rows[u.pk]["agreement"] for u in honest)
    assert body["outliers"] == {**body["outliers"], "alpha": 0.01, "threshold": 100.0, "flagged": 1}

    (pool,) = body["pools"]
    assert pool["pool_id"] == acme.pool.pk and pool["raters"] == 6
    assert pool["fleiss_kappa"]["value"] == pytest.approx(fleiss["value"])


def test_rater_quality_with_read_keys_viewers_and_outsiders(shared, acme, globex, bob_client, charlie_client) -> None:  # type: ignore[no-untyped-def]
    campaign, _, _ = shared
    assert api_client(acme.organization, scope="read").get(_url(campaign.pk)).status_code == 200
    assert api_client(globex.organization, scope="write").get(_url(campaign.pk)).status_code == 404
    assert charlie_client.get(_url(campaign.pk)).status_code == 404
    denied = bob_client.get(_url(campaign.pk))  # a rater sees no one's quality, his own campaign included
    assert denied.status_code == 404 and denied.json()["error"]["code"] == "not_found"
    assert Client().get(_url(campaign.pk)).status_code in (401, 403)
    bad = api_client(acme.organization).get(_url(campaign.pk) + "?alpha=2")
    assert bad.status_code == 400 and "alpha" in bad.json()["error"]["fields"]


def test_no_shared_items_is_not_estimable(acme, alice_client: Client) -> None:  # type: ignore[no-untyped-def]
    body = alice_client.get(_url(acme.campaign.pk)).json()
    assert body["votes"] == 0 and body["raters"] == []
    assert body["overall"]["fleiss_kappa"]["value"] is None
    assert "not estimable" in body["overall"]["krippendorff_alpha"]["reason"]
    assert body["overall"]["raw_agreement"] is None


def test_selector_groups_pool_members(shared, acme) -> None:  # type: ignore[no-untyped-def]
    campaign, honest, adversary = shared
    acme.pool.members.remove(adversary)
    report = rater_quality(campaign=campaign)
    (pool,) = report["pools"]
    assert pool["raters"] == len(honest)
    # Without the adversary the pool agrees more than the campaign as a whole.
    assert pool["krippendorff_alpha"]["value"] > report["overall"]["krippendorff_alpha"]["value"]
