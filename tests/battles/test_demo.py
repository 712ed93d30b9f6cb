"""The demo (the README's first command): the seed gives a working campaign on the local models, and is idempotent."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from battles.demo import DEMO_JUDGE, DEMO_MANAGER, DEMO_PASSWORD, DEMO_PROMPTS, DEMO_RATER, demo_seed
from battles.management.commands.demo import demo_webhooks_loopback
from battles.models import Battle, Judge, JudgeRun, Prompt, Vote
from battles.services import judge_run_create, judge_run_execute
from core.outbound import AddressRefused
from ranking.models import LeaderboardSnapshot
from raters.webhook_transport import webhook_url_check
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

    # The demo's judge is a model built for judging, no competitor: its run judges the battle.
    judge = Judge.objects.get(organization=world.organization, name=DEMO_JUDGE)
    assert judge.endpoint.model_name == "arena-judge" and judge.endpoint not in world.endpoints
    run = judge_run_execute(run_id=judge_run_create(judge=judge, campaign=world.campaign, actor=None, start=False).pk)
    assert run is not None and run.status == JudgeRun.Status.DONE, run and run.error
    assert (run.pairs_judged, run.pairs_refused, run.pairs_excluded_family) == (1, 0, 0)
    assert Judge.objects.filter(organization=world.organization).count() == 1  # the seed is idempotent


def test_the_demo_lets_webhooks_reach_loopback_and_production_does_not(settings, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("ARENA_WEBHOOK_HOSTS", raising=False)
    settings.ARENA_WEBHOOK_HOSTS = []  # the production default (arena.settings.base)
    with pytest.raises(AddressRefused):
        webhook_url_check("http://127.0.0.1:8765/hook")
    demo_webhooks_loopback()
    webhook_url_check("http://127.0.0.1:8765/hook")
    webhook_url_check("http://[::1]:8765/hook")
    with pytest.raises(AddressRefused):
        webhook_url_check("http://10.0.0.5/hook")  # loopback only, not the rest of the network
    # An operator's own list wins over the demo's.
    settings.ARENA_WEBHOOK_HOSTS = []
    monkeypatch.setenv("ARENA_WEBHOOK_HOSTS", "")
    demo_webhooks_loopback()
    assert settings.ARENA_WEBHOOK_HOSTS == []
