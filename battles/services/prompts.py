"""Prompts: built (validated, hashed, classified), imported into a campaign's pool in bulk, or saved
one at a time from the console."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction

from core.errors import Conflict, Invalid
from raters.models import AuditAction
from raters.services import audit_record
from serving.analysis import prompt_asks_identity

from ..models import Battle, Campaign, Prompt
from ..prompt_import import ERRORS_LISTED, PromptRow
from ..prompting import prompt_classify, prompt_hash, prompt_validate
from .errors import CampaignClosed


def prompt_build(
    *,
    campaign: Campaign,
    text: str,
    source: str,
    author: User | AnonymousUser | None = None,
    category: str = "",
    language: str = "",
) -> Prompt:
    """A validated, hashed and classified prompt (not yet saved). Category and language given by the
    manager win; otherwise the deterministic classifier decides."""
    try:
        clean = prompt_validate(text)
    except ValueError as exc:
        raise Invalid(str(exc), field_errors={"text": str(exc)}) from None
    # The classifier costs about a millisecond a prompt: a file that names both is imported without it.
    auto_category, auto_language = prompt_classify(clean) if not (category and language) else ("", "")
    return Prompt(
        organization_id=campaign.organization_id,
        campaign=campaign,
        text=clean,
        text_hash=prompt_hash(clean),
        asks_identity=prompt_asks_identity(clean),
        category=category or auto_category,
        language=language or auto_language,
        source=source,
        author=author if author is not None and author.is_authenticated else None,
    )


@dataclass(frozen=True)
class PromptsImported:
    """What an import stored: the new prompts' ids in file order, the external ids skipped because the
    campaign had them already (``on_duplicate="skip"``), and how many new prompts repeat the text of
    an earlier prompt (the campaign's or the file's, by normalised hash: allowed, and counted)."""

    prompt_ids: list[int]
    skipped_external_ids: list[str]
    repeated_texts: int


_IMPORT_CHUNK = 2000


def _audit_actor(actor: Any) -> User | None:
    # An API key acts for its organisation, not as a person: the audit row names no user then.
    return actor if isinstance(actor, User) else None


@transaction.atomic
def prompts_import(
    *,
    campaign: Campaign,
    rows: Sequence[PromptRow],
    actor: User | AnonymousUser | None,
    on_duplicate: str = "error",
    via: str = "console",
) -> PromptsImported:
    """Add parsed rows (``battles.prompt_import``) to the campaign's pool, all or nothing.

    Each prompt is validated, hashed and classified as every prompt is (``prompt_build``). An external
    id the campaign already has is an error naming the row, or, with ``on_duplicate="skip"``, that row
    is left out. A closed campaign takes no prompts (``Conflict``). The campaign row is locked, so two
    imports into one campaign run one after the other and see each other's external ids; the unique
    constraint stays the last word."""
    if on_duplicate not in ("error", "skip"):
        raise Invalid("on_duplicate is error or skip.", field_errors={"on_duplicate": "Choose error or skip."})
    locked = Campaign.objects.select_for_update().get(pk=campaign.pk)
    if locked.status == Campaign.Status.CLOSED:
        raise CampaignClosed("The campaign is closed; it takes no new prompts.")
    if not rows:
        raise Invalid("The file has no rows; nothing was imported.", field_errors={"file": "The file has no rows."})

    external_ids = [row.external_id for row in rows if row.external_id]
    taken: set[str] = set()
    for start in range(0, len(external_ids), _IMPORT_CHUNK):
        taken.update(
            Prompt.objects.filter(
                campaign=campaign, external_id__in=external_ids[start : start + _IMPORT_CHUNK]
            ).values_list("external_id", flat=True)
        )
    skipped: list[str] = []
    if taken and on_duplicate == "error":
        clashes = [row for row in rows if row.external_id in taken]
        listed = clashes[:ERRORS_LISTED]
        more = f" (the first {len(listed)} are listed)" if len(listed) < len(clashes) else ""
        raise Invalid(
            f"{len(clashes)} rows name an external id the campaign already has{more}; nothing was imported. "
            "Import with on_duplicate=skip to leave those rows out.",
            field_errors={
                f"row {row.row}.external_id": "The campaign already has a prompt with this external id."
                for row in listed
            },
        )
    if taken:
        skipped = [row.external_id for row in rows if row.external_id in taken]
        rows = [row for row in rows if row.external_id not in taken]

    prompts: list[Prompt] = []
    for row in rows:
        try:
            prompt = prompt_build(
                campaign=campaign,
                text=row.text,
                source=Prompt.Source.POOL,
                author=actor if isinstance(actor, User) else None,
                category=row.category,
                language=row.language,
            )
        except Invalid as exc:
            raise Invalid(
                f"Row {row.row}: {exc.message} Nothing was imported.",
                field_errors={f"row {row.row}.{name}": errors for name, errors in exc.field_errors.items()},
            ) from None
        prompt.external_id = row.external_id
        prompts.append(prompt)

    hashes = sorted({prompt.text_hash for prompt in prompts})
    known: set[str] = set()
    for start in range(0, len(hashes), _IMPORT_CHUNK):
        known.update(
            Prompt.objects.filter(campaign=campaign, text_hash__in=hashes[start : start + _IMPORT_CHUNK]).values_list(
                "text_hash", flat=True
            )
        )
    repeated = 0
    for prompt in prompts:
        repeated += prompt.text_hash in known
        known.add(prompt.text_hash)

    try:
        with transaction.atomic():
            Prompt.objects.bulk_create(prompts, batch_size=1000)
    except IntegrityError:
        # Only a concurrent writer that bypassed the campaign lock could get here.
        raise Conflict("Another import added some of these external ids meanwhile; nothing was imported.") from None
    audit_record(
        organization=campaign.organization,
        actor=_audit_actor(actor),
        action=AuditAction.PROMPTS_IMPORTED,
        obj=campaign,
        data={"count": len(prompts), "skipped": len(skipped), "repeated_texts": repeated, "via": via},
    )
    return PromptsImported(
        prompt_ids=[prompt.pk for prompt in prompts], skipped_external_ids=skipped, repeated_texts=repeated
    )


@transaction.atomic
def prompt_save(*, prompt: Prompt, actor: User | AnonymousUser | None, changed: list[str]) -> Prompt:
    """Create or change a pool prompt: validated, hashed and classified like every prompt. A prompt
    that has battles keeps its text (votes record its hash); its category, language and ``active``
    may still change."""
    created = prompt._state.adding
    if prompt.organization_id is not None and prompt.campaign.organization_id != prompt.organization_id:
        raise Invalid(
            "The campaign must belong to the prompt's organisation.",
            field_errors={"campaign": "The campaign must belong to the prompt's organisation."},
        )
    if not created:
        stored = Prompt.objects.select_for_update().get(pk=prompt.pk)
        if stored.text != prompt.text and Battle.objects.filter(prompt=stored).exists():
            raise Conflict(
                "This prompt has battles, so its text cannot change: add a new prompt instead.",
                field_errors={"text": "Fixed once the prompt has battles; add a new prompt instead."},
            )
    built = prompt_build(
        campaign=prompt.campaign,
        text=prompt.text,
        source=prompt.source or Prompt.Source.POOL,
        category=prompt.category,
        language=prompt.language if not created else "",
    )
    prompt.organization_id = built.organization_id
    prompt.text, prompt.text_hash, prompt.language = built.text, built.text_hash, built.language
    prompt.save()
    audit_record(
        organization=prompt.campaign.organization,
        actor=actor,
        action=AuditAction.PROMPT_CREATED if created else AuditAction.PROMPT_CHANGED,
        obj=prompt,
        data={"fields": changed},
    )
    return prompt
