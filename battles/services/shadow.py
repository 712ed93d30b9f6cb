"""Shadow battles: answers pushed over the API, served to raters like generated ones."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, Invalid
from raters.authentication import ApiKeyPrincipal
from raters.models import AuditAction
from raters.services import audit_record
from serving.analysis import answer_model_mentions, prompt_asks_identity, style_counts
from serving.triton import strip_special_tokens

from ..models import Battle, Campaign, Competitor, Experiment, Generation, Prompt, Side, Variant
from ..prompting import CATEGORIES, prompt_classify, prompt_hash, prompt_validate
from .errors import IdempotencyConflict
from .generation import _names_a_model
from .gold import GOLD_COMPETITOR_NAME
from .identity import IDENTITY_ANSWER_VOIDED, identity_refused
from .shared_items import battle_items_share

_rng = random.SystemRandom()


# --- Shadow battles: answers pushed over the API, served to raters like generated ones --------------

# An answer's text longer than this is refused (the page shows whole answers; generated ones stop at
# the campaign's max_tokens).
SHADOW_ANSWER_MAX_CHARS = 100_000
SHADOW_BATCH_MAX = 1000


@dataclass(frozen=True)
class ShadowAnswer:
    """One side of a shadow battle as the caller sent it. With an experiment, ``variant`` names the
    variant whose competitor answered (then ``model`` and ``version`` may be empty)."""

    text: str
    output_tokens: int
    finish_reason: str
    latency_s: float
    model: str = ""
    version: str = ""
    ttft_s: float | None = None
    variant: str = ""


@dataclass(frozen=True)
class ShadowBattleInput:
    idempotency_key: str
    prompt: str
    answers: tuple[ShadowAnswer, ShadowAnswer]
    category: str = ""
    language: str = ""
    system_prompt: str | None = None
    experiment: str = ""

    def digest(self) -> str:
        """sha256 of the request, key left out: what a replay must match."""
        body = {
            "prompt": self.prompt,
            "category": self.category,
            "language": self.language,
            "system_prompt": self.system_prompt,
            "experiment": self.experiment,
            "answers": [
                [a.model, a.version, a.variant, a.text, a.output_tokens, a.finish_reason, a.latency_s, a.ttft_s]
                for a in self.answers
            ],
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class ShadowResult:
    battle_id: uuid.UUID
    status: str
    created: bool  # False: a replay of an earlier request with the same key and body


def _shadow_audit_actor(
    actor: User | AnonymousUser | ApiKeyPrincipal | None,
) -> tuple[User | AnonymousUser | None, dict[str, str]]:
    """A request made with an API key has no person behind it: the audit row names the key instead."""
    if isinstance(actor, ApiKeyPrincipal):
        return None, {"api_key": actor.api_key.prefix}
    return actor, {}


class _Errors:
    """Field errors of a batch, named ``<prefix><field>`` (the API's prefix says which item)."""

    def __init__(self, prefix: Callable[[int], str]) -> None:
        self.prefix = prefix
        self.fields: dict[str, list[str]] = {}

    def add(self, index: int, field: str, message: str) -> None:
        self.fields.setdefault(f"{self.prefix(index)}{field}", []).append(message)

    def raise_if_any(self, cls: type[Invalid] | type[Conflict] = Invalid) -> None:
        if self.fields:
            first = next(iter(self.fields.items()))
            more = f" (and {len(self.fields) - 1} more)" if len(self.fields) > 1 else ""
            raise cls(f"{first[0]}: {first[1][0]}{more}", field_errors=self.fields)


def _shadow_validate(index: int, item: ShadowBattleInput, errors: _Errors) -> str:
    """Check what can be checked on the item alone; returns the clean prompt text."""
    clean = ""
    try:
        clean = prompt_validate(item.prompt)
    except ValueError as exc:
        errors.add(index, "prompt", str(exc))
    if item.category and item.category not in CATEGORIES:
        errors.add(index, "category", f"Unknown category {item.category!r}: use one of {', '.join(CATEGORIES)}.")
    if len(item.language) > 8:
        errors.add(index, "language", "At most 8 characters (a language tag such as en or pt-BR).")
    if not item.idempotency_key or len(item.idempotency_key) > 200:
        errors.add(index, "idempotency_key", "Required, 1 to 200 characters.")
    if len(item.answers) != 2:
        errors.add(index, "answers", "Exactly two answers.")
        return clean
    for side, answer in enumerate(item.answers):
        field = f"answers.{side}."
        if not strip_special_tokens(answer.text).strip():
            errors.add(index, field + "text", "An answer cannot be empty (special tokens aside).")
        elif len(answer.text) > SHADOW_ANSWER_MAX_CHARS:
            errors.add(index, field + "text", f"At most {SHADOW_ANSWER_MAX_CHARS} characters.")
        if answer.output_tokens < 0:
            errors.add(index, field + "output_tokens", "Must be 0 or more.")
        if not 1 <= len(answer.finish_reason) <= 16:
            errors.add(index, field + "finish_reason", "1 to 16 characters (e.g. stop, length).")
        if not (math.isfinite(answer.latency_s) and answer.latency_s >= 0):
            errors.add(index, field + "latency_s", "Seconds, 0 or more.")
        if answer.ttft_s is not None and not (
            math.isfinite(answer.ttft_s) and 0 <= answer.ttft_s <= max(answer.latency_s, 0)
        ):
            errors.add(index, field + "ttft_s", "Seconds, from 0 to the answer's latency.")
        if not (item.experiment and answer.variant):
            for name, value in (("model", answer.model), ("version", answer.version)):
                if not value:
                    errors.add(index, field + name, "Required (or name an experiment and its variant).")
        if len(answer.model) > 120:
            errors.add(index, field + "model", "At most 120 characters.")
        if answer.model == GOLD_COMPETITOR_NAME:
            errors.add(index, field + "model", f"{GOLD_COMPETITOR_NAME!r} is reserved for gold battles.")
        if len(answer.version) > 80:
            errors.add(index, field + "version", "At most 80 characters.")
    return clean


def _shadow_identities(
    campaign: Campaign, items: list[ShadowBattleInput], errors: _Errors
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Each item's two (model, version): given, or the variants' competitors of its experiment."""
    keys = {item.experiment for item in items if item.experiment}
    variants: dict[tuple[str, str], Variant] = {}
    experiments: dict[str, Experiment] = {}
    if keys:
        for found in Experiment.objects.filter(organization_id=campaign.organization_id, key__in=keys):
            experiments[found.key] = found
        for row in Variant.objects.filter(experiment__in=experiments.values()).select_related(
            "experiment", "competitor__endpoint"
        ):
            variants[(row.experiment.key, row.name)] = row
    identities = []
    for index, item in enumerate(items):
        pair: list[tuple[str, str]] = []
        experiment = experiments.get(item.experiment) if item.experiment else None
        if item.experiment and experiment is None:
            errors.add(index, "experiment", f"No experiment {item.experiment!r} in this organisation.")
        elif experiment is not None and experiment.campaign_id != campaign.pk:
            errors.add(index, "experiment", "This experiment's battles go to another campaign (or to none).")
        for side, answer in enumerate(item.answers[:2]):
            identity = (answer.model, answer.version)
            if experiment is not None and experiment.campaign_id == campaign.pk and answer.variant:
                variant = variants.get((experiment.key, answer.variant))
                if variant is None:
                    errors.add(index, f"answers.{side}.variant", f"No variant {answer.variant!r} in {experiment}.")
                elif variant.competitor is None:
                    errors.add(index, f"answers.{side}.variant", f"Variant {variant} names no competitor.")
                else:
                    named = (variant.competitor.model_name, variant.competitor.version_label)
                    if answer.model and (answer.model, answer.version) != named:
                        errors.add(
                            index, f"answers.{side}.model", f"Variant {variant} is {named[0]} {named[1]}, not this."
                        )
                    identity = named
            pair.append(identity)
        if len(pair) == 2 and pair[0] == pair[1] and pair[0] != ("", ""):
            errors.add(index, "answers", "The two answers must come from different models or versions.")
        identities.append((pair[0], pair[1]) if len(pair) == 2 else (("", ""), ("", "")))
    return identities


def _shadow_competitors(
    *, campaign: Campaign, wanted: set[tuple[str, str]], actor: User | AnonymousUser | None
) -> dict[tuple[str, str], Competitor]:
    """The campaign's competitor for each (model, version): a competitor with an endpoint of that name
    and version if there is one (the same model keeps one rating however its answers came), else an
    external one, created (and audited) where missing."""

    def existing() -> dict[tuple[str, str], Competitor]:
        found: dict[tuple[str, str], Competitor] = {}
        competitors = Competitor.objects.filter(campaign=campaign, gold=False).select_related("endpoint").order_by("id")
        for competitor in competitors:
            # An endpoint's competitor wins over an external one of the same name and version.
            key = (competitor.model_name, competitor.version_label)
            if key not in found or (competitor.endpoint_id is not None and found[key].endpoint_id is None):
                found[key] = competitor
        return found

    found = existing()
    missing = sorted(wanted - found.keys())
    if missing:
        Competitor.objects.bulk_create(
            [
                Competitor(
                    organization_id=campaign.organization_id,
                    campaign=campaign,
                    external_model=model,
                    version_label=version,
                )
                for model, version in missing
            ],
            ignore_conflicts=True,  # a concurrent import created the same one: it is found below
        )
        found = existing()
        person, key = _shadow_audit_actor(actor)
        for model, version in missing:
            audit_record(
                organization=campaign.organization,
                actor=person,
                action=AuditAction.COMPETITOR_ADDED,
                obj=found[(model, version)],
                data={"external_model": model, "version": version, "via": "shadow battle", **key},
            )
    return found


def shadow_battles_import(
    *,
    campaign: Campaign,
    items: list[ShadowBattleInput],
    actor: User | AnonymousUser | None,
    field_prefix: Callable[[int], str] = lambda index: f"battles.{index}.",
) -> list[ShadowResult]:
    """Add ready-made battles to the campaign's buffer, all or none, one result per item in order.

    Each battle is served to raters exactly like a generated one (battle_claim: blind, same page, same
    caps): the side shown left is a coin flip made here, not the order given; style counts and identity
    signals are computed now from the answers, as for generated ones. Competitors are matched by
    (model, version), or created as external models (no endpoint: never drawn for generated battles).

    Idempotent per item: a key already used with the same body returns that battle (``created`` False)
    and writes nothing; with another body the whole call is refused (``IdempotencyConflict``, naming
    the items). Invalid items are all named (``Invalid.field_errors``) and nothing is written."""
    if len(items) > SHADOW_BATCH_MAX:
        raise Invalid(f"At most {SHADOW_BATCH_MAX} battles per call.", field_errors={"battles": "Too many."})
    if not items:
        raise Invalid("No battles given.", field_errors={"battles": "At least one battle."})
    try:
        return _shadow_battles_import(campaign=campaign, items=items, actor=actor, field_prefix=field_prefix)
    except IntegrityError:
        # A concurrent request took one of these keys (or competitors) first: once more, now replaying it.
        return _shadow_battles_import(campaign=campaign, items=items, actor=actor, field_prefix=field_prefix)


@transaction.atomic
def _shadow_battles_import(
    *,
    campaign: Campaign,
    items: list[ShadowBattleInput],
    actor: User | AnonymousUser | None,
    field_prefix: Callable[[int], str],
) -> list[ShadowResult]:
    if campaign.status == Campaign.Status.CLOSED:
        raise Conflict("This campaign is closed: it takes no more battles.")
    errors = _Errors(field_prefix)
    texts = [_shadow_validate(index, item, errors) for index, item in enumerate(items)]
    first_index: dict[str, int] = {}
    for index, item in enumerate(items):
        if item.idempotency_key in first_index:
            other = first_index[item.idempotency_key]
            errors.add(index, "idempotency_key", f"Used twice in this call (also item {other}).")
        first_index.setdefault(item.idempotency_key, index)
    errors.raise_if_any()

    digests = [item.digest() for item in items]
    earlier = {
        row["idempotency_key"]: row
        for row in Battle.objects.filter(
            campaign=campaign, idempotency_key__in=[item.idempotency_key for item in items]
        ).values("idempotency_key", "request_digest", "pk", "status")
    }
    conflicts = _Errors(field_prefix)
    for index, item in enumerate(items):
        row = earlier.get(item.idempotency_key)
        if row is not None and row["request_digest"] != digests[index]:
            conflicts.add(index, "idempotency_key", "Already used with a different request body.")
    if conflicts.fields:
        first_field = next(iter(conflicts.fields))
        raise IdempotencyConflict(
            f"{first_field}: this idempotency key was already used with a different request body; nothing was changed.",
            field_errors=conflicts.fields,
        )
    fresh = [index for index, item in enumerate(items) if item.idempotency_key not in earlier]

    identity_errors = _Errors(lambda position: field_prefix(fresh[position]))
    identities = _shadow_identities(campaign, [items[i] for i in fresh], identity_errors)
    identity_errors.raise_if_any()
    competitors: dict[tuple[str, str], Competitor] = {}
    if fresh:
        wanted = {identity for pair in identities for identity in pair}
        competitors = _shadow_competitors(campaign=campaign, wanted=wanted, actor=actor)
    for position, index in enumerate(fresh):
        for side, identity in enumerate(identities[position]):
            competitor = competitors[identity]
            if not competitor.active:
                errors.add(index, f"answers.{side}.model", f"{competitor} was withdrawn from this campaign.")
    errors.raise_if_any()

    prompts = _shadow_prompts(campaign=campaign, items=[(texts[i], items[i]) for i in fresh])
    now = timezone.now()
    refuse = identity_refused(campaign)
    battles: list[Battle] = []
    generations: list[Generation] = []
    for position, index in enumerate(fresh):
        item = items[index]
        first, second = (competitors[identity] for identity in identities[position])
        # Special tokens name a model family: out of a pushed answer too, as out of a generated one.
        answers = tuple(dataclasses.replace(a, text=strip_special_tokens(a.text)) for a in item.answers)
        # The server decides the sides: the order of the request says nothing about what raters see.
        if _rng.random() < 0.5:
            first, second = second, first
            answers = (answers[1], answers[0])
        battle = Battle(
            organization_id=campaign.organization_id,
            campaign=campaign,
            prompt=prompts[position],
            left=first,
            right=second,
            status=Battle.Status.READY,
            source=Battle.Source.SHADOW,
            params={"system_prompt": item.system_prompt if item.system_prompt is not None else campaign.system_prompt},
            ready_at=now,
            requested_at=now,
            idempotency_key=item.idempotency_key,
            request_digest=digests[index],
            experiment=None,
        )
        if refuse and (prompts[position].asks_identity or _names_a_model(answers[0].text, answers[1].text)):
            # Under "refuse" such a pair is never shown: stored voided (the request is answered, and a
            # replay finds it), like a generated battle whose answer named a model.
            battle.status = Battle.Status.VOID
            battle.void_reason = (
                IDENTITY_ANSWER_VOIDED
                if _names_a_model(answers[0].text, answers[1].text)
                else "The prompt asks a model who it is, which the campaign refuses."
            )
        battles.append(battle)
        for pane, competitor, answer in ((Side.LEFT, first, answers[0]), (Side.RIGHT, second, answers[1])):
            generations.append(
                Generation(
                    battle=battle,
                    side=pane,
                    competitor=competitor,
                    text=answer.text,
                    output_tokens=answer.output_tokens,
                    finish_reason=answer.finish_reason,
                    latency_s=answer.latency_s,
                    ttft_s=answer.ttft_s,
                    tokens_per_s=answer.output_tokens / answer.latency_s if answer.latency_s > 0 else None,
                    # The same analysis as a generated answer's (battle_generations_record).
                    style=style_counts(answer.text).as_dict(),
                    model_mentions=list(answer_model_mentions(answer.text)),
                )
            )
    _shadow_experiments_link(campaign=campaign, battles=battles, items=[items[i] for i in fresh])
    Battle.objects.bulk_create(battles, batch_size=500)
    Generation.objects.bulk_create(generations, batch_size=1000)
    battle_items_share(battles=battles)
    if battles:
        person, key = _shadow_audit_actor(actor)
        audit_record(
            organization=campaign.organization,
            actor=person,
            action=AuditAction.SHADOW_BATTLES_IMPORTED,
            obj=campaign,
            data={"count": len(battles), "replayed": len(items) - len(battles), **key},
        )
    created = {items[index].idempotency_key: battle for index, battle in zip(fresh, battles, strict=True)}
    results = []
    for item in items:
        if item.idempotency_key in created:
            battle = created[item.idempotency_key]
            results.append(ShadowResult(battle.pk, battle.status, True))
        else:
            row = earlier[item.idempotency_key]
            results.append(ShadowResult(row["pk"], row["status"], False))
    return results


def _shadow_experiments_link(*, campaign: Campaign, battles: list[Battle], items: list[ShadowBattleInput]) -> None:
    keys = {item.experiment for item in items if item.experiment}
    if not keys:
        return
    experiments = {e.key: e for e in Experiment.objects.filter(organization_id=campaign.organization_id, key__in=keys)}
    for battle, item in zip(battles, items, strict=True):
        if item.experiment:
            battle.experiment = experiments[item.experiment]


def _shadow_prompts(*, campaign: Campaign, items: list[tuple[str, ShadowBattleInput]]) -> list[Prompt]:
    """A prompt per item: the campaign's shadow prompt of the same text, category and language if there
    is one (found with one query by hash), else a new one (classified where no category is given)."""
    hashes = {prompt_hash(text) for text, _ in items}
    known: dict[tuple[str, str, str], Prompt] = {}
    for prompt in Prompt.objects.filter(campaign=campaign, source=Prompt.Source.SHADOW, text_hash__in=hashes):
        known.setdefault((prompt.text, prompt.category, prompt.language), prompt)
    new: list[Prompt] = []
    chosen: list[Prompt] = []
    for text, item in items:
        category, language = item.category, item.language
        if not category or not language:
            auto_category, auto_language = prompt_classify(text)
            category, language = category or auto_category, language or auto_language
        key = (text, category, language)
        if key not in known:
            known[key] = Prompt(
                organization_id=campaign.organization_id,
                campaign=campaign,
                text=text,
                text_hash=prompt_hash(text),
                asks_identity=prompt_asks_identity(text),
                category=category,
                language=language,
                source=Prompt.Source.SHADOW,
            )
            new.append(known[key])
        chosen.append(known[key])
    Prompt.objects.bulk_create(new, batch_size=500)
    return chosen
