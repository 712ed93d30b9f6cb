"""Demo data: one organisation, a manager and a rater, the shipped local models, an open campaign;
with the opt-in real models (`scripts/demo --real-models`) a second open campaign between them.

Idempotent: running it again keeps existing rows and points the endpoints at the given Triton server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from raters.models import Membership, Organization, RaterPool, Role
from raters.services import user_create
from raters.tenancy import organization_scope
from serving.models import ModelEndpoint

from .models import Campaign, Competitor, Judge, Prompt, Rubric
from .services import judge_create, prompt_build, rubric_create

DEMO_PASSWORD = "arena-demo-2026"
DEMO_MANAGER = "manager@arena.demo"
DEMO_RATER = "rater@arena.demo"

DEMO_PROMPTS = (
    "Explain what a hash table is and when you would use one.",
    "Write a Python function that checks whether a string is a palindrome.",
    "What is the derivative of x^3 + 2x, and why?",
    "Write a short poem about autumn in a quiet city.",
    "Why is the sky blue?",
    "Give me three tips for a productive morning routine.",
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies? Explain.",
    "Summarise the idea behind the Zen of Python.",
    "How should I prepare for a job interview as a software engineer?",
    "What is the difference between a list and a tuple in Python?",
    "Explain recursion to a ten-year-old.",
    "Write a haiku about error messages.",
    "What causes the seasons on Earth?",
    "Compare SQL and NoSQL databases in a few sentences.",
    "How do I politely decline a meeting invitation?",
    "Solve: a train travels 120 km in 1.5 hours. What is its average speed?",
    "Describe the water cycle.",
    "Write a limerick about a cat who learns to code.",
    "What are good practices for naming variables?",
    "Is it better to rent or to buy a home? Give the main considerations.",
    "Explain the difference between concurrency and parallelism.",
    "What is the capital of Australia, and why is it not Sydney?",
    "Write an opening line for a mystery novel.",
    "How does public-key cryptography work, in simple terms?",
    "Why do programmers say that explicit is better than implicit?",
    "What should I pack for a weekend hiking trip?",
    "Prove that the sum of two even numbers is even.",
    "Suggest a name for a bakery that also sells books.",
    "What is a closure in programming?",
    "Explain what makes a good code review.",
)


@dataclass(frozen=True)
class DemoWorld:
    organization: Organization
    campaign: Campaign
    endpoints: list[ModelEndpoint]


def shipped_models(repository: Path) -> list[str]:
    return sorted(p.name for p in repository.iterdir() if (p / "config.pbtxt").is_file())


@transaction.atomic
def demo_seed(*, triton_grpc_url: str, model_repository: Path) -> DemoWorld:
    User = get_user_model()
    manager = User.objects.filter(email=DEMO_MANAGER).first() or user_create(email=DEMO_MANAGER, password=DEMO_PASSWORD)
    rater = User.objects.filter(email=DEMO_RATER).first() or user_create(email=DEMO_RATER, password=DEMO_PASSWORD)
    organization, _ = Organization.objects.get_or_create(slug="demo-lab", defaults={"name": "Demo Lab"})
    # The seed is the command's edge: everything else it writes lives inside the demo organisation.
    with organization_scope(organization.pk):
        return _demo_seed_organization(
            organization=organization,
            manager=manager,
            rater=rater,
            triton_grpc_url=triton_grpc_url,
            model_repository=model_repository,
        )


def _demo_seed_organization(
    *, organization: Organization, manager: Any, rater: Any, triton_grpc_url: str, model_repository: Path
) -> DemoWorld:
    Membership.objects.update_or_create(user=manager, organization=organization, defaults={"role": Role.OWNER})
    Membership.objects.get_or_create(user=rater, organization=organization, defaults={"role": Role.RATER})
    pool, _ = RaterPool.objects.get_or_create(organization=organization, name="Staff raters")
    pool.members.add(rater)

    campaign, created = Campaign.objects.get_or_create(
        organization=organization,
        slug="local-models",
        defaults={
            "name": "Local models: which answer is better?",
            "description": "Three small local language models answer general questions. They are not smart: "
            "judge which answer is more relevant, readable and useful.",
            "status": Campaign.Status.OPEN,
            "allow_rater_prompts": True,
            "max_turns": 3,  # the rater may continue the conversation twice before the vote
            "max_tokens": 120,
            "temperature": 0.8,
            "top_p": 0.95,
            "min_decision_ms": 1500,
            # A demo session of a few dozen votes should already show a leaderboard.
            "ranking_min_votes": 5,
        },
    )
    campaign.rater_pools.add(pool)
    endpoints = []
    for model in shipped_models(model_repository):
        endpoint = _demo_endpoint(organization, model, triton_grpc_url)
        endpoints.append(endpoint)
        Competitor.objects.get_or_create(
            organization=organization, campaign=campaign, endpoint=endpoint, version_label="1"
        )
    if created:
        Prompt.objects.bulk_create(
            prompt_build(campaign=campaign, text=text, source=Prompt.Source.POOL) for text in DEMO_PROMPTS
        )
    demo_judge_seed(organization=organization, triton_grpc_url=triton_grpc_url)
    return DemoWorld(organization=organization, campaign=campaign, endpoints=endpoints)


def _demo_endpoint(
    organization: Organization, model: str, triton_grpc_url: str, *, timeout_s: float = 30.0, **fields: Any
) -> ModelEndpoint:
    """The endpoint of one of the demo Triton's models (pointed at the given server on every run)."""
    endpoint, _ = ModelEndpoint.objects.update_or_create(
        organization=organization,
        name=model,
        defaults={
            "url": triton_grpc_url,
            "protocol": ModelEndpoint.Protocol.GRPC,
            "model_name": model,
            "timeout_s": timeout_s,
            **fields,
        },
    )
    return endpoint


# The demo's judge: a model built for judging (serving/judge_repository/), never a competitor, so its runs
# judge both demo campaigns (a judge never judges its own model or family).
DEMO_JUDGE_MODEL = "arena-judge"
DEMO_JUDGE = "Demo judge"


def demo_judge_seed(*, organization: Organization, triton_grpc_url: str) -> Judge:
    endpoint = _demo_endpoint(organization, DEMO_JUDGE_MODEL, triton_grpc_url)
    judge = Judge.objects.filter(organization=organization, name=DEMO_JUDGE).first()
    if judge is not None:
        return judge
    rubric = Rubric.objects.filter(organization=organization, name="Helpfulness").order_by("-version").first()
    rubric = rubric or rubric_create(
        organization=organization,
        name="Helpfulness",
        question="Which answer is more helpful?",
        instructions="Prefer the answer that answers the prompt fully.",
        actor=None,
    )
    return judge_create(
        organization=organization, name=DEMO_JUDGE, endpoint=endpoint, rubric=rubric, family="arena", actor=None
    )


# The opt-in real LLMs (serving/llm_model_repository/) and how the client must format their prompt:
# SmolLM2-135M-Instruct is a chat model (ChatML), Gemma 3 270M a base model (plain text to continue).
REAL_MODELS = (("smollm2-135m-instruct", "chatml"), ("gemma3-270m", "raw"))
REAL_MODELS_CAMPAIGN = "real-models"


def endpoint_contract_fields(*, contract: str, prompt_format: str) -> dict[str, str]:
    """The wire contract and prompt format of an endpoint, for the ModelEndpoint fields of those names
    where the model has them (they come with the `contracts` work); empty where it does not, and the
    endpoint then speaks the default contract."""
    names = {f.name for f in ModelEndpoint._meta.get_fields()}
    if {"contract", "prompt_format"} <= names:
        return {"contract": contract, "prompt_format": prompt_format}
    return {}


@transaction.atomic
def demo_seed_real_models(*, triton_grpc_url: str) -> DemoWorld:
    """A second open campaign in the demo organisation, between the two real models (served by the
    same Triton, vLLM-backend contract). Run after `demo_seed`, which creates the organisation, the
    people and the pool."""
    organization = Organization.objects.get(slug="demo-lab")
    with organization_scope(organization.pk):
        pool = RaterPool.objects.get(organization=organization, name="Staff raters")
        campaign, created = Campaign.objects.get_or_create(
            organization=organization,
            slug=REAL_MODELS_CAMPAIGN,
            defaults={
                "name": "Real small LLMs: which answer is better?",
                "description": "SmolLM2-135M-Instruct (a chat model) against Gemma 3 270M (a base model, which "
                "continues the text it is given), both run on this machine's CPU. Judge which answer is more "
                "relevant, readable and useful.",
                "status": Campaign.Status.OPEN,
                "allow_rater_prompts": True,
                "max_turns": 3,
                # A budget SmolLM's answers finish in (benchmarks/real_model_endings.py, 12 prompts: at 120
                # tokens 10 ended mid-sentence, at 640 two); Gemma, a base model, writes to any budget.
                "max_tokens": 640,
                "temperature": 0.8,
                "top_p": 0.95,
                "min_decision_ms": 1500,
                "ranking_min_votes": 5,
            },
        )
        campaign.rater_pools.add(pool)
        endpoints = []
        for model, prompt_format in REAL_MODELS:
            # Gemma writes the whole budget: 640 tokens took up to 64 s on a loaded 2-core machine.
            endpoint = _demo_endpoint(
                organization,
                model,
                triton_grpc_url,
                timeout_s=110.0,
                **endpoint_contract_fields(contract="vllm", prompt_format=prompt_format),
            )
            endpoints.append(endpoint)
            Competitor.objects.get_or_create(
                organization=organization, campaign=campaign, endpoint=endpoint, version_label="1"
            )
        if created:
            Prompt.objects.bulk_create(
                prompt_build(campaign=campaign, text=text, source=Prompt.Source.POOL) for text in DEMO_PROMPTS
            )
        return DemoWorld(organization=organization, campaign=campaign, endpoints=endpoints)
