"""Gold battles and attention checks: gold items (saved, imported, drawn), the gold battles made of
them, and what a vote on one decides (an attention failure, a qualification's outcome). The
qualification gate itself is part of handing out battles (``assignment._qualification_battle``)."""

from __future__ import annotations

import csv
import io
import random

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, Invalid
from raters.models import AuditAction, RaterFlag, RaterPool
from raters.services import audit_record, rater_flag_raise
from serving.analysis import answer_model_mentions, style_counts

from .. import selectors
from ..gold import Corruption, attention_answer_corrupt
from ..models import Battle, Campaign, Choice, Competitor, Generation, GoldItem, Prompt, Qualification, Side, Vote
from ..prompting import prompt_hash, prompt_validate
from ..rendering import answer_rendered
from .prompts import prompt_build

_rng = random.SystemRandom()


# --- Gold battles and attention checks ---------------------------------------------------------------

# The pseudo-competitors that present a gold item's answers: a neutral name, revealed after the vote
# like a model's (nothing on the page says "gold" or "test" unless the campaign's gold_feedback is on).
GOLD_COMPETITOR_NAME = "Reference answer"
GOLD_VERSIONS = ("1", "2")
# Fields of a gold item fixed once it has been served: its verdict was stamped on those battles.
GOLD_FIXED_FIELDS = ("prompt_text", "answer_1", "answer_2", "expected", "kind", "campaign_id")


@transaction.atomic
def gold_item_save(*, item: GoldItem, actor: User | AnonymousUser | None, changed: list[str]) -> GoldItem:
    """Create or change a gold item (or attention check). Once served, its prompt, answers, verdict and
    kind are fixed (the battles recorded its verdict); ``active``, category and note may change."""
    created = item._state.adding
    item.organization_id = item.campaign.organization_id
    if not created:
        stored = GoldItem.objects.select_for_update().get(pk=item.pk)
        moved = [f for f in GOLD_FIXED_FIELDS if getattr(stored, f) != getattr(item, f)]
        if moved and Battle.objects.filter(gold_item=stored).exists():
            raise Conflict(
                "This item has been served to raters, so its prompt, answers and verdict are fixed: add a new item.",
                field_errors={f.removesuffix("_id"): "Fixed once the item has been served." for f in moved},
            )
    try:
        item.prompt_text = prompt_validate(item.prompt_text)
    except ValueError as exc:
        raise Invalid(str(exc), field_errors={"prompt_text": str(exc)}) from None
    try:
        item.full_clean()
    except ValidationError as exc:
        raise Invalid(" ".join(exc.messages), field_errors=exc.message_dict) from None
    item.save()
    audit_record(
        organization=item.campaign.organization,
        actor=actor,
        action=AuditAction.GOLD_ITEM_CREATED if created else AuditAction.GOLD_ITEM_CHANGED,
        obj=item,
        data={"fields": changed, "kind": item.kind},
    )
    return item


@transaction.atomic
def gold_item_delete(*, item: GoldItem, actor: User | AnonymousUser | None) -> None:
    """Delete an item never served; a served one is kept (its battles and votes point at it): deactivate it."""
    if Battle.objects.filter(gold_item=item).exists():
        raise Conflict("This item has been served to raters and is kept with their votes: deactivate it instead.")
    audit_record(
        organization=item.campaign.organization,
        actor=actor,
        action=AuditAction.GOLD_ITEM_DELETED,
        obj=item,
        data={"kind": item.kind},
    )
    item.delete()


GOLD_IMPORT_MAX_ROWS = 2000
GOLD_IMPORT_COLUMNS = ("prompt", "answer_1", "answer_2", "expected", "kind", "category", "language", "corrupt", "note")


@transaction.atomic
def gold_items_import(*, campaign: Campaign, text: str, actor: User | AnonymousUser | None) -> list[GoldItem]:
    """Gold items from CSV with a header row (columns ``GOLD_IMPORT_COLUMNS``; ``prompt``, ``expected``
    and the answers required, ``kind`` gold by default; an attention check may leave the broken answer
    empty and name a ``corrupt`` method to make it from the good one). All or none: every bad row and
    field is named (``row 3: answer_2``) and nothing is written."""
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    unknown = sorted(set(header) - set(GOLD_IMPORT_COLUMNS))
    missing = sorted({"prompt", "expected", "answer_1", "answer_2"} - set(header))
    if unknown or missing:
        problems = ([f"unknown columns: {', '.join(unknown)}"] if unknown else []) + (
            [f"missing columns: {', '.join(missing)}"] if missing else []
        )
        raise Invalid(f"The header row is wrong ({'; '.join(problems)}).", field_errors={"header": problems})
    errors: dict[str, list[str]] = {}
    made: list[GoldItem] = []
    for number, raw in enumerate(reader, start=2):  # row 1 is the header
        if number - 1 > GOLD_IMPORT_MAX_ROWS:
            raise Invalid(f"At most {GOLD_IMPORT_MAX_ROWS} rows a file.", field_errors={"file": ["too many rows"]})
        row = {key.strip(): (value or "").strip() for key, value in raw.items() if key is not None}
        answers = {"answer_1": row.get("answer_1", ""), "answer_2": row.get("answer_2", "")}
        method = row.get("corrupt", "")
        if method:
            good, broken = ("answer_1", "answer_2") if row.get("expected") == "answer_1" else ("answer_2", "answer_1")
            if row.get("kind") != GoldItem.Kind.ATTENTION or row.get("expected") not in ("answer_1", "answer_2"):
                errors.setdefault(f"row {number}: corrupt", []).append(
                    "Only an attention check with answer_1 or answer_2 expected can be generated."
                )
                continue
            if method not in {c.value for c in Corruption} or not answers[good]:
                errors.setdefault(f"row {number}: corrupt", []).append(
                    f"Use one of {', '.join(c.value for c in Corruption)}, with the good answer written."
                )
                continue
            answers[broken] = attention_answer_corrupt(answers[good], method=method, seed=number)
        item = GoldItem(
            campaign=campaign,
            prompt_text=row.get("prompt", ""),
            answer_1=answers["answer_1"],
            answer_2=answers["answer_2"],
            expected=row.get("expected", ""),
            kind=row.get("kind") or GoldItem.Kind.GOLD,
            category=row.get("category") or "other",
            language=row.get("language") or "und",
            note=row.get("note", ""),
        )
        try:
            made.append(gold_item_save(item=item, actor=actor, changed=["imported"]))
        except Invalid as exc:
            for field, problems in (exc.field_errors or {"": [exc.message]}).items():
                column = "prompt" if field == "prompt_text" else field
                listed = problems if isinstance(problems, list) else [str(problems)]
                errors.setdefault(f"row {number}: {column}" if column else f"row {number}", []).extend(listed)
    if errors:
        first = next(iter(errors.items()))
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise Invalid(f"{first[0]}: {first[1][0]}{more}; nothing was imported.", field_errors=errors)
    return made


def gold_item_draw(*, campaign: Campaign, user: User) -> GoldItem | None:
    """Whether the rater's next battle is gold, and which item: with probability ``gold_rate``, one of
    the active items this rater has never been served. Deterministic per rater sequence (seeded by
    campaign, rater and how many battles they have been handed), so a rater cannot reload their way
    round a check: a new request for the same position draws the same answer."""
    if campaign.gold_rate <= 0:
        return None
    served = selectors.battles_served_to(campaign=campaign, user=user)
    rng = random.Random(f"gold:{campaign.pk}:{user.pk}:{served}")
    if rng.random() >= campaign.gold_rate:
        return None
    ids = sorted(selectors.gold_items_unseen(campaign=campaign, user=user).values_list("pk", flat=True))
    if not ids:
        return None
    return GoldItem.objects.get(pk=rng.choice(ids))


def gold_competitors(*, campaign: Campaign) -> tuple[Competitor, Competitor]:
    """The campaign's two gold pseudo-competitors (answer 1, answer 2), created on first use: external
    competitors marked ``gold``, never ranked, drawn, matched by a shadow battle or listed."""
    pair = []
    for version in GOLD_VERSIONS:
        competitor = Competitor.objects.filter(campaign=campaign, gold=True, version_label=version).first()
        if competitor is None:
            with transaction.atomic():
                competitor, _ = Competitor.objects.get_or_create(
                    campaign=campaign,
                    endpoint=None,
                    external_model=GOLD_COMPETITOR_NAME,
                    version_label=version,
                    defaults={"organization_id": campaign.organization_id, "gold": True},
                )
        pair.append(competitor)
    return pair[0], pair[1]


def _gold_generation(*, battle: Battle, side: str, competitor: Competitor, text: str) -> Generation:
    return Generation(
        battle=battle,
        side=side,
        competitor=competitor,
        text=text,
        **answer_rendered(text),
        output_tokens=len(text.split()),
        finish_reason="stop",
        latency_s=0.0,
        style=style_counts(text).as_dict(),
        model_mentions=list(answer_model_mentions(text)),
    )


@transaction.atomic
def gold_battle_create(*, campaign: Campaign, user: User, pool: RaterPool, item: GoldItem, session_key: str) -> Battle:
    """A battle of the item for this rater, ready at once like one claimed from the buffer: the same
    page, renderer and flow; the side shown left a coin flip; the verdict in this battle's sides
    stamped on it (``gold_expected``). The one-open-battle constraint may refuse it (IntegrityError)."""
    one, two = gold_competitors(campaign=campaign)
    prompt = Prompt.objects.filter(
        campaign=campaign, source=Prompt.Source.GOLD, text_hash=prompt_hash(item.prompt_text)
    ).first()
    if prompt is None:
        prompt = prompt_build(
            campaign=campaign,
            text=item.prompt_text,
            source=Prompt.Source.GOLD,
            category=item.category,
            language=item.language if item.language != "und" else "",
        )
        prompt.save()
    swapped = _rng.random() < 0.5
    left, right = (two, one) if swapped else (one, two)
    texts = (item.answer_2, item.answer_1) if swapped else (item.answer_1, item.answer_2)
    expected = {
        GoldItem.Expected.ANSWER_1: Choice.RIGHT if swapped else Choice.LEFT,
        GoldItem.Expected.ANSWER_2: Choice.LEFT if swapped else Choice.RIGHT,
    }.get(GoldItem.Expected(item.expected), Choice.BOTH_BAD)
    now = timezone.now()
    with transaction.atomic():  # a savepoint: the unique open-battle constraint may refuse this row
        battle = Battle.objects.create(
            organization_id=campaign.organization_id,
            campaign=campaign,
            rater=user,
            pool=pool,
            prompt=prompt,
            left=left,
            right=right,
            status=Battle.Status.READY,
            source=Battle.Source.GOLD,
            params={"system_prompt": campaign.system_prompt},
            session_key=session_key,
            ready_at=now,
            requested_at=now,
            claimed_at=now,
            gold_item=item,
            gold_expected=expected,
        )
    Generation.objects.bulk_create(
        [
            _gold_generation(battle=battle, side=Side.LEFT, competitor=left, text=texts[0]),
            _gold_generation(battle=battle, side=Side.RIGHT, competitor=right, text=texts[1]),
        ]
    )
    return battle


def _attention_assess(*, vote: Vote, battle: Battle) -> None:
    """After a vote on an attention check: at ``attention_block_after`` failures the rater is flagged
    (a new RaterFlag row, audited; their votes then leave the rankings by the exclusion policy) and the
    claim refuses them. The warning is the page's (``attention_warning``)."""
    campaign = battle.campaign
    if campaign.attention_block_after is None or battle.gold_item is None:
        return
    if battle.gold_item.kind != GoldItem.Kind.ATTENTION:
        return
    failures = selectors.attention_failures(campaign=campaign, user=vote.rater)
    if failures < campaign.attention_block_after:
        return
    rater_flag_raise(
        organization=campaign.organization,
        rater=vote.rater,
        kind=RaterFlag.Kind.ATTENTION,
        campaign_id=campaign.pk,
        reason=f"Failed {failures} attention checks in campaign {campaign.name!r} (#{campaign.pk}); "
        f"blocked at {campaign.attention_block_after}.",
        evidence={"attention_failed": failures, "block_after": campaign.attention_block_after, "vote_id": vote.pk},
    )


def _qualification_assess(*, vote: Vote, battle: Battle) -> None:
    """After a gold vote of a rater still qualifying: once they have answered the campaign's
    ``qualification_battles`` gold battles, the outcome is written (passed at ``qualification_pass``'s
    share correct, else failed), once: a unique constraint settles two racing votes."""
    campaign = battle.campaign
    if campaign.qualification_battles <= 0:
        return
    if selectors.qualification_of(campaign=campaign, user=vote.rater) is not None:
        return
    answered, correct = selectors.gold_votes_of(campaign=campaign, user=vote.rater)
    if answered < campaign.qualification_battles:
        return
    score = correct / answered
    passed = score >= campaign.qualification_pass - 1e-12
    try:
        with transaction.atomic():
            Qualification.objects.create(
                organization_id=campaign.organization_id,
                campaign=campaign,
                rater=vote.rater,
                status=Qualification.Status.PASSED if passed else Qualification.Status.FAILED,
                answered=answered,
                correct=correct,
                score=score,
                threshold=campaign.qualification_pass,
                last_vote_id=vote.pk,
                decided_at=vote.created_at,
            )
    except IntegrityError:
        return  # decided by a vote racing this one


def attention_warning(*, campaign: Campaign, user: User) -> str | None:
    """The warning shown to a rater who has failed ``attention_warn_after`` attention checks or more
    (and is not blocked yet), or None."""
    if campaign.attention_warn_after is None:
        return None
    failures = selectors.attention_failures(campaign=campaign, user=user)
    if failures < campaign.attention_warn_after:
        return None
    return (
        "Some of the battles you rated had an answer that was plainly broken, and your vote did not pick "
        "the other one. Please read both answers carefully before voting"
        + (
            ": a few more misses and this campaign will stop giving you battles."
            if campaign.attention_block_after
            else "."
        )
    )
