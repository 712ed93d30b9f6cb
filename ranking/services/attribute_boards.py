"""Attribute boards (ratio judgements): create a board with its entities, add entities, change its
settings, publish, unpublish and delete it. Audited. (Its runs: ``attribute_runs``.)"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from battles.models import Judge, Rubric
from core.errors import Conflict, Invalid
from raters.models import AuditAction, Organization
from raters.services import audit_record

from ..models import AttributeBoard, AttributeEntity, AttributeRun
from .publication import board_slug_new


@dataclass(frozen=True)
class EntityInput:
    text: str
    label: str = ""


ENTITY_TEXT_MAX = 20_000
BOARD_ENTITIES_MAX = 20_000


def _check_judge(judge: Judge, organization_id: int) -> None:
    if judge.organization_id != organization_id:
        raise Invalid("The judge must belong to the board's organisation.", field_errors={"judge": "Not yours."})
    if judge.rubric.kind != Rubric.Kind.RATIO:
        raise Invalid(
            "An attribute board needs a judge whose rubric is of kind ratio.",
            field_errors={"judge": "Its rubric is not a ratio rubric."},
        )
    if not judge.active:
        raise Invalid("This judge is not active.", field_errors={"judge": "Inactive."})


def _entities_add(board: AttributeBoard, entities: Sequence[EntityInput]) -> list[AttributeEntity]:
    errors = {
        f"entities.{k}.text": "Empty, or longer than 20,000 characters."
        for k, e in enumerate(entities)
        if not e.text.strip() or len(e.text) > ENTITY_TEXT_MAX
    }
    if errors:
        raise Invalid("Some entities are empty or too long.", field_errors=errors)
    # The board's row lock orders concurrent additions, so positions stay 0, 1, 2, ... with no gap.
    AttributeBoard.objects.select_for_update().filter(pk=board.pk).first()
    start = AttributeEntity.objects.filter(board=board).aggregate(m=Max("position"))["m"]
    start = -1 if start is None else start
    if start + 1 + len(entities) > BOARD_ENTITIES_MAX:
        raise Invalid(f"A board holds at most {BOARD_ENTITIES_MAX} entities.")
    return AttributeEntity.objects.bulk_create(
        [
            AttributeEntity(
                organization_id=board.organization_id, board=board, position=start + 1 + k, text=e.text, label=e.label
            )
            for k, e in enumerate(entities)
        ]
    )


@transaction.atomic
def attribute_board_create(
    *,
    organization: Organization,
    name: str,
    attribute: str,
    judge: Judge,
    entities: Sequence[EntityInput] = (),
    seed: int = 0,
    calls_per_entity: int = 8,
    top_k: int = 10,
    batch_size: int = 16,
    actor: User | None,
    via: str = "console",
) -> AttributeBoard:
    """A new board with its first entities. Audited; ``actor`` None for an API key (``via`` names it)."""
    _check_judge(judge, organization.pk)
    if not attribute.strip():
        raise Invalid("Name the attribute.", field_errors={"attribute": "Required."})
    if calls_per_entity < 2 or top_k < 1 or batch_size < 1:
        raise Invalid("calls_per_entity must be at least 2, top_k and batch_size at least 1.")
    if AttributeBoard.objects.filter(organization=organization, name=name).exists():
        raise Invalid("A board of this name exists.", field_errors={"name": "Already used."})
    board = AttributeBoard.objects.create(
        organization=organization,
        name=name,
        attribute=attribute,
        judge=judge,
        seed=seed,
        calls_per_entity=calls_per_entity,
        top_k=top_k,
        batch_size=batch_size,
    )
    added = _entities_add(board, entities)
    audit_record(
        organization=organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_CREATED,
        obj=board,
        data={"name": name, "judge": judge.pk, "entities": len(added), "via": via},
    )
    return board


@transaction.atomic
def attribute_entities_add(
    *, board: AttributeBoard, entities: Sequence[EntityInput], actor: User | None, via: str = "console"
) -> list[AttributeEntity]:
    """Append entities (runs started later see them; earlier runs keep the entities they saw)."""
    added = _entities_add(board, entities)
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_ENTITIES_ADDED,
        obj=board,
        data={"entities": len(added), "via": via},
    )
    return added


@transaction.atomic
def attribute_board_publish(
    *, board: AttributeBoard, actor: User | None, listed: bool = False, via: str = "console"
) -> tuple[str, bool]:
    """Publish the board (its newest finished run, its ledger) at a random public address; publishing a
    published board keeps its address. ``listed``: the board also appears in the public index of published
    boards (publishing again sets it anew). Returns the slug and whether it is new. Audited."""
    locked = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    created = locked.public_slug is None
    if created:
        locked.public_slug = board_slug_new()
        locked.published_at = timezone.now()
    locked.public_listed = listed
    locked.save(update_fields=["public_slug", "published_at", "public_listed"])
    board.public_slug, board.published_at, board.public_listed = locked.public_slug, locked.published_at, listed
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_PUBLISHED,
        obj=board,
        data={"slug": locked.public_slug, "new": created, "listed": listed, "via": via},
    )
    assert locked.public_slug is not None
    return locked.public_slug, created


@transaction.atomic
def attribute_board_unpublish(*, board: AttributeBoard, actor: User | None, via: str = "console") -> bool:
    """Take the board off its public address (which then answers 404 and is never reused)."""
    locked = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    if locked.public_slug is None:
        return False
    slug = locked.public_slug
    locked.public_slug, locked.published_at, locked.public_listed = None, None, False
    locked.save(update_fields=["public_slug", "published_at", "public_listed"])
    board.public_slug, board.published_at, board.public_listed = None, None, False
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_UNPUBLISHED,
        obj=board,
        data={"slug": slug, "via": via},
    )
    return True


BOARD_SETTINGS = ("name", "attribute", "seed", "calls_per_entity", "top_k", "batch_size")


@transaction.atomic
def attribute_board_change(
    *, board: AttributeBoard, actor: User | None, changed: Sequence[str], via: str = "console"
) -> AttributeBoard:
    """Save a board's settings (its judge and organisation are fixed: another judge is a replication
    run). Runs already made keep what they recorded (attribute, seed, budget). Audited."""
    stored = AttributeBoard.objects.select_for_update().get(pk=board.pk)
    if (stored.judge_id, stored.organization_id) != (board.judge_id, board.organization_id):
        raise Invalid("A board's judge and organisation are fixed; start a run with another judge instead.")
    if not board.attribute.strip():
        raise Invalid("Name the attribute.", field_errors={"attribute": "Required."})
    if board.calls_per_entity < 2 or board.top_k < 1 or board.batch_size < 1:
        raise Invalid("calls_per_entity must be at least 2, top_k and batch_size at least 1.")
    if AttributeBoard.objects.filter(organization_id=board.organization_id, name=board.name).exclude(pk=board.pk):
        raise Invalid("A board of this name exists.", field_errors={"name": "Already used."})
    fields = [f for f in changed if f in BOARD_SETTINGS]
    board.save(update_fields=fields or None)
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_CHANGED,
        obj=board,
        data={"changed": fields, "via": via},
    )
    return board


class AttributeBoardHasRuns(Conflict):
    pass


@transaction.atomic
def attribute_board_delete(*, board: AttributeBoard, actor: User | None, via: str = "console") -> None:
    """Delete a board that never ran (a run's ledger is kept for good: it may be public)."""
    if AttributeRun.objects.filter(board=board).exists():
        raise AttributeBoardHasRuns("This board has runs: their judgement ledger is kept, so it cannot be deleted.")
    audit_record(
        organization=board.organization,
        actor=actor,
        action=AuditAction.ATTRIBUTE_BOARD_DELETED,
        obj=board,
        data={"name": board.name, "via": via},
    )
    board.delete()
