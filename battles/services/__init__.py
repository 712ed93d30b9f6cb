"""Every write about campaigns, battles and votes.

A battle is created, generated outside any transaction (model calls can take seconds and must not
hold locks), then either released with both answers at once or voided. A vote locks the battle with a
conditional update and appends to the log in the same transaction, so two tabs cannot both vote.

This is the package's face: other modules and apps import from ``battles.services``; inside the
package, modules import their siblings directly. What lives where:

- ``errors``: the app's domain errors (``NotAllowed``, ``CapReached``, ``VoteRejected``, ...).
- ``identity``: the campaign's identity policy ("refuse") and what the rater is told under it.
- ``campaigns``: campaign configuration (open, close, save, delete), a leaderboards refresh, consent.
- ``competitors``: competitors added, changed, retired, deleted.
- ``prompts``: prompts built, imported into a pool, saved.
- ``assignment``: handing a rater a battle (``battle_assign``), caps, the qualification gate.
- ``generation``: the generation queue, whole and live (streamed) generation, the answers recorded,
  a multi-turn battle's next turn (``battle_continue``); the generation tasks.
- ``shared_items``: a ready battle copied for k raters (``reviewers_per_item``).
- ``buffer``: battles generated ahead, claimed by raters, refilled and maintained; its tasks.
- ``vote``: a battle marked shown, the vote appended to the log.
- ``shadow``: shadow battles, answers pushed over the API.
- ``experiments``: A/B experiments' sticky assignment, variants.
- ``gold``: gold items and battles, attention checks, a qualification's outcome.
- ``exports``: export jobs written by a worker, downloaded, purged; their tasks.
- ``studies``: crowd studies' participants and studies over the API; the time-out sweep's task.
- ``judges``: rubrics, judges and judge runs; the judge run's task.

The Celery tasks live beside the services they run (under their historical names,
``battles.tasks.<function>``); ``battles.tasks`` re-exports them.
"""

from __future__ import annotations

from .assignment import LOST_TASK_S, Assignment, battle_assign, battle_generation_nudge
from .buffer import (
    battle_claim,
    buffer_fill,
    buffer_maintain,
    buffer_maintain_schedule_open_campaigns,
    buffer_refill_request,
)
from .campaigns import (
    RANKING_FIELDS,
    campaign_close,
    campaign_consent_agree,
    campaign_delete,
    campaign_open,
    campaign_save,
    leaderboards_refresh_request,
)
from .competitors import (
    competitor_delete,
    competitor_delete_refusal,
    competitor_has_battles,
    competitor_retire,
    competitor_save,
    competitor_version_default,
    endpoint_has_battles,
)
from .errors import (
    CampaignClosed,
    CapReached,
    ContinueRefused,
    ExperimentInactive,
    IdempotencyConflict,
    IdentityQuestionRefused,
    JudgeUnusable,
    NotAllowed,
    NothingToRate,
    ParticipantInAnotherStudy,
    PromptCapReached,
    PromptsNotAccepted,
    QualificationFailed,
    RaterBlocked,
    VoteRejected,
)
from .experiments import AssignmentResult, experiment_assign, variant_delete, variant_save
from .exports import (
    export_event_payload,
    export_file_delete,
    export_job_create,
    export_job_deleted,
    export_job_run,
    export_jobs_purge,
    export_path,
    export_relative_path,
)
from .generation import (
    STALE_GENERATION_S,
    battle_continue,
    battle_generate,
    battle_generate_live,
    battle_generate_queued,
    battle_generations_record,
    battle_live_key,
    battle_start_live,
    battle_streams,
    battle_turn_inputs,
)
from .gold import (
    GOLD_COMPETITOR_NAME,
    GOLD_FIXED_FIELDS,
    GOLD_IMPORT_COLUMNS,
    GOLD_IMPORT_MAX_ROWS,
    GOLD_VERSIONS,
    attention_warning,
    gold_battle_create,
    gold_competitors,
    gold_item_delete,
    gold_item_draw,
    gold_item_save,
    gold_items_import,
)
from .identity import IDENTITY_ANSWER_VOIDED, IDENTITY_QUESTION_REFUSED, identity_refused
from .judges import (
    JudgePair,
    judge_create,
    judge_run_create,
    judge_run_execute,
    judge_save,
    rubric_create,
    rubric_revise,
)
from .prompts import PromptsImported, prompt_build, prompt_save, prompts_import
from .shadow import (
    SHADOW_ANSWER_MAX_CHARS,
    SHADOW_BATCH_MAX,
    ShadowAnswer,
    ShadowBattleInput,
    ShadowResult,
    shadow_battles_import,
)
from .shared_items import battle_items_share
from .studies import (
    STUDY_ENDED_REASON,
    STUDY_FIELDS,
    STUDY_LEFT_REASON,
    STUDY_TIMEOUT_REASON,
    participant_consent,
    participant_enter,
    participant_leave,
    participant_refresh,
    participants_time_out_due,
    study_close,
    study_create,
)
from .vote import battle_mark_shown, vote_submit

__all__ = [
    "Assignment",
    "AssignmentResult",
    "attention_warning",
    "battle_assign",
    "battle_claim",
    "battle_continue",
    "battle_generate",
    "battle_generate_live",
    "battle_generate_queued",
    "battle_generations_record",
    "battle_items_share",
    "battle_live_key",
    "battle_mark_shown",
    "battle_start_live",
    "battle_streams",
    "battle_turn_inputs",
    "buffer_fill",
    "buffer_maintain",
    "buffer_maintain_schedule_open_campaigns",
    "buffer_refill_request",
    "campaign_close",
    "campaign_consent_agree",
    "campaign_delete",
    "campaign_open",
    "campaign_save",
    "CampaignClosed",
    "CapReached",
    "competitor_delete",
    "competitor_delete_refusal",
    "competitor_has_battles",
    "competitor_retire",
    "competitor_save",
    "competitor_version_default",
    "ContinueRefused",
    "endpoint_has_battles",
    "experiment_assign",
    "ExperimentInactive",
    "export_event_payload",
    "export_file_delete",
    "export_job_create",
    "export_job_deleted",
    "export_job_run",
    "export_jobs_purge",
    "export_path",
    "export_relative_path",
    "gold_battle_create",
    "GOLD_COMPETITOR_NAME",
    "gold_competitors",
    "GOLD_FIXED_FIELDS",
    "GOLD_IMPORT_COLUMNS",
    "GOLD_IMPORT_MAX_ROWS",
    "gold_item_delete",
    "gold_item_draw",
    "gold_item_save",
    "gold_items_import",
    "GOLD_VERSIONS",
    "IdempotencyConflict",
    "IDENTITY_ANSWER_VOIDED",
    "IDENTITY_QUESTION_REFUSED",
    "identity_refused",
    "IdentityQuestionRefused",
    "judge_create",
    "judge_run_create",
    "judge_run_execute",
    "judge_save",
    "JudgePair",
    "JudgeUnusable",
    "leaderboards_refresh_request",
    "NotAllowed",
    "NothingToRate",
    "participant_consent",
    "participant_enter",
    "participant_leave",
    "participant_refresh",
    "ParticipantInAnotherStudy",
    "participants_time_out_due",
    "prompt_build",
    "prompt_save",
    "PromptCapReached",
    "prompts_import",
    "PromptsImported",
    "PromptsNotAccepted",
    "QualificationFailed",
    "RANKING_FIELDS",
    "RaterBlocked",
    "rubric_create",
    "rubric_revise",
    "SHADOW_ANSWER_MAX_CHARS",
    "SHADOW_BATCH_MAX",
    "shadow_battles_import",
    "ShadowAnswer",
    "ShadowBattleInput",
    "ShadowResult",
    "STALE_GENERATION_S",
    "LOST_TASK_S",
    "battle_generation_nudge",
    "study_close",
    "study_create",
    "STUDY_ENDED_REASON",
    "STUDY_FIELDS",
    "STUDY_LEFT_REASON",
    "STUDY_TIMEOUT_REASON",
    "variant_delete",
    "variant_save",
    "vote_submit",
    "VoteRejected",
]
