"""A crowd study's link carries rater attributes (``Study.attribute_parameters``): read once, when a
participant first arrives, into the study organisation's rater attributes (source "vendor")."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from battles.admin.studies import study_entry_link
from raters.models import AuditEvent, RaterAttribute
from tests.conftest import Tenant

from .test_study import enter, make_study

pytestmark = pytest.mark.django_db


def test_a_participants_vendor_fields_become_their_rater_attributes_once(acme: Tenant, globex: Tenant) -> None:
    study = make_study(acme, attribute_parameters={"lang": "language", "exp": "expertise", "job": "occupation"})
    assert study_entry_link(study).endswith("&lang=<language>&exp=<expertise>&job=<occupation>")
    # A malformed value (markup) is skipped, not refused: the participant still enters.
    client, participant = enter(study, lang="fr", exp="<b>x</b>", job="")
    attributes = {a.key: (a.value, a.source) for a in RaterAttribute.objects.filter(rater=participant.user)}
    assert attributes == {"language": ("fr", "vendor")}
    attribute = RaterAttribute.objects.get(rater=participant.user)
    assert attribute.organization_id == acme.organization.pk
    event = AuditEvent.objects.get(action="rater_attribute.created", object_id=str(attribute.pk))
    assert event.actor is None and event.data["source"] == "vendor"
    # Coming back with other values changes nothing (a manager may have corrected them since).
    enter(study, client, lang="de")
    assert RaterAttribute.objects.get(rater=participant.user).value == "fr"
    # A study without attribute parameters reads none, whatever the link carries.
    plain = make_study(globex, name="Plain")
    _, other = enter(plain, pid="bbbbbbbbbbbbbbbbbbbbbbbb", lang="fr")
    assert not RaterAttribute.objects.filter(rater=other.user).exists()


@pytest.mark.parametrize(
    "parameters",
    [
        {"PROLIFIC_PID": "language"},
        {"lang": "Language"},
        {"1lang": "language"},
        {"lang": "language", "language": "language"},
        ["lang"],
        {f"p{k}": f"k{k}" for k in range(11)},
    ],
)
def test_attribute_parameters_are_validated(acme: Tenant, parameters: object) -> None:
    with pytest.raises(ValidationError) as refused:
        make_study(acme, attribute_parameters=parameters)
    assert "attribute_parameters" in refused.value.message_dict
