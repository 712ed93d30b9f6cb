"""The console's attribute boards: a manager creates a board with entities, starts a run, reads its
scores and ledger, publishes it; every change through the services (audited); an outsider sees nothing."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from ranking import services
from ranking.models import AttributeBoard, AttributeRun
from raters.models import AuditAction, AuditEvent
from tests.conftest import Tenant

from .attribute_world import ratio_judge
from .ratio_sim import entity_text, fake_generate

pytestmark = pytest.mark.django_db


def test_a_manager_runs_a_board_from_the_console(
    acme: Tenant, alice_client: Client, charlie_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("serving.ratio_judging.generate", fake_generate())
    judge = ratio_judge(acme.organization)
    lines = "\n".join(entity_text(k / 2, f"Text {k}") for k in range(8))
    response = alice_client.post(
        reverse("admin:ranking_attributeboard_add"),
        {
            "organization": acme.organization.pk,
            "name": "Formality",
            "attribute": "how formal the text is",
            "judge": judge.pk,
            "seed": "0",
            "calls_per_entity": "8",
            "top_k": "2",
            "batch_size": "8",
            "new_entities": lines,
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    board = AttributeBoard.objects.get(name="Formality")
    assert board.entities.count() == 8
    changelist = reverse("admin:ranking_attributeboard_changelist")
    alice_client.post(changelist, {"action": "start_runs", "_selected_action": [board.pk]})
    run = AttributeRun.objects.get(board=board)
    services.attribute_run_execute(run_id=run.pk)  # the worker's part
    page = alice_client.get(reverse("admin:ranking_attributerun_change", args=[run.pk])).content.decode()
    assert "Top scores" in page and "Text 7" in page
    ledger = alice_client.get(reverse("admin:ranking_attributejudgement_changelist") + f"?run__id__exact={run.pk}")
    assert ledger.status_code == 200 and "accepted" in ledger.content.decode()
    alice_client.post(changelist, {"action": "publish_boards", "_selected_action": [board.pk]})
    board.refresh_from_db()
    assert board.public_slug
    # A change to the settings is audited; the judge stays.
    change = alice_client.post(
        reverse("admin:ranking_attributeboard_change", args=[board.pk]),
        {
            "name": "Formality",
            "attribute": "how formal",
            "seed": "3",
            "calls_per_entity": "8",
            "top_k": "2",
            "batch_size": "8",
            "new_entities": "one more [[true=1]]",
        },  # fmt: skip
    )
    assert change.status_code == 302, change.content.decode()[:3000]
    board.refresh_from_db()
    assert board.seed == 3 and board.attribute == "how formal" and board.entities.count() == 9
    # A board with runs keeps its ledger: it cannot be deleted.
    alice_client.post(reverse("admin:ranking_attributeboard_delete", args=[board.pk]), {"post": "yes"})
    assert AttributeBoard.objects.filter(pk=board.pk).exists()
    actions = set(AuditEvent.objects.filter(organization=acme.organization).values_list("action", flat=True))
    assert {
        AuditAction.ATTRIBUTE_BOARD_CREATED,
        AuditAction.ATTRIBUTE_RUN_STARTED,
        AuditAction.ATTRIBUTE_BOARD_PUBLISHED,
        AuditAction.ATTRIBUTE_BOARD_CHANGED,
        AuditAction.ATTRIBUTE_ENTITIES_ADDED,
    } <= actions
    # An outsider's console has none of it.
    for name in ("attributeboard", "attributerun", "attributejudgement", "attributeentity"):
        assert "Formality" not in charlie_client.get(reverse(f"admin:ranking_{name}_changelist")).content.decode()
    outsider = charlie_client.get(reverse("admin:ranking_attributeboard_change", args=[board.pk]))
    assert outsider.status_code in (302, 404)
