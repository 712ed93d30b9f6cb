"""REST endpoints of battles, one module per endpoint group (``api_urls.py`` routes them):

- ``vote_log.py``: the vote log of a campaign, streamed (JSON lines or CSV).
- ``exports.py``: asynchronous exports (the vote log, preference pairs): a job, its status, its file.
- ``campaigns.py``: campaigns (list, one) and a campaign's categories, read-only.
- ``competitors.py``: a campaign's competitors, read-only.
- ``prompts.py``: a campaign's prompts (read) and the prompt import (write).
- ``shadow_battles.py``: shadow battles pushed from your own traffic (one, a batch) and their state.
- ``experiments.py``: A/B experiments and the sticky assignment of a unit to a variant.
- ``judges.py``: judges, a campaign's judge runs and a run's verdicts.
- ``studies.py``: crowd studies and their participants' progress.

Shared by several of them (and by ``ranking.apis``):

- ``access.py``: who is asking, and the campaign they may read or write (404 otherwise).
- ``fields.py``: strict serializer fields and the bases of the list endpoints' query filters.
- ``vote_filters.py``: the vote filters of the vote log, the export jobs and the preference pairs.
- ``renderers.py``: the streamed and file formats' renderers (JSON lines, CSV, binary)."""

from ..exporting import CSV_COLUMNS  # the export's columns, where clients have always found them
from .campaigns import CampaignDetailApi, CampaignListApi, CategoryListApi
from .competitors import CompetitorListApi
from .experiments import ExperimentAssignApi, ExperimentDetailApi, ExperimentListApi
from .exports import ExportJobDetailApi, ExportJobDownloadApi, ExportJobListCreateApi
from .fields import (
    FastSurrogateCheck,
    LongTextField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    StrictSlugField,
)
from .judges import JudgeDetailApi, JudgeListApi, JudgeRunDetailApi, JudgeRunListCreateApi, JudgeRunVerdictsApi
from .prompts import PromptImportApi, PromptListApi
from .renderers import BinaryRenderer, CSVRenderer, JSONLinesRenderer
from .shadow_battles import ShadowBattleBatchApi, ShadowBattleCreateApi, ShadowBattleDetailApi
from .studies import ParticipantListApi, StudyCloseApi, StudyDetailApi, StudyListCreateApi
from .vote_filters import FILTER_PARAMETERS, ExportFiltersBody, ExportFiltersInput, UtcDateTimeField
from .vote_log import VoteLogExportApi

__all__ = [
    "CSV_COLUMNS",
    "FILTER_PARAMETERS",
    "BinaryRenderer",
    "CSVRenderer",
    "CampaignDetailApi",
    "CampaignListApi",
    "CategoryListApi",
    "CompetitorListApi",
    "ExperimentAssignApi",
    "ExperimentDetailApi",
    "ExperimentListApi",
    "ExportFiltersBody",
    "ExportFiltersInput",
    "ExportJobDetailApi",
    "ExportJobDownloadApi",
    "ExportJobListCreateApi",
    "FastSurrogateCheck",
    "JSONLinesRenderer",
    "JudgeDetailApi",
    "JudgeListApi",
    "JudgeRunDetailApi",
    "JudgeRunListCreateApi",
    "JudgeRunVerdictsApi",
    "LongTextField",
    "ParticipantListApi",
    "PromptImportApi",
    "PromptListApi",
    "ShadowBattleBatchApi",
    "ShadowBattleCreateApi",
    "ShadowBattleDetailApi",
    "StrictBooleanField",
    "StrictCharField",
    "StrictFloatField",
    "StrictIntegerField",
    "StrictSlugField",
    "StudyCloseApi",
    "StudyDetailApi",
    "StudyListCreateApi",
    "UtcDateTimeField",
    "VoteLogExportApi",
]
