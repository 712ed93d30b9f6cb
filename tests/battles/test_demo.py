"""The demo (the README's first command): the seed gives a working campaign on the local models, and is idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from battles.demo import DEMO_MANAGER, DEMO_PASSWORD, DEMO_PROMPTS, DEMO_RATER, demo_seed
from battles.models import Battle, Prompt, Vote
from ranking.models import LeaderboardSnapshot
from tests.conftest import generation_worker_run

pytestmark = [pytest.mark.django_db, pytest.mark.triton, pytest.mark.usefixtures("triton_server")]


def test_demo_seed_gives_a_votable_campaign_and_a_leaderboard(triton_server):
    repository = Path(settings.ARENA_MODEL_REPOSITORY)
    world = demo_seed(triton_grpc_url=triton_server.grpc_url, model_repository=repository)
    again = demo_seed(triton_grpc_url=triton_server.grpc_url, model_repository=repository)
    assert again.campaign.pk == world.campaign.pk
    assert Prompt.objects.filter(campaign=world.campaign).count() == len(DEMO_PROMPTS)
    assert {e.model_name for e in world.endpoints} == {"zen-bigram", "stdlib-trigram", "docs-markdown"}

    rater = Client()
    assert rater.post(reverse("account_login"), {"login": DEMO_RATER, "password": DEMO_PASSWORD}).status_code == 302
    assert world.campaign.name in rater.get(reverse("battles:campaigns")).content.decode()
    battle_url = rater.post(reverse("battles:next", args=[world.campaign.pk]))["Location"]
    assert "Preparing your next battle" in rater.get(battle_url).content.decode()
    generation_worker_run()
    assert "Answer A" in rater.get(battle_url).content.decode()
    battle = Battle.objects.get()
    assert battle.status == Battle.Status.READY
    assert rater.post(f"{battle_url}vote/", {"choice": "left"}).status_code == 302
    assert Vote.objects.count() == 1

    manager = Client()
    assert manager.post(reverse("account_login"), {"login": DEMO_MANAGER, "password": DEMO_PASSWORD}).status_code == 302
    assert manager.get(reverse("admin:battles_campaign_changelist")).status_code == 200
    from ranking.services import leaderboards_recompute

    leaderboards_recompute(campaign_id=world.campaign.pk)
    assert LeaderboardSnapshot.objects.filter(campaign=world.campaign).exists()
    assert manager.get(reverse("ranking:leaderboard", args=[world.campaign.pk])).status_code == 200
