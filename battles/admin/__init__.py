"""Campaign configuration for managers; battles and the vote log are read-only here.

One module per group of admin classes; importing them registers every ModelAdmin (Django's
autodiscover imports ``battles.admin``):

- ``campaigns.py``: campaigns (configuration, actions, reports) and their prompt and gold import pages.
- ``competitors.py``: competitors, in a campaign's page and on their own (family, retirement).
- ``prompts.py``: the prompt pool, and the prompt import's form.
- ``gold.py``: gold items and attention checks, the gold import's form, raters' qualification outcomes.
- ``battles.py``: battles (turns, generations) and the vote log, read-only.
- ``experiments.py``: A/B experiments and their variants.
- ``studies.py``: crowd studies and their participants.
- ``judges.py``: rubric versions, judges, judge runs and the judge verdict log."""

from .battles import BattleAdmin, GenerationInline, TurnInline, VoteAdmin
from .campaigns import CampaignAdmin, CampaignForm
from .competitors import CompetitorAdmin, CompetitorForm, CompetitorInline
from .experiments import ExperimentAdmin, VariantInline
from .gold import GoldImportForm, GoldItemAdmin, GoldItemForm, QualificationAdmin
from .judges import JudgeAdmin, JudgeRunAdmin, JudgeVerdictAdmin, RubricAdmin
from .prompts import PromptAdmin, PromptForm, PromptImportForm
from .studies import ParticipantAdmin, StudyAdmin

__all__ = [
    "BattleAdmin",
    "CampaignAdmin",
    "CampaignForm",
    "CompetitorAdmin",
    "CompetitorForm",
    "CompetitorInline",
    "ExperimentAdmin",
    "GenerationInline",
    "GoldImportForm",
    "GoldItemAdmin",
    "GoldItemForm",
    "JudgeAdmin",
    "JudgeRunAdmin",
    "JudgeVerdictAdmin",
    "ParticipantAdmin",
    "PromptAdmin",
    "PromptForm",
    "PromptImportForm",
    "QualificationAdmin",
    "RubricAdmin",
    "StudyAdmin",
    "TurnInline",
    "VariantInline",
    "VoteAdmin",
]
