"""Campaigns, competitors, prompts, battles and the append-only vote log: the battles app's tables.

One module per concern; this face re-exports every name, so ``from battles.models import Vote`` works
wherever it did (migrations included: they name ``battles.models._study_slug`` and
``battles.models.completion_url_validate``).

- ``campaigns``: ``Campaign``, ``Competitor``, ``Prompt``; a rater's agreement to a campaign's consent
  text (``RaterConsent``, ``consent_hash``).
- ``battles``: ``Battle`` (its ``Side`` and ``BattleSource``), the rater's later turns (``Turn``) and each side's
  ``Generation``.
- ``votes``: the append-only vote log, ``Vote`` (its ``Choice``; ``AppendOnlyError``).
- ``experiments``: A/B ``Experiment``, its ``Variant`` rows and ``Exposure`` counts.
- ``exports``: ``ExportJob``, an export written to a file by a worker.
- ``gold``: ``GoldItem`` (gold battles and attention checks) and raters' ``Qualification`` outcomes.
- ``studies``: crowd ``Study`` links for a vendor and their participants (``Participant``).
- ``judges``: ``Rubric``, ``Judge``, ``JudgeRun``, ``GoldenAnswer`` and the judge votes' log, ``JudgeVerdict``.
"""

from .battles import Battle, BattleSource, Generation, GenerationManager, Side, Turn, TurnManager
from .campaigns import Campaign, Competitor, Prompt, RaterConsent, consent_hash, model_family, name_in_family
from .experiments import Experiment, Exposure, ExposureManager, Variant, VariantManager
from .exports import ExportJob
from .gold import GoldItem, Qualification
from .judges import (
    JUDGE_TEMPERATURE,
    GoldenAnswer,
    ImmutableError,
    Judge,
    JudgeRun,
    JudgeRunKind,
    JudgeRunStatus,
    JudgeVerdict,
    JudgeVerdictManager,
    JudgeVerdictQuerySet,
    Rubric,
    RubricKind,
)
from .studies import PROLIFIC_COMPLETION_URL, Participant, Study, _study_slug, completion_url_validate
from .votes import AppendOnlyError, AppendOnlyQuerySet, Choice, Vote, VoteManager

__all__ = [
    "JUDGE_TEMPERATURE",
    "PROLIFIC_COMPLETION_URL",
    "AppendOnlyError",
    "AppendOnlyQuerySet",
    "Battle",
    "BattleSource",
    "Campaign",
    "Choice",
    "Competitor",
    "Experiment",
    "ExportJob",
    "Exposure",
    "ExposureManager",
    "Generation",
    "GenerationManager",
    "GoldItem",
    "GoldenAnswer",
    "ImmutableError",
    "Judge",
    "JudgeRun",
    "JudgeRunKind",
    "JudgeRunStatus",
    "JudgeVerdict",
    "JudgeVerdictManager",
    "JudgeVerdictQuerySet",
    "Participant",
    "Prompt",
    "Qualification",
    "RaterConsent",
    "Rubric",
    "RubricKind",
    "Side",
    "Study",
    "Turn",
    "TurnManager",
    "Variant",
    "VariantManager",
    "Vote",
    "VoteManager",
    "_study_slug",
    "completion_url_validate",
    "consent_hash",
    "model_family",
    "name_in_family",
]
