"""Exports (vote log, preference pairs): the filtered votes, their events and JSON lines, export jobs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import connection
from django.db.models import F, OuterRef, Q, QuerySet, Subquery, TextField
from django.db.models.expressions import RawSQL

from .. import exporting
from ..exporting import VoteFilters
from ..models import Campaign, ExportJob, Generation, Turn, Vote

# --- Exports (vote log, preference pairs): filtered votes, streamed from a server-side cursor. ---


def votes_filtered(*, campaign: Campaign, filters: VoteFilters | None = None) -> QuerySet[Vote]:
    """The campaign's votes an export selects, in log (id) order."""
    votes = Vote.objects.filter(campaign=campaign)
    if filters is not None:
        if filters.since is not None:
            votes = votes.filter(created_at__gte=filters.since)
        if filters.until is not None:
            votes = votes.filter(created_at__lt=filters.until)
        if filters.category:
            votes = votes.filter(category=filters.category)
        if filters.competitor is not None:
            votes = votes.filter(Q(left_id=filters.competitor) | Q(right_id=filters.competitor))
        if filters.prompt_source:
            votes = votes.filter(prompt_source=filters.prompt_source)
    return votes.order_by("id")


def conversations_for(votes: list[Vote]) -> dict[UUID, list[dict[str, Any]]]:
    """Each vote's battle as turns of texts (``exporting.conversation``), for a chunk of votes in one
    query: the generations, each with its turn's text. The votes carry their prompt's text as
    ``prompt_text`` (``vote_events`` annotates it)."""
    turn_text = Turn.objects.filter(battle_id=OuterRef("battle_id"), index=OuterRef("turn")).values("text")[:1]
    rows = (
        Generation.objects.filter(battle_id__in=[v.battle_id for v in votes])
        .annotate(turn_text=Subquery(turn_text))
        .values_list("battle_id", "turn", "side", "text", "turn_text")
    )
    generations: dict[UUID, list[tuple[int, str, str]]] = {}
    turn_texts: dict[UUID, dict[int, str]] = {}
    for battle_id, turn, side, text, text_of_turn in rows:
        generations.setdefault(battle_id, []).append((turn, side, text))
        if text_of_turn is not None:
            turn_texts.setdefault(battle_id, {})[turn] = text_of_turn
    return {
        v.battle_id: exporting.conversation(
            prompt_text=getattr(v, "prompt_text", ""),
            generations=generations.get(v.battle_id, []),
            turn_texts=turn_texts.get(v.battle_id, {}),
        )
        for v in votes
    }


def vote_events(*, votes: QuerySet[Vote], texts: bool = False) -> Iterator[dict[str, Any]]:
    """Each vote's event (``Vote.as_event()``), with its ``conversation`` when ``texts``: model rows from
    a server-side cursor, the texts fetched once per chunk. Memory stays flat at any log size."""
    if texts:
        votes = votes.annotate(prompt_text=F("prompt__text"))
    for chunk in exporting.chunked(votes.iterator(chunk_size=exporting.CHUNK_SIZE), exporting.CHUNK_SIZE):
        conversations = conversations_for(chunk) if texts else {}
        for vote in chunk:
            event = vote.as_event()
            if texts:
                event["conversation"] = conversations[vote.battle_id]
            yield event


def vote_event_jsonl(*, votes: QuerySet[Vote], texts: bool = False) -> Iterator[bytes]:
    """The votes' events as JSON lines, in pieces of about ``exporting.FLUSH_CHARS`` bytes.

    On PostgreSQL the database renders each line (``exporting.event_json_sql``, the texts included)
    and streams them with ``COPY ... TO STDOUT``: nothing is built per row in Python, which keeps a
    million-row export fast and this process's memory flat. (COPY's text format doubles every
    backslash; JSON text has no raw newline, tab or carriage return for it to escape, so undoing that
    is one replace.) Elsewhere the events are built in Python (``vote_events``). The same JSON values
    either way."""
    if connection.vendor != "postgresql":
        for chunk in exporting.jsonl_from_events(vote_events(votes=votes, texts=texts)):
            yield chunk.encode()
        return
    lines = votes.annotate(
        event_line=RawSQL(exporting.event_json_sql(texts=texts), (), output_field=TextField())
    ).values_list("event_line", flat=True)
    sql, params = lines.query.sql_with_params()
    with connection.cursor() as cursor, cursor.cursor.copy(f"COPY ({sql}) TO STDOUT", params) as copy:
        pending: list[memoryview] = []
        size = 0
        for row in copy:  # one message per row
            pending.append(row)
            size += len(row)
            if size >= exporting.FLUSH_CHARS:
                yield b"".join(pending).replace(b"\\\\", b"\\")
                pending, size = [], 0
        if pending:
            yield b"".join(pending).replace(b"\\\\", b"\\")


def export_jobs_for(*, campaign: Campaign) -> QuerySet[ExportJob]:
    return ExportJob.objects.filter(campaign=campaign).order_by("-created_at", "-pk")


def export_job_for(*, campaign: Campaign, job_id: UUID | str) -> ExportJob | None:
    try:
        return ExportJob.objects.filter(campaign=campaign, pk=job_id).first()
    except (ValueError, TypeError, ValidationError):
        return None
