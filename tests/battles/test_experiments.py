"""Sticky A/B assignment: a deterministic, weighted hash of (experiment key, unit id); exposures counted."""

from __future__ import annotations

from collections import Counter

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from scipy.stats import chisquare

from battles import selectors, services
from battles.experimenting import unit_position, variant_index
from battles.models import Experiment, Exposure, Variant
from core.errors import Conflict
from tests.factories import CompetitorFactory

pytestmark = [pytest.mark.django_db]


def test_a_unit_always_gets_the_same_variant_and_keys_are_independent():
    assert unit_position("exp", "user-1") == unit_position("exp", "user-1")
    assert unit_position("exp", "user-1") != unit_position("exp2", "user-1")
    assert unit_position("ab", "c") != unit_position("a", "bc")
    assert 0 <= unit_position("exp", "x") < 1
    assert variant_index(0.0, [1, 1]) == 0 and variant_index(0.4999, [1, 1]) == 0 and variant_index(0.5, [1, 1]) == 1
    assert variant_index(0.999999, [1, 2, 7]) == 2 and variant_index(0.25, [1, 2, 7]) == 1
    with pytest.raises(ValueError):
        variant_index(0.5, [1, 0])


def test_weights_are_respected_chi_square():
    weights = [1.0, 2.0, 7.0]
    units = 30_000
    counts = Counter(variant_index(unit_position("checkout-v3", f"unit-{i}"), weights) for i in range(units))
    expected = [units * w / sum(weights) for w in weights]
    observed = [counts[i] for i in range(len(weights))]
    # Deterministic (the hash of fixed ids): this is the same draw on every run, and it must look uniform.
    assert chisquare(observed, expected).pvalue > 0.001
    # A skewed assignment fails the same test (the test can fail).
    assert chisquare([units // 3] * 3, expected).pvalue < 1e-6


def _experiment(acme, **kwargs) -> Experiment:  # type: ignore[no-untyped-def]
    experiment = Experiment.objects.create(organization=acme.organization, key="onboarding", **kwargs)
    Variant.objects.create(experiment=experiment, name="control", weight=1)
    Variant.objects.create(experiment=experiment, name="treatment", weight=3)
    return experiment


def test_assignment_records_one_exposure_row_per_unit_and_counts(acme):
    experiment = _experiment(acme)
    first = services.experiment_assign(experiment=experiment, unit_id="u1")
    again = services.experiment_assign(experiment=experiment, unit_id="u1")
    assert first.variant == again.variant and (first.exposures, again.exposures) == (1, 2)
    for i in range(200):
        services.experiment_assign(experiment=experiment, unit_id=f"unit-{i}")
    assert Exposure.objects.filter(experiment=experiment).count() == 201
    rows = {row.variant.name: row for row in selectors.experiment_exposures(experiment)}
    assert rows["control"].units + rows["treatment"].units == 201
    assert rows["control"].exposures + rows["treatment"].exposures == 202
    assert 20 < rows["control"].units < 80  # about a quarter of 201


def test_an_inactive_experiment_assigns_nothing(acme):
    experiment = _experiment(acme, active=False)
    with pytest.raises(Conflict):
        services.experiment_assign(experiment=experiment, unit_id="u1")
    assert not Exposure.objects.exists()


def test_a_variant_names_a_competitor_of_the_experiments_campaign_only(acme, globex):
    experiment = _experiment(acme, campaign=acme.campaign)
    other_campaign = CompetitorFactory.create(organization=acme.organization)
    with pytest.raises(ValidationError):
        Variant(experiment=experiment, name="x", competitor=other_campaign).full_clean()
    with pytest.raises(ValidationError):
        Variant(experiment=experiment, name="zero", weight=0).full_clean()
    Variant(experiment=experiment, name="ok", competitor=acme.left).full_clean()
    with pytest.raises(ValidationError):
        Experiment(organization=acme.organization, key="k", campaign=globex.campaign).full_clean()


def test_experiments_in_the_admin_are_the_managers_own(acme, globex, alice_client, charlie_client):
    experiment = _experiment(acme)
    listing = alice_client.get(reverse("admin:battles_experiment_changelist"))
    assert listing.status_code == 200 and "onboarding" in listing.content.decode()
    page = alice_client.get(reverse("admin:battles_experiment_change", args=[experiment.pk]))
    assert page.status_code == 200 and "treatment" in page.content.decode()
    outsider = charlie_client.get(reverse("admin:battles_experiment_change", args=[experiment.pk]))
    assert outsider.status_code in (302, 404)
    assert "onboarding" not in charlie_client.get(reverse("admin:battles_experiment_changelist")).content.decode()


def test_a_manager_configures_an_experiment_in_the_admin_audited(acme, alice_client):
    from raters.models import AuditAction, AuditEvent

    response = alice_client.post(
        reverse("admin:battles_experiment_add"),
        {
            "organization": acme.organization.pk,
            "key": "search-ranking",
            "name": "Search ranking",
            "description": "",
            "campaign": acme.campaign.pk,
            "active": "on",
            "variants-TOTAL_FORMS": "2",
            "variants-INITIAL_FORMS": "0",
            "variants-MIN_NUM_FORMS": "0",
            "variants-MAX_NUM_FORMS": "1000",
            "variants-0-name": "control",
            "variants-0-weight": "1",
            "variants-0-competitor": acme.left.pk,
            "variants-1-name": "treatment",
            "variants-1-weight": "2.5",
            "variants-1-competitor": acme.right.pk,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    experiment = Experiment.objects.get(key="search-ranking")
    assert [(v.name, v.weight, v.competitor_id) for v in experiment.variants.order_by("id")] == [
        ("control", 1.0, acme.left.pk),
        ("treatment", 2.5, acme.right.pk),
    ]
    actions = list(
        AuditEvent.objects.filter(object_type=experiment._meta.label_lower, object_id=str(experiment.pk)).values_list(
            "action", flat=True
        )
    )
    assert actions.count(AuditAction.EXPERIMENT_CREATED) == 1 and actions.count(AuditAction.EXPERIMENT_CHANGED) == 2


def test_a_competitor_named_by_a_variant_cannot_be_deleted(acme):
    experiment = _experiment(acme, campaign=acme.campaign)
    spare = CompetitorFactory.create(campaign=acme.campaign)
    Variant.objects.create(experiment=experiment, name="spare", competitor=spare)
    with pytest.raises(Conflict):
        services.competitor_delete(competitor=spare, actor=None)
    assert Variant.objects.filter(competitor=spare).exists()


def test_a_campaign_used_by_an_experiment_cannot_be_deleted(acme):
    _experiment(acme, campaign=acme.campaign)
    with pytest.raises(Conflict):
        services.campaign_delete(campaign=acme.campaign, actor=None)
    assert Experiment.objects.filter(campaign=acme.campaign).exists()
