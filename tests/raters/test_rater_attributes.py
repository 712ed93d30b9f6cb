"""Rater attributes (the rater-segment boards' segments): set by a manager in the console, audited, one value
per rater and key, and never across tenants: a rater of another organisation cannot be tagged, another
tenant's manager sees none of them."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django_scopes import scope

from core.errors import Invalid
from raters.models import AuditEvent, RaterAttribute
from raters.selectors import rater_attributes_by_key
from raters.services import rater_attribute_remove, rater_attribute_set

pytestmark = pytest.mark.django_db


def test_set_change_and_remove_are_audited_and_one_value_per_key(acme, alice, bob):
    first = rater_attribute_set(organization=acme.organization, rater=bob, key=" Language ", value=" fr ", actor=alice)
    assert (first.key, first.value, first.source, first.updated_by) == ("language", "fr", "manager", alice)
    same = rater_attribute_set(organization=acme.organization, rater=bob, key="language", value="fr", actor=alice)
    assert same.pk == first.pk
    changed = rater_attribute_set(organization=acme.organization, rater=bob, key="language", value="de", actor=None)
    assert changed.pk == first.pk and RaterAttribute.objects.get(pk=first.pk).value == "de"
    events = list(AuditEvent.objects.filter(object_id=str(first.pk)).order_by("created_at", "id"))
    assert [e.action for e in events] == ["rater_attribute.created", "rater_attribute.changed"]  # nothing if unchanged
    assert events[1].data == {"rater": bob.pk, "key": "language", "value": "de", "before": "fr", "source": "manager"}
    assert rater_attributes_by_key(organization_id=acme.organization.pk, rater_ids=[bob.pk, 12345]) == {
        "language": {bob.pk: "de"}
    }
    rater_attribute_remove(attribute=changed, actor=alice)
    assert not RaterAttribute.objects.exists()
    assert AuditEvent.objects.filter(action="rater_attribute.deleted", data__value="de").exists()


@pytest.mark.parametrize(
    ("key", "value", "field"),
    [
        ("Lang uage", "fr", "key"),
        ("9lang", "fr", "key"),
        ("language", "   ", "value"),
        ("language", "x" * 101, "value"),
    ],
)
def test_malformed_keys_and_values_are_refused(acme, alice, bob, key, value, field):
    with pytest.raises(Invalid) as refused:
        rater_attribute_set(organization=acme.organization, rater=bob, key=key, value=value, actor=alice)
    assert field in refused.value.field_errors
    assert not RaterAttribute.objects.exists()


def test_a_rater_of_another_organisation_cannot_be_tagged_nor_seen(acme, globex, alice, bob, charlie):
    with pytest.raises(Invalid) as refused:
        rater_attribute_set(organization=acme.organization, rater=charlie, key="language", value="fr", actor=alice)
    assert "rater" in refused.value.field_errors
    rater_attribute_set(organization=acme.organization, rater=bob, key="language", value="fr", actor=alice)
    with scope(organization=[globex.organization.pk]):
        assert not RaterAttribute.objects.exists()
        assert rater_attributes_by_key(organization_id=acme.organization.pk, rater_ids=[bob.pk]) == {}
    with scope(organization=[acme.organization.pk]):
        assert RaterAttribute.objects.count() == 1


def test_the_console_sets_an_attribute_and_hides_it_from_another_tenant(
    acme, globex, bob, alice_client, charlie_client
):
    response = alice_client.post(
        reverse("admin:raters_raterattribute_add"),
        {"organization": acme.organization.pk, "rater": bob.pk, "key": "expertise", "value": "medicine"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    attribute = RaterAttribute.objects.get(rater=bob, key="expertise")
    assert attribute.value == "medicine" and attribute.source == "manager"
    assert AuditEvent.objects.filter(action="rater_attribute.created", object_id=str(attribute.pk)).exists()
    response = alice_client.post(
        reverse("admin:raters_raterattribute_change", args=[attribute.pk]),
        {"organization": acme.organization.pk, "value": "law"},
    )
    assert response.status_code == 302
    attribute.refresh_from_db()
    assert attribute.value == "law"
    assert AuditEvent.objects.filter(action="rater_attribute.changed", data__before="medicine").exists()
    # Another tenant's manager: not in the list, and the row's own page is not there.
    listing = charlie_client.get(reverse("admin:raters_raterattribute_changelist"))
    assert listing.status_code == 200 and "medicine" not in listing.content.decode()
    assert "law" not in listing.content.decode()
    page = charlie_client.get(reverse("admin:raters_raterattribute_change", args=[attribute.pk]))
    assert page.status_code in (302, 404)
    if page.status_code == 302:
        assert reverse("admin:index") in page["Location"]
    refused = charlie_client.post(
        reverse("admin:raters_raterattribute_change", args=[attribute.pk]),
        {"organization": acme.organization.pk, "value": "hacked"},
    )
    assert refused.status_code in (302, 404)
    attribute.refresh_from_db()
    assert attribute.value == "law"
