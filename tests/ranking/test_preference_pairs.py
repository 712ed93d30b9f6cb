"""Preference pairs for reward-model / DPO training, and their length audit."""

from __future__ import annotations

import json
import math

import pytest

from battles import services, tasks
from battles.exporting import VoteFilters
from battles.models import ExportJob
from ranking import selectors
from ranking.models import LeaderboardSnapshot
from raters.models import RaterFlag
from tests.battles.export_world import vote_make
from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def world(acme, bob):  # type: ignore[no-untyped-def]
    """Winners on both sides, one of them swapped, a multi-turn one; and votes each rule excludes."""
    acme.campaign.min_decision_ms = 1000
    acme.campaign.save()
    flagged = UserFactory.create()
    acme.pool.members.add(flagged)
    RaterFlag.objects.create(organization=acme.organization, rater=flagged, reason="a script")
    kept = [
        vote_make(acme, rater=bob, choice="left", left_tokens=30, right_tokens=10, texts=("long one", "short")),
        vote_make(acme, rater=bob, choice="right", left_tokens=30, right_tokens=10, swap=True),
        vote_make(acme, rater=bob, choice="right", left_tokens=5, right_tokens=5, turns=2),
    ]
    dropped = {
        "tie": vote_make(acme, rater=bob, choice="tie"),
        "both_bad": vote_make(acme, rater=bob, choice="both_bad"),
        "too_fast": vote_make(acme, rater=bob, choice="left", decision_ms=300),
        "identity_leak": vote_make(acme, rater=bob, choice="left", identity=True),
        "flagged_rater": vote_make(acme, rater=flagged, choice="right"),
    }
    return kept, dropped


def test_pairs_leave_out_ties_both_bad_and_excluded_votes(acme, world):
    kept, _ = world
    rows = list(selectors.preference_pairs(campaign=acme.campaign))
    assert [r["vote_id"] for r in rows] == [v.pk for v in kept]
    first, swapped, multi = rows
    assert (first["prompt"], first["chosen"], first["rejected"]) == (kept[0].prompt.text, "long one", "short")
    assert first["chosen_model"] == acme.left.endpoint.name and first["rejected_model"] == acme.right.endpoint.name
    assert first["system_prompt"] == "Be brief." and first["source"] == "pool" and first["category"] == "knowledge"
    # Swapped: the right side was acme.left, and it won.
    assert swapped["chosen_side"] == "right" and swapped["chosen_competitor_id"] == acme.left.pk
    assert swapped["chosen"] == "right answer 0" and swapped["rejected"] == "left answer 0"
    # Multi-turn: the last turn's answers, and each side's whole conversation.
    assert multi["turns"] == 2 and (multi["chosen"], multi["rejected"]) == ("right answer 1", "left answer 1")
    assert multi["chosen_messages"] == [
        {"role": "user", "content": kept[2].prompt.text},
        {"role": "assistant", "content": "right answer 0"},
        {"role": "user", "content": "Follow-up 1?"},
        {"role": "assistant", "content": "right answer 1"},
    ]
    assert [m["content"] for m in multi["rejected_messages"]][1::2] == ["left answer 0", "left answer 1"]


def test_audit_counts_each_rule_and_the_length_share(acme, world):
    audit = selectors.preference_pairs_audit(campaign=acme.campaign)
    assert audit["votes"] == 8 and audit["pairs"] == 3
    assert audit["no_winner"] == {"tie": 1, "both_bad": 1}
    assert audit["excluded"]["too_fast"] == 1 and audit["excluded"]["identity_leak"] == 1
    assert audit["excluded"]["flagged_rater"] == 1 and audit["excluded"]["total"] == 3
    length = audit["length"]
    # Chosen longer in the first (30 > 10); shorter in the swapped one (the winner had 10); same in the third.
    assert (length["chosen_longer"], length["chosen_shorter"], length["same_length"]) == (1, 1, 1)
    assert length["share_chosen_longer"] == 0.5
    z = 1.959964
    centre, half = (0.5 + z * z / 4) / (1 + z * z / 2), z / (1 + z * z / 2) * math.sqrt(0.25 / 2 + z * z / 16)
    assert length["lower"] == pytest.approx(centre - half, abs=1e-5)
    assert length["upper"] == pytest.approx(centre + half, abs=1e-5)


def test_audit_share_on_many_pairs(acme, bob):
    for i in range(30):
        # The chosen (left) answer is longer in 20, shorter in 6, the same length in 4.
        right = 10 if i < 20 else (50 if i < 26 else 20)
        vote_make(acme, rater=bob, choice="left", left_tokens=20, right_tokens=right)
    length = selectors.preference_pairs_audit(campaign=acme.campaign)["length"]
    assert (length["chosen_longer"], length["chosen_shorter"], length["same_length"]) == (20, 6, 4)
    assert length["share_chosen_longer"] == pytest.approx(20 / 26, abs=1e-6)
    assert length["lower"] < 20 / 26 < length["upper"] and 0.5 < length["lower"]


def test_audit_filters_select_the_votes(acme, world):
    audit = selectors.preference_pairs_audit(campaign=acme.campaign, filters=VoteFilters(category="coding"))
    assert audit["votes"] == 0 and audit["pairs"] == 0 and audit["length"]["share_chosen_longer"] is None


def _style_snapshot(acme, extra):  # type: ignore[no-untyped-def]
    return LeaderboardSnapshot.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        category="",
        view="style",
        version=3,
        method={"interval": "sandwich"},
        policy={},
        excluded={},
        rows=[],
        extra=extra,
    )


def test_audit_says_why_the_length_coefficient_is_not_available(acme, world):
    coefficient = selectors.preference_pairs_audit(campaign=acme.campaign)["style_length_coefficient"]
    assert coefficient["available"] is False
    assert coefficient["reason"].startswith("not available: no style-controlled leaderboard")
    _style_snapshot(acme, {"style_withheld": "a style gap predicts the winner (almost) perfectly"})
    coefficient = selectors.preference_pairs_audit(campaign=acme.campaign)["style_length_coefficient"]
    assert coefficient["available"] is False and coefficient["snapshot_version"] == 3
    assert coefficient["reason"] == "not available: a style gap predicts the winner (almost) perfectly"


def test_audit_reports_the_style_views_length_coefficient(acme, world):
    _style_snapshot(
        acme,
        {
            "style_coefficients": [
                {"feature": "tokens", "coef": 0.31, "lower": 0.12, "upper": 0.5},
                {"feature": "bold", "coef": 0.01, "lower": -0.1, "upper": 0.12},
            ]
        },
    )
    coefficient = selectors.preference_pairs_audit(campaign=acme.campaign)["style_length_coefficient"]
    assert coefficient == {
        "available": True,
        "reason": None,
        "coef": 0.31,
        "lower": 0.12,
        "upper": 0.5,
        "snapshot_version": 3,
        "interval": "sandwich",
    }


def test_async_preference_pairs_export_carries_the_audit(acme, alice, world, settings, tmp_path):
    settings.ARENA_EXPORT_ROOT = tmp_path
    job = services.export_job_create(
        campaign=acme.campaign,
        requested_by=alice,
        api_key=None,
        kind="preference_pairs",
        format="jsonl",
        texts=True,
        filters=VoteFilters(),
    )
    tasks.export_job_run_task(str(job.pk), organization_id=job.organization_id)
    job.refresh_from_db()
    assert job.status == ExportJob.Status.DONE and job.rows == 3
    rows = [json.loads(line) for line in (tmp_path / job.path).read_text().splitlines()]
    assert [r["vote_id"] for r in rows] == [v.pk for v in world[0]]
    assert job.audit is not None and job.audit["pairs"] == 3 and job.audit["no_winner"]["tie"] == 1


# --- Over HTTP ------------------------------------------------------------------------------------


def _body(response) -> str:  # type: ignore[no-untyped-def]
    return b"".join(response.streaming_content).decode()


def test_preference_pairs_stream_and_audit_over_http(acme, world, alice_client):
    from django.http import StreamingHttpResponse
    from django.urls import reverse

    response = alice_client.get(reverse("api-preference-pairs", args=[acme.campaign.pk]))
    assert response.status_code == 200 and isinstance(response, StreamingHttpResponse)
    assert [json.loads(line)["vote_id"] for line in _body(response).splitlines()] == [v.pk for v in world[0]]
    filtered = alice_client.get(reverse("api-preference-pairs", args=[acme.campaign.pk]), {"competitor": 10**9})
    assert _body(filtered) == ""
    audit = alice_client.get(reverse("api-preference-pairs-audit", args=[acme.campaign.pk]))
    assert audit.status_code == 200
    body = audit.json()
    assert body["pairs"] == 3 and body["no_winner"] == {"tie": 1, "both_bad": 1}
    assert body["length"]["share_chosen_longer"] == 0.5
    assert body["style_length_coefficient"]["reason"].startswith("not available: ")


def test_preference_pairs_outsiders_404_read_key_allowed(acme, globex, world, charlie_client, bob_client):
    from django.urls import reverse

    from tests.conftest import api_client

    urls = [
        reverse("api-preference-pairs", args=[acme.campaign.pk]),
        reverse("api-preference-pairs-audit", args=[acme.campaign.pk]),
    ]
    for client in (charlie_client, bob_client):
        for url in urls:
            assert client.get(url).status_code == 404
    reader = api_client(acme.organization, scope="read")
    assert [reader.get(url).status_code for url in urls] == [200, 200]
