"""The vote log's narrow copy (``LogVote``, ``LogPrompt``; migration 0010): what the recompute reads, as integers.

The database writes it: an AFTER INSERT trigger on ``battles_vote`` copies every statement's new votes (its
transition table) in that statement, so the copy is exactly the log on every path that appends votes. The
statements below are the trigger's (frozen in the migration); ``log_copy_backfill`` runs them over a campaign's
votes not yet copied, for loads that bypass triggers (``session_replication_role = replica``, as the
ten-million-vote benchmark's loader does)."""

from __future__ import annotations

from django.db import connection, transaction

from ..policy import STYLE_FEATURES

COPY_COLUMNS = ", ".join(
    ["vote_id", "campaign_id", "prompt_key", "left_id", "right_id", "outcome", "decision_ms", "rater_id", "identity"]
    + [f"{side}_{key}" for side in ("left", "right") for key in STYLE_FEATURES]
)


def copy_select(votes: str, where: str = "true") -> str:
    """The copy of the non-gold votes of ``votes`` (a table or a transition table) meeting ``where``; their
    keys must be in ``ranking_logprompt`` already (``keys_insert``). A style count that is not a number is 0,
    one out of range is clipped: a vote is never refused for it."""
    style = ", ".join(
        f"CASE WHEN jsonb_typeof(v.{side}_style->'{key}') = 'number' THEN "
        f"LEAST(GREATEST(round((v.{side}_style->>'{key}')::numeric), -2147483648), 2147483647)::int ELSE 0 END"
        for side in ("left", "right")
        for key in STYLE_FEATURES
    )
    return f"""
    SELECT v.id, v.campaign_id, p.id, v.left_id, v.right_id,
      CASE v.choice WHEN 'left' THEN 0 WHEN 'right' THEN 1 WHEN 'tie' THEN 2 ELSE 3 END, v.decision_ms, v.rater_id,
      v.prompt_asks_identity OR v.answer_names_model, {style}
    FROM {votes} v JOIN ranking_logprompt p
      ON p.campaign_id = v.campaign_id AND p.prompt_hash = v.prompt_hash AND p.category = v.category
    WHERE v.source <> 'gold' AND {where}"""


def keys_insert(votes: str, where: str = "true") -> str:
    return f"""
    INSERT INTO ranking_logprompt (campaign_id, prompt_hash, category)
    SELECT DISTINCT campaign_id, prompt_hash, category FROM {votes} v WHERE source <> 'gold' AND {where}
    ON CONFLICT (campaign_id, prompt_hash, category) DO NOTHING"""


@transaction.atomic
def log_copy_backfill(*, campaign_id: int) -> int:
    """Copy the campaign's votes that the copy lacks (written with triggers off); returns how many. Idempotent.
    PostgreSQL only (elsewhere the recompute reads the log itself): 0 there."""
    if connection.vendor != "postgresql":
        return 0
    c = int(campaign_id)
    missing = f"v.campaign_id = {c} AND NOT EXISTS (SELECT 1 FROM ranking_logvote l WHERE l.vote_id = v.id)"
    with connection.cursor() as cursor:
        cursor.execute(keys_insert("battles_vote", missing))
        # Fresh statistics of the keys: a stale estimate (a handful of keys where there are thousands) makes
        # the planner look the votes up key by key through an index, minutes at ten million votes. The caller
        # can (a load that bypasses triggers runs as a superuser).
        cursor.execute("ANALYZE ranking_logprompt")
        cursor.execute(f"INSERT INTO ranking_logvote ({COPY_COLUMNS}) {copy_select('battles_vote', missing)}")
        return int(cursor.rowcount)
