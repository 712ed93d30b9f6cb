"""Battles with known ground truth for the judge tests: answers carry the simulated judge's quality
marker (serving/judge_repository/arena_judge.py), optionally with a human vote that follows it."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.utils import timezone

from battles.models import Battle, Competitor, Generation, Judge, Prompt, Vote
from battles.services import judge_create, rubric_create
from serving.models import ModelEndpoint

from ..conftest import Tenant
from ..factories import ModelEndpointFactory, PromptFactory


@dataclass
class Planted:
    battle: Battle
    better: str  # "left" or "right": the truth


def judge_make(tenant: Tenant, *, url: str, model: str = "judge-sim", family: str = "", name: str = "") -> Judge:
    endpoint: ModelEndpoint = ModelEndpointFactory.create(
        organization=tenant.organization, name=f"judge {model} {uuid.uuid4().hex[:6]}", url=url, model_name=model
    )
    rubric = rubric_create(
        organization=tenant.organization,
        name=f"helpfulness {uuid.uuid4().hex[:6]}",
        question="Which answer is more helpful?",
        instructions="Prefer the answer that answers the prompt.",
        actor=None,
    )
    return judge_create(
        organization=tenant.organization,
        name=name or f"{model} judge",
        endpoint=endpoint,
        rubric=rubric,
        family=family,
        actor=None,
    )


def battle_plant(
    tenant: Tenant,
    *,
    left: Competitor,
    right: Competitor,
    better: str,
    index: int,
    prompt: Prompt | None = None,
    vote: str | None = None,
    rater: User | None = None,
    left_text: str | None = None,
    category: str = "",
    decision_ms: int = 5000,
) -> Planted:
    """A ready battle (or voted, with ``vote`` by ``rater`` after ``decision_ms``) whose ``better`` side has
    the higher quality."""
    prompt = prompt or PromptFactory.create(campaign=tenant.campaign, **({"category": category} if category else {}))
    high, low = 10 + index % 5, index % 5
    texts = {"left": f"left answer {index} [[quality:{high if better == 'left' else low}]]"}
    texts["right"] = f"right answer {index} [[quality:{high if better == 'right' else low}]]"
    if left_text is not None:
        texts["left"] = left_text
    now = timezone.now()
    battle = Battle.objects.create(
        id=uuid.uuid4(),
        organization=tenant.organization,
        campaign=tenant.campaign,
        prompt=prompt,
        left=left,
        right=right,
        status=Battle.Status.VOTED if vote else Battle.Status.READY,
        params={"temperature": 0.7, "top_p": 1.0, "max_tokens": 64, "system_prompt": "", "seed": index},
        ready_at=now,
        shown_at=now if vote else None,
        voted_at=now if vote else None,
        rater=rater if vote else None,
        pool=tenant.pool if vote else None,
    )
    for side, competitor in (("left", left), ("right", right)):
        Generation.objects.create(
            battle=battle, side=side, competitor=competitor, text=texts[side], output_tokens=5, finish_reason="stop"
        )
    if vote:
        assert rater is not None
        style = {"tokens": 5, "headers": 0, "list_items": 0, "bold": 0, "code_blocks": 0}
        Vote.objects.create(
            organization=tenant.organization,
            campaign=tenant.campaign,
            battle=battle,
            created_at=now,
            rater=rater,
            pool=tenant.pool,
            prompt=prompt,
            prompt_hash=prompt.text_hash,
            category=prompt.category,
            language="en",
            prompt_source="pool",
            left=left,
            right=right,
            left_model="l",
            left_version="1",
            left_tokens=5,
            left_finish_reason="stop",
            left_latency_s=0.1,
            right_model="r",
            right_version="1",
            right_tokens=5,
            right_finish_reason="stop",
            right_latency_s=0.1,
            params=battle.params,
            choice=vote,
            decision_ms=decision_ms,
            left_style=style,
            right_style=style,
            prompt_asks_identity=False,
            answer_names_model=False,
        )
    return Planted(battle, better)
