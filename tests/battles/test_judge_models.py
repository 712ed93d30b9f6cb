"""Judges and rubrics: a rubric version is never rewritten, a judge's model and rubric never change, and
a judge always excludes its own family."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from battles.models import ImmutableError, Judge, Rubric
from tests.factories import ModelEndpointFactory, OrganizationFactory

pytestmark = pytest.mark.django_db


def _rubric(org, **kw) -> Rubric:  # type: ignore[no-untyped-def]
    return Rubric.objects.create(organization=org, name="helpful", question="Which answer helps more?", **kw)


def test_rubric_version_is_immutable_and_hashed() -> None:
    org = OrganizationFactory.create()
    rubric = _rubric(org)
    assert len(rubric.content_hash) == 64
    rubric.question = "Which answer is shorter?"
    with pytest.raises(ImmutableError):
        rubric.save()
    assert Rubric.objects.get(pk=rubric.pk).question == "Which answer helps more?"
    second = _rubric(org, version=2, instructions="Prefer correct answers.")
    assert second.content_hash != rubric.content_hash


def test_judge_identity_is_fixed_and_own_family_excluded() -> None:
    org = OrganizationFactory.create()
    endpoint = ModelEndpointFactory.create(organization=org)
    other = ModelEndpointFactory.create(organization=org)
    rubric = _rubric(org)
    judge = Judge.objects.create(
        organization=org, name="j", endpoint=endpoint, rubric=rubric, family="Llama", excluded_families=["qwen "]
    )
    assert judge.temperature == 0.0
    assert judge.families_excluded() == {"llama", "qwen"}
    judge.active = False
    judge.save()  # an ordinary field may change
    judge.endpoint = other
    with pytest.raises(ImmutableError):
        judge.save()


def test_judge_clean_refuses_foreign_rubric_and_bad_family_list() -> None:
    org, outsider = OrganizationFactory.create(), OrganizationFactory.create()
    judge = Judge(
        organization=org,
        name="j",
        endpoint=ModelEndpointFactory.create(organization=org),
        rubric=_rubric(outsider),
        excluded_families="llama",
    )
    with pytest.raises(ValidationError) as exc:
        judge.clean()
    assert "rubric" in exc.value.message_dict
    judge.rubric = _rubric(org)
    with pytest.raises(ValidationError) as exc:
        judge.clean()
    assert "excluded_families" in exc.value.message_dict
