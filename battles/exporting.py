"""How the vote log is rendered for export: the filters, the JSON lines and CSV encodings, and the SQL
that lets PostgreSQL build each event's JSON itself (the fast path of a million-row export).

No queries here: ``battles.selectors`` runs them, ``battles.apis`` streams the result over HTTP and
``battles.services.export_job_run`` writes it to a file. Both paths render an event exactly as
``Vote.as_event()`` does (``tests/battles/test_export.py`` compares them vote by vote), plus, with
texts, the battle's ``conversation``: one entry per turn, ``{"index", "prompt", "left", "right"}``
(turn 0 is the battle's prompt; a one-turn battle has one entry)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from core.spreadsheet import csv_row as spreadsheet_row

CSV_COLUMNS = (
    "battle_id",
    "vote_id",
    "timestamp",
    "campaign_id",
    "source",
    "rater_id",
    "pool_id",
    "prompt_id",
    "prompt_hash",
    "prompt_category",
    "prompt_language",
    "prompt_source",
    "left_competitor_id",
    "left_model",
    "left_version",
    "left_output_tokens",
    "left_finish_reason",
    "left_latency_s",
    "right_competitor_id",
    "right_model",
    "right_version",
    "right_output_tokens",
    "right_finish_reason",
    "right_latency_s",
    "temperature",
    "top_p",
    "max_tokens",
    "system_prompt",
    "seed",
    "vote",
    "decision_ms",
    "left_style",
    "right_style",
    "prompt_asks_identity",
    "answer_names_model",
)
# With texts: the first turn in three columns, later turns (multi-turn battles) as a JSON list.
CSV_TEXT_COLUMNS = ("prompt_text", "left_text", "right_text", "later_turns")

# Votes fetched per round trip of the server-side cursor; texts are fetched once per chunk.
CHUNK_SIZE = 2000
# Rendered text is handed to the socket (or file) in pieces of about this size.
FLUSH_CHARS = 64_000

T = TypeVar("T")


@dataclass(frozen=True)
class VoteFilters:
    """Which votes an export holds. ``since`` is inclusive, ``until`` exclusive (vote time);
    ``competitor`` matches either side; ``prompt_source`` is ``pool`` or ``rater``."""

    since: datetime | None = None
    until: datetime | None = None
    category: str = ""
    competitor: int | None = None
    prompt_source: str = ""

    def as_params(self) -> dict[str, Any]:
        """JSON-safe, for a job's ``params`` (and back with ``from_params``)."""
        return {
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "category": self.category,
            "competitor": self.competitor,
            "prompt_source": self.prompt_source,
        }

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> VoteFilters:
        def when(value: Any) -> datetime | None:
            return datetime.fromisoformat(value) if value else None

        return cls(
            since=when(params.get("since")),
            until=when(params.get("until")),
            category=params.get("category") or "",
            competitor=params.get("competitor"),
            prompt_source=params.get("prompt_source") or "",
        )


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


class Counted(Iterator[T]):
    """Passes items through and counts them (the rows of an export, whatever its encoding)."""

    def __init__(self, items: Iterable[T]) -> None:
        self._items = iter(items)
        self.count = 0

    def __next__(self) -> T:
        item = next(self._items)
        self.count += 1
        return item


def csv_columns(*, texts: bool) -> tuple[str, ...]:
    return CSV_COLUMNS + CSV_TEXT_COLUMNS if texts else CSV_COLUMNS


def csv_row(event: dict[str, Any], *, texts: bool = False) -> list[Any]:
    row: dict[str, Any] = {k: v for k, v in event.items() if not isinstance(v, (dict, list))}
    for group in ("prompt", "left", "right"):
        for key, value in event[group].items():
            name = f"{group}_{key}"
            row[name] = json.dumps(value, sort_keys=True) if isinstance(value, dict) else value
    row.update(event["params"])
    row.update(event["identity"])
    if texts:
        turns = event.get("conversation") or [{}]
        row["prompt_text"] = turns[0].get("prompt", "")
        row["left_text"] = turns[0].get("left", "")
        row["right_text"] = turns[0].get("right", "")
        row["later_turns"] = json.dumps(turns[1:], ensure_ascii=False) if len(turns) > 1 else ""
    return spreadsheet_row(row, csv_columns(texts=texts))


def flushed(pieces: Iterable[str]) -> Iterator[str]:
    """Joins small pieces into chunks of about FLUSH_CHARS characters (fewer writes and socket sends)."""
    buffer: list[str] = []
    size = 0
    for piece in pieces:
        buffer.append(piece)
        size += len(piece)
        if size >= FLUSH_CHARS:
            yield "".join(buffer)
            buffer = []
            size = 0
    if buffer:
        yield "".join(buffer)


def jsonl_from_events(events: Iterable[dict[str, Any]]) -> Iterator[str]:
    return flushed(json.dumps(event, sort_keys=True) + "\n" for event in events)


def csv_from_events(events: Iterable[dict[str, Any]], *, texts: bool) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(csv_columns(texts=texts))
    for event in events:
        writer.writerow(csv_row(event, texts=texts))
        if buffer.tell() > FLUSH_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def conversation(
    *, prompt_text: str, generations: Iterable[tuple[int, str, str]], turn_texts: dict[int, str]
) -> list[dict[str, Any]]:
    """A battle's turns from its generations ``(turn, side, text)`` and the rater's turn texts (turn
    index -> text; turn 0 is the prompt). Every turn that has a generation is listed, in order; a
    side without one (never the case for a voted battle) reads as empty."""
    turns: dict[int, dict[str, Any]] = {}
    for turn, side, text in generations:
        prompt = prompt_text if turn == 0 else turn_texts.get(turn, "")
        entry = turns.setdefault(turn, {"index": turn, "prompt": prompt, "left": "", "right": ""})
        entry[side] = text
    return [turns[index] for index in sorted(turns)]


# --- The PostgreSQL fast path: the database renders each event's JSON. ---------------------------
#
# The line is concatenated from the columns, keys in alphabetical order, with json.dumps' separators:
# the same JSON value as ``json.dumps(vote.as_event(), sort_keys=True)`` (the same keys, strings,
# numbers and booleans; the JSON columns keep PostgreSQL's key order, a float with no fraction reads
# ``2`` rather than ``2.0``, and non-ASCII text is UTF-8 rather than ``\u`` escapes). Concatenation
# rather than ``json_build_object``, which looks up every argument's type on every row: about twice
# the rows per second. Strings go through ``to_json`` (escaping); every column used is NOT NULL.
#
# The event's shape, as ``Vote.as_event()`` builds it: (key, kind, column or nested fields). Kinds:
# str (escaped), safe (a string that never needs escaping: a uuid, a hex hash, a choice the database
# constrains), num, bool, json (a JSON column, as stored), obj (nested), raw (SQL pieces of concat()
# that make JSON text).

Field = tuple[str, str, Any]


def _side_fields(side: str) -> list[Field]:
    return [
        ("competitor_id", "num", f"{side}_id"),
        ("finish_reason", "str", f"{side}_finish_reason"),
        ("latency_s", "num", f"{side}_latency_s"),
        ("model", "str", f"{side}_model"),
        ("output_tokens", "num", f"{side}_tokens"),
        ("style", "json", f"{side}_style"),
        ("version", "str", f"{side}_version"),
    ]


_TIMESTAMP_SQL = (
    # Python's isoformat(): microseconds only when there are any, UTC offset as +00:00.
    "CASE WHEN date_trunc('second', {t}.created_at) = {t}.created_at "
    "THEN to_char({t}.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"+00:00\"') "
    "ELSE to_char({t}.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"') END"
)


def _event_fields(t: str) -> list[Field]:
    return [
        ("battle_id", "safe", "battle_id"),
        ("campaign_id", "num", "campaign_id"),
        ("decision_ms", "num", "decision_ms"),
        ("identity", "obj", [("answer_names_model", "bool", "answer_names_model"),
                             ("prompt_asks_identity", "bool", "prompt_asks_identity")]),
        ("left", "obj", _side_fields("left")),
        ("params", "json", "params"),
        ("pool_id", "num", "pool_id"),
        ("prompt", "obj", [("category", "str", "category"), ("hash", "safe", "prompt_hash"), ("id", "num", "prompt_id"),
                           ("language", "str", "language"), ("source", "str", "prompt_source")]),
        ("rater_id", "num", "rater_id"),
        ("right", "obj", _side_fields("right")),
        ("source", "str", "source"),
        ("timestamp", "raw", f"'\"', {_TIMESTAMP_SQL.format(t=t)}, '\"'"),
        ("vote", "safe", "choice"),
        ("vote_id", "num", "id"),
    ]  # fmt: skip


def _object_pieces(t: str, fields: list[Field]) -> list[str]:
    pieces: list[str] = []
    for index, (key, kind, value) in enumerate(fields):
        pieces.append("'" + ("{" if index == 0 else ", ") + f'"{key}": ' + "'")
        if kind == "str":
            pieces.append(f"to_json({t}.{value})")
        elif kind == "safe":
            pieces.extend(("'\"'", f"{t}.{value}", "'\"'"))
        elif kind == "bool":  # concat() writes a boolean as t / f
            pieces.append(f"CASE WHEN {t}.{value} THEN 'true' ELSE 'false' END")
        elif kind in ("num", "json"):
            pieces.append(f"{t}.{value}")
        elif kind == "obj":
            pieces.extend(_object_pieces(t, value))
        else:
            pieces.append(value)
    pieces.append("'}'")
    return pieces


def _conversation_sql(t: str) -> str:
    def answer(side: str) -> str:
        return (
            f"COALESCE((SELECT g.text FROM battles_generation g WHERE g.battle_id = {t}.battle_id "
            f"AND g.turn = k.turn AND g.side = '{side}'), '')"
        )

    prompt = (
        f"CASE WHEN k.turn = 0 THEN (SELECT p.text FROM battles_prompt p WHERE p.id = {t}.prompt_id) "
        f"ELSE COALESCE((SELECT u.text FROM battles_turn u WHERE u.battle_id = {t}.battle_id "
        f"AND u.index = k.turn), '') END"
    )
    return (
        f"(SELECT COALESCE(json_agg(json_build_object('index', k.turn, 'left', {answer('left')}, "
        f"'prompt', {prompt}, 'right', {answer('right')}) ORDER BY k.turn), '[]'::json)::text "
        f"FROM (SELECT DISTINCT g.turn FROM battles_generation g WHERE g.battle_id = {t}.battle_id) k)"
    )


def event_json_sql(*, texts: bool, table: str = "battles_vote") -> str:
    """One SQL expression (PostgreSQL) rendering a vote row of ``table`` as its event's JSON text."""
    t = f'"{table}"'
    fields = _event_fields(t)
    if texts:
        fields.insert(2, ("conversation", "raw", _conversation_sql(t)))
    # One concat() of every piece: a chain of || would copy the growing line once per piece.
    return "concat(" + ", ".join(_object_pieces(t, fields)) + ")"
