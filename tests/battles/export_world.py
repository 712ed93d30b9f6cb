"""Voted battles written straight to the database (no model server), for the export tests: each with
its generations (per side and turn), its rater turns and a vote row as ``vote_submit`` would log it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from battles.models import Battle, Generation, Prompt, Turn, Vote
from battles.prompting import prompt_hash
from tests.conftest import Tenant, endpoint_of
from tests.factories import PromptFactory


def style(tokens: int) -> dict[str, int]:
    return {"tokens": tokens, "headers": 0, "list_items": 0, "bold": 0, "code_blocks": 0}


def vote_make(
    tenant: Tenant,
    *,
    rater: User,
    choice: str = "left",
    left_tokens: int = 10,
    right_tokens: int = 12,
    decision_ms: int = 5000,
    created_at: datetime | None = None,
    turns: int = 1,
    swap: bool = False,
    category: str = "knowledge",
    prompt: Prompt | None = None,
    identity: bool = False,
    system_prompt: str = "Be brief.",
    texts: tuple[str, str] | None = None,
) -> Vote:
    """A voted battle of ``turns`` turns between the tenant's two competitors (``swap``: right on the
    left). Answers read ``"<side> answer <turn>"`` unless ``texts`` gives the first turn's."""
    left, right = (tenant.right, tenant.left) if swap else (tenant.left, tenant.right)
    prompt = prompt or PromptFactory.create(campaign=tenant.campaign, category=category)
    when = created_at or timezone.now()
    params = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 48, "system_prompt": system_prompt, "seed": 7}
    battle = Battle.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        left=left,
        right=right,
        status=Battle.Status.VOTED,
        params=params,
        shown_at=when - timedelta(milliseconds=decision_ms),
        voted_at=when,
    )
    log_turns = []
    for index in range(turns):
        if index:
            Turn.objects.create(
                battle=battle, index=index, text=f"Follow-up {index}?", text_hash=prompt_hash(f"f{index}")
            )
        for side, competitor, tokens in (("left", left, left_tokens), ("right", right, right_tokens)):
            text = texts[0 if side == "left" else 1] if texts and index == 0 else f"{side} answer {index}"
            Generation.objects.create(
                battle=battle,
                side=side,
                turn=index,
                competitor=competitor,
                text=text,
                output_tokens=tokens,
                finish_reason="stop",
                latency_s=0.25,
                style=style(tokens),
            )
        log_turns.append(
            {
                "index": index,
                "prompt_hash": prompt.text_hash,
                "asks_identity": False,
                "left": {"tokens": left_tokens, "finish_reason": "stop", "latency_s": 0.25, "names_model": False},
                "right": {"tokens": right_tokens, "finish_reason": "stop", "latency_s": 0.25, "names_model": False},
            }
        )
    return Vote.objects.create(
        organization=tenant.organization,
        campaign=tenant.campaign,
        battle=battle,
        created_at=when,
        rater=rater,
        pool=tenant.pool,
        prompt=prompt,
        prompt_hash=prompt.text_hash,
        category=prompt.category,
        language=prompt.language,
        prompt_source=prompt.source,
        left=left,
        right=right,
        left_model=endpoint_of(left).name,
        left_version=left.version_label,
        left_tokens=left_tokens * turns,
        left_finish_reason="stop",
        left_latency_s=0.25 * turns,
        right_model=endpoint_of(right).name,
        right_version=right.version_label,
        right_tokens=right_tokens * turns,
        right_finish_reason="stop",
        right_latency_s=0.25 * turns,
        params=params,
        choice=choice,
        decision_ms=decision_ms,
        left_style=style(left_tokens * turns),
        right_style=style(right_tokens * turns),
        prompt_asks_identity=identity,
        answer_names_model=False,
        turns=log_turns if turns > 1 else None,
    )
