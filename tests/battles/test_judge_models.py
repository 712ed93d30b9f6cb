"""Judges and rubrics: a rubric version is never rewritten, a judge's model and rubric never change, and
a judge always excludes its own family, its model names standing for it when its family is blank."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from battles.models import Competitor, ImmutableError, Judge, Rubric, model_family, name_in_family
from tests.factories import CampaignFactory, CompetitorFactory, ModelEndpointFactory, OrganizationFactory

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


def test_model_names_say_which_family_a_model_is_of() -> None:
    for name, family in [
        ("Llama-3-8B", "llama"),
        ("llama3", "llama"),
        ("meta-llama/Llama-3.1-70B-Instruct", "llama"),
        ("gemma3-270m", "gemma"),
        ("Qwen2.5-7B", "qwen"),
        ("qwen2.5-7b", "qwen2"),
        ("zen-bigram", "zen-bigram"),
    ]:
        assert name_in_family(name, family), (name, family)
    for name, family in [("llamaguard", "llama"), ("model-50", "model-5"), ("qwen25", "qwen2"), ("gemma", "")]:
        assert not name_in_family(name, family), (name, family)
    assert model_family("", "Qwen-7B") == "qwen-7b" and model_family(" Llama ", "x") == "llama"


def test_a_judge_with_no_family_never_judges_its_own_family_by_its_model_names() -> None:
    """Known truth: which competitor is of the judge's family. The judge's family is blank (the default)."""
    org = OrganizationFactory.create()
    campaign = CampaignFactory.create(organization=org)
    judge = Judge.objects.create(
        organization=org,
        name="gemma judge",
        endpoint=ModelEndpointFactory.create(organization=org, name="Gemma3-27B-it", model_name="gemma3-27b-it"),
        rubric=_rubric(org),
    )
    assert judge.family == "" and judge.families_own() == {"gemma3-27b-it"}

    def competitor(name: str, family: str = "", model_name: str = "") -> Competitor:
        endpoint = ModelEndpointFactory.create(organization=org, name=name, model_name=model_name or name.lower())
        return CompetitorFactory.create(campaign=campaign, endpoint=endpoint, family=family)

    own = [
        competitor("Gemma 3 270M", family="Gemma"),  # its family names the judge's model
        competitor("gemma3-27b-it-v2"),  # no family: its name is the judge model's, continued
        competitor("Shadow", model_name="GEMMA3-27B-IT"),  # the judge's own model, served elsewhere
    ]
    others = [
        competitor("Llama-3-8B", family="llama"),
        competitor("SmolLM2-135M"),
        competitor("Gemmaish", family="gemmaish"),  # a family that only starts like the judge's
    ]
    assert [c.family_name for c in own[:2]] == ["gemma", "gemma3-27b-it-v2"]  # the disclosure's family
    assert [judge.may_judge(c) for c in own] == [False, False, False]
    assert [judge.may_judge(c) for c in others] == [True, True, True]
    # A family set on the judge is its family: the names no longer speak for it; competitors with no family
    # are matched by their names against it (and against the families it excludes).
    judge.family = "google"
    judge.excluded_families = ["llama"]
    assert judge.may_judge(own[0]) and judge.families_own() == {"google"}
    assert not judge.may_judge(competitor("llama3.2-1b"))  # no family: its name is of "llama"
    assert not judge.may_judge(competitor("Google-T5"))  # no family: its name is of the judge's "google"
    assert not judge.may_judge(others[0]) and judge.may_judge(others[1])
