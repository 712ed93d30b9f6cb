"""The promotion loop: a variant rolled out in stages through a sticky A/B experiment, watched on the board.
The rollout's assignment (shares follow the stage, units only ever move into the promoted variant), the
service's decisions on boards written to order (advance, hold, roll back, complete), one thin run on a real
recompute, and the API and console."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from scipy.stats import binomtest

from battles import services as battle_services
from battles.experimenting import rollout_index, unit_position, variant_index
from battles.models import Experiment, Exposure, Variant
from core.errors import Conflict, Invalid
from ranking.models import LeaderboardSnapshot, Promotion, PromotionDecision, PromotionDecisionAppendOnlyError
from ranking.services import leaderboards_recompute, promotion_check, promotion_start, promotion_stop, promotions_check
from raters.models import AuditEvent, Role
from tests.conftest import Tenant, api_client, login
from tests.factories import MembershipFactory, UserFactory

from .synth import left_leads

pytestmark = pytest.mark.django_db

STAGES = [0.05, 0.25, 0.5, 1.0]

# --- The rollout's assignment (pure) ---------------------------------------------------------------------


def test_rollout_shares_follow_the_stage_and_units_only_move_into_the_promoted_variant() -> None:
    weights = [3.0, 1.0, 1.0]  # control, other, candidate (base share 20%)
    rng = np.random.default_rng(5)
    units = [f"user-{int(u)}" for u in rng.integers(0, 10**12, 4000)]
    positions = [unit_position("exp", u) for u in units]
    base = [variant_index(p, weights) for p in positions]
    previous = base
    for share in (0.3, 0.5, 0.8, 1.0):
        now = [rollout_index(p, weights, 2, share) for p in positions]
        got = sum(1 for v in now if v == 2)
        # The promoted share is the stage's (a binomial check at a fixed seed).
        assert binomtest(got, len(units), share).pvalue > 0.001 if share < 1 else got == len(units)
        # Among the others the weights' proportions hold (3 : 1).
        others = [v for v in now if v != 2]
        if others:
            assert binomtest(others.count(0), len(others), 0.75).pvalue > 0.001
        # Stickiness: a unit either keeps its previous variant or moves into the promoted one, never out of it.
        for before, after in zip(previous, now, strict=True):
            assert after == before or after == 2
        previous = now
    # At or below the base share the weights decide alone.
    assert [rollout_index(p, weights, 2, 0.1) for p in positions] == base
    with pytest.raises(ValueError):
        rollout_index(0.5, weights, 2, 0.0)


# --- The service, on boards written to order -----------------------------------------------------------


@pytest.fixture
def rollout(acme: Tenant) -> tuple[Experiment, Variant, Variant]:
    """acme.left is the candidate (base weight 1 of 100), acme.right the production model (99)."""
    experiment = Experiment.objects.create(organization=acme.organization, key="assistant", campaign=acme.campaign)
    production = Variant.objects.create(experiment=experiment, name="production", weight=99, competitor=acme.right)
    candidate = Variant.objects.create(experiment=experiment, name="candidate", weight=1, competitor=acme.left)
    return experiment, candidate, production


def board(acme: Tenant, *, votes: int, gap: float, half_width: float, hidden: bool = False) -> LeaderboardSnapshot:
    """An overall raw board where the candidate (acme.left) has ``votes`` votes and leads production by ``gap``
    (difference interval gap ± half_width)."""
    version = LeaderboardSnapshot.objects.filter(campaign=acme.campaign).order_by("-version").first() or None
    number = version.version + 1 if version else 1
    a, b = acme.left.pk, acme.right.pk

    def row(cid: int, score: float, n: int) -> dict[str, Any]:
        return {
            "competitor_id": cid,
            "votes": n,
            "hidden": hidden,
            "score": score,
            "lower": score - 30,
            "upper": score + 30,
        }

    return LeaderboardSnapshot.objects.create(
        organization=acme.organization,
        campaign=acme.campaign,
        category="",
        view="raw",
        version=number,
        method={},
        policy={},
        excluded={},
        rows=[row(a, 1000 + gap / 2, votes), row(b, 1000 - gap / 2, votes)],
        pairwise={
            "competitor_ids": [a, b],
            "difference": {
                "lower": [[None, gap - half_width], [-gap - half_width, None]],
                "upper": [[None, gap + half_width], [-gap + half_width, None]],
            },
        },
    )


def _share(experiment: Experiment) -> float | None:
    experiment.refresh_from_db()
    return experiment.rollout_share


def test_stages_advance_on_a_board_that_supports_it_then_complete(acme: Tenant, alice: User, rollout) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    board(acme, votes=100, gap=10, half_width=40)
    promotion = promotion_start(
        experiment=experiment, variant=candidate, baseline=production, stages=STAGES, min_votes=50, actor=alice
    )
    assert _share(experiment) == 0.05 and promotion.stage_votes_at_start == 100
    for stage, votes in enumerate((160, 220, 280), start=1):
        board(acme, votes=votes, gap=10, half_width=40)
        decision = promotion_check(promotion=promotion)
        assert decision is not None and decision.action == "advance" and decision.stage == stage
        assert _share(experiment) == STAGES[stage]
        assert decision.figures["new_votes"] == 60 and decision.board_version == stage + 1
    board(acme, votes=340, gap=10, half_width=40)
    assert promotion_check(promotion=promotion).action == "complete"  # type: ignore[union-attr]
    promotion.refresh_from_db()
    assert promotion.status == "completed" and _share(experiment) == 1.0
    assert battle_services.experiment_assign(experiment=experiment, unit_id="anyone").variant == candidate
    actions = list(promotion.decisions.values_list("action", flat=True))
    assert actions == ["start", "advance", "advance", "advance", "complete"]
    assert promotion_check(promotion=promotion) is None  # no longer running
    assert AuditEvent.objects.filter(organization=acme.organization, action="experiment.changed").count() == 5


def test_a_stage_holds_on_insufficient_votes_and_on_a_trailing_variant(acme: Tenant, alice: User, rollout) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    promotion = promotion_start(
        experiment=experiment, variant=candidate, baseline=production, stages=STAGES, min_votes=50, actor=alice
    )
    # No board yet.
    assert promotion_check(promotion=promotion).reason_code == "not_on_board"  # type: ignore[union-attr]
    board(acme, votes=30, gap=10, half_width=40)
    held = promotion_check(promotion=promotion)
    assert held is not None and held.action == "hold" and held.reason_code == "insufficient_votes"
    assert "30 of 50 new votes" in held.reason
    # The same reason again is not recorded again.
    board(acme, votes=40, gap=10, half_width=40)
    assert promotion_check(promotion=promotion) is None
    # Enough votes, but trailing (not significantly): still held.
    board(acme, votes=80, gap=-5, half_width=40)
    assert promotion_check(promotion=promotion).reason_code == "trailing"  # type: ignore[union-attr]
    assert _share(experiment) == 0.05 and Promotion.objects.get(pk=promotion.pk).stage == 0


def test_a_board_that_turns_rolls_the_rollout_back(acme: Tenant, alice: User, rollout) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    units = [f"u{i}" for i in range(80)]
    before = {u: battle_services.experiment_assign(experiment=experiment, unit_id=u).variant.name for u in units}
    board(acme, votes=100, gap=20, half_width=15)
    promotion = promotion_start(
        experiment=experiment, variant=candidate, baseline=production, stages=STAGES, min_votes=10, actor=alice
    )
    board(acme, votes=200, gap=20, half_width=15)
    assert promotion_check(promotion=promotion).action == "advance"  # type: ignore[union-attr]
    experiment.refresh_from_db()  # the API reads the experiment afresh on every call
    during = {u: battle_services.experiment_assign(experiment=experiment, unit_id=u).variant.name for u in units}
    assert all(during[u] == before[u] or during[u] == "candidate" for u in units)
    assert 8 < sum(v == "candidate" for v in during.values()) < 35  # 25% of 80 (the shares: the pure test above)
    # The board turns: the difference interval is wholly below 0, whatever the new votes.
    board(acme, votes=205, gap=-30, half_width=20)
    decision = promotion_check(promotion=promotion)
    assert decision is not None and decision.action == "rollback" and decision.share == 0.0
    promotion.refresh_from_db()
    assert promotion.status == "rolled_back" and _share(experiment) is None  # (refreshed)
    after = {u: battle_services.experiment_assign(experiment=experiment, unit_id=u).variant.name for u in units}
    assert after == before  # every unit has its variant from before the promotion again
    # Moved units have a row per variant they saw (the exposures stay true per variant).
    moved = [u for u in units if during[u] != before[u]]
    assert moved and Exposure.objects.filter(experiment=experiment, unit_id=moved[0]).count() == 2


def test_start_is_checked_and_one_promotion_runs_at_a_time(acme: Tenant, alice: User, rollout) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    with pytest.raises(Invalid):
        promotion_start(experiment=experiment, variant=candidate, baseline=candidate, actor=alice)
    with pytest.raises(Invalid):
        promotion_start(experiment=experiment, variant=candidate, baseline=production, stages=[0.5, 0.25], actor=alice)
    bare = Variant.objects.create(experiment=experiment, name="bare", weight=1)
    with pytest.raises(Invalid):
        promotion_start(experiment=experiment, variant=bare, baseline=production, actor=alice)
    promotion = promotion_start(experiment=experiment, variant=candidate, baseline=production, actor=alice)
    with pytest.raises(Conflict):
        promotion_start(experiment=experiment, variant=candidate, baseline=production, actor=alice)
    promotion_stop(promotion=promotion, actor=alice)
    assert _share(experiment) is None and Promotion.objects.get(pk=promotion.pk).status == "stopped"
    with pytest.raises(Conflict):
        promotion_stop(promotion=promotion, actor=alice)
    decision = PromotionDecision.objects.filter(promotion=promotion).first()
    assert decision is not None
    decision.reason = "edited"
    with pytest.raises(PromotionDecisionAppendOnlyError):
        decision.save()
    with pytest.raises(PromotionDecisionAppendOnlyError):
        PromotionDecision.objects.filter(promotion=promotion).update(reason="edited")
    # Deleting the promoted variant mid-rollout takes its promotions along; the weights decide again.
    promotion_start(experiment=experiment, variant=candidate, baseline=production, actor=alice)
    battle_services.variant_delete(variant=candidate, actor=alice)
    experiment.refresh_from_db()
    assert experiment.rollout is None and not Promotion.objects.filter(variant_id=candidate.pk).exists()
    assert battle_services.experiment_assign(experiment=experiment, unit_id="u1").variant.name in ("production", "bare")


# --- One run on a real recompute, the API and the console -------------------------------------------------


def test_beat_advances_a_promotion_on_a_recomputed_board(acme: Tenant, alice: User, bob: User, rollout) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    promotion = promotion_start(
        experiment=experiment, variant=candidate, baseline=production, stages=STAGES, min_votes=100, actor=alice
    )
    left_leads(acme, bob, n=150, seed=4, min_votes=30)
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    assert promotions_check() == 1
    promotion.refresh_from_db()
    assert promotion.stage == 1 and _share(experiment) == 0.25
    decision = promotion.decisions.order_by("-id").first()
    assert decision is not None and decision.figures["difference"]["estimate"] > 0


def test_promotions_api_and_console(
    acme: Tenant, globex: Tenant, alice_client: Client, charlie_client: Client, rollout
) -> None:  # type: ignore[no-untyped-def]
    experiment, candidate, production = rollout
    writer = api_client(acme.organization, scope="write")
    created = writer.post(
        reverse("api-promotions"),
        {"experiment": "assistant", "variant": "candidate", "baseline": "production", "min_votes": 20},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["stages"] == STAGES and body["share"] == 0.05 and body["decisions"][0]["action"] == "start"
    assert (
        writer.post(
            reverse("api-promotions"),
            {"experiment": "assistant", "variant": "nope", "baseline": "production"},
            content_type="application/json",
        ).status_code
        == 400
    )
    detail = reverse("api-promotion", args=[body["id"]])
    assert api_client(acme.organization).get(detail).json()["status"] == "running"
    assert api_client(globex.organization).get(detail).status_code == 404
    assert api_client(acme.organization).post(reverse("api-promotion-stop", args=[body["id"]])).status_code == 403
    listed = api_client(acme.organization).get(reverse("api-promotions"), {"campaign": acme.campaign.pk}).json()
    assert [p["id"] for p in listed["results"]] == [body["id"]]
    # The experiment's detail shows the rollout in force.
    assert writer.get(reverse("api:experiment", args=["assistant"])).json()["rollout"] == {
        "variant": "candidate",
        "share": 0.05,
    }
    page = alice_client.get(reverse("admin:ranking_promotion_change", args=[body["id"]]))
    assert (
        page.status_code == 200 and "Started" in page.content.decode() and "5% (stage 1 of 4)" in page.content.decode()
    )
    assert charlie_client.get(reverse("admin:ranking_promotion_change", args=[body["id"]])).status_code in (302, 404)
    dashboard = alice_client.get(reverse("ranking:campaign-dashboard", args=[acme.campaign.pk])).content.decode()
    assert (
        'id="promotions"' in dashboard and "candidate (vs production)" in dashboard and "5% (stage 1 of 4)" in dashboard
    )
    stopped = writer.post(reverse("api-promotion-stop", args=[body["id"]]))
    assert stopped.status_code == 200 and stopped.json()["status"] == "stopped"
    assert writer.post(reverse("api-promotion-stop", args=[body["id"]])).status_code == 409


def test_the_board_offers_its_leader_for_promotion_to_managers_only(
    acme: Tenant, bob: User, alice_client: Client, rollout
) -> None:  # type: ignore[no-untyped-def]
    """From the board to the experiment: the overall raw board links its leader's variant to the promotion's
    add form, filled in (experiment, variant, baseline); a viewer sees no link, nor does anyone once that
    experiment has a running promotion."""
    experiment, candidate, production = rollout
    left_leads(acme, bob, n=60, seed=4, min_votes=10)
    leaderboards_recompute(campaign_id=acme.campaign.pk)
    url = reverse("ranking:leaderboard", args=[acme.campaign.pk])
    page = alice_client.get(url).content.decode()
    assert 'id="promote"' in page and "Promote candidate</a>" in page and "watched against production" in page
    # Two competitors, 60 votes at odds of 2 to 1: is the lead settled? The page says so when it is not.
    overall = LeaderboardSnapshot.objects.filter(campaign=acme.campaign, category="", view="raw").latest("version")
    leader = next(row for row in overall.rows if not row["hidden"])
    assert ('id="promote-unsettled"' in page) == (leader["rank_worst"] > 1)
    link = re.search(r'href="([^"]*/ranking/promotion/add/\?[^"]*)"', page)
    assert link is not None
    form = alice_client.get(link.group(1).replace("&amp;", "&")).content.decode()
    for field, value in (("experiment", experiment.pk), ("variant", candidate.pk), ("baseline", production.pk)):
        assert re.search(
            rf'<option value="{value}" selected>', form.split(f'name="{field}"', 1)[1].split("</select>")[0]
        )
    viewer = UserFactory.create()
    MembershipFactory.create(user=viewer, organization=acme.organization, role=Role.VIEWER)
    assert 'id="promote"' not in login(viewer).get(url).content.decode()
    assert "Promote candidate" not in alice_client.get(f"{url}?category=coding").content.decode()
    promotion_start(
        experiment=experiment, variant=candidate, baseline=production, stages=STAGES, min_votes=50, actor=None
    )
    assert 'id="promote"' not in alice_client.get(url).content.decode()
