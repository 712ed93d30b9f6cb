"""Attribute boards for the tests: a ratio judge and a board whose entities carry known log-strengths."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from battles.models import Judge, Rubric
from ranking.models import AttributeBoard
from ranking.services import EntityInput, attribute_board_create
from raters.models import Organization
from tests.factories import ModelEndpointFactory

from .ratio_sim import attribute_with, entity_text


def ratio_judge(organization: Organization, *, url: str = "127.0.0.1:9", name: str = "sim judge") -> Judge:
    rubric, _ = Rubric.objects.get_or_create(
        organization=organization,
        name="formality",
        version=1,
        defaults={"kind": Rubric.Kind.RATIO, "question": "Which text has more of the attribute?"},
    )
    endpoint = ModelEndpointFactory.create(organization=organization, url=url, model_name="ratio-sim")
    return Judge.objects.create(organization=organization, name=name, endpoint=endpoint, rubric=rubric)


def truths(n: int, seed: int = 0) -> NDArray[np.float64]:
    return np.random.default_rng(seed).normal(0.0, 1.0, n)


def board_with(
    organization: Organization,
    judge: Judge,
    strengths: NDArray[np.float64],
    *,
    name: str = "formality",
    top_k: int = 5,
    calls_per_entity: int = 8,
    seed: int = 0,
    **sim: float,
) -> AttributeBoard:
    return attribute_board_create(
        organization=organization,
        name=name,
        attribute=attribute_with("how formal the text is", **sim),
        judge=judge,
        entities=[EntityInput(text=entity_text(float(s), f"Text {k}"), label=f"t{k}") for k, s in enumerate(strengths)],
        top_k=top_k,
        calls_per_entity=calls_per_entity,
        seed=seed,
        actor=None,
    )
