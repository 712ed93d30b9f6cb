"""Reading a file of prompts (JSON lines or CSV) into rows and row errors.

Pure Python, no Django: the REST API (``POST /api/v1/campaigns/<id>/prompts/import``) and the console's
"Import prompts" page both parse with this, and ``battles.services.prompts_import`` stores the rows.

Each row has ``text`` (required) and optionally ``category`` (one of ``prompting.CATEGORIES``),
``language`` (a BCP-47 style tag such as ``en`` or ``pt-BR``, at most 8 characters) and
``external_id`` (the row's id in the caller's own system, unique within the file). A category or
language left out (or empty) is decided by the deterministic classifier, as for every prompt. Any
other key or column is an error: a misspelt ``categroy`` must not be silently dropped.

Rows are numbered as a person finds them: in JSON lines, the 1-based line number (blank lines are
skipped but counted); in CSV, the 1-based record number with the header as row 1, which is the row
number a spreadsheet shows. Errors are keyed ``"row N"`` (the row as a whole) or ``"row N.field"``.
"""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .prompting import CATEGORIES, prompt_validate

__all__ = [
    "CATEGORIES",
    "CSV_TYPES",
    "ERRORS_LISTED",
    "EXTERNAL_ID_MAX_CHARS",
    "FIELDS",
    "JSONL_TYPES",
    "ParsedFile",
    "PromptRow",
    "format_for",
    "language_normalise",
    "parse",
    "parse_csv",
    "parse_jsonl",
]

FIELDS: tuple[str, ...] = ("text", "category", "language", "external_id")
EXTERNAL_ID_MAX_CHARS = 200
LANGUAGE_MAX_CHARS = 8  # Prompt.language's column
JSONL_TYPES: tuple[str, ...] = ("application/x-ndjson", "application/jsonl", "application/x-jsonlines")
CSV_TYPES: tuple[str, ...] = ("text/csv",)
# How many invalid rows an answer lists; the count of all of them is always given.
ERRORS_LISTED = 100

_LANGUAGE = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$")


@dataclass(frozen=True)
class PromptRow:
    """One valid row. Empty ``category``/``language``: the classifier decides; empty ``external_id``: none."""

    row: int
    text: str
    category: str = ""
    language: str = ""
    external_id: str = ""


@dataclass
class ParsedFile:
    rows: list[PromptRow] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    invalid_rows: int = 0
    _bad: set[int] = field(default_factory=set, repr=False)
    _listed: set[int] = field(default_factory=set, repr=False)

    def error(self, row: int | None, message: str, *, name: str = "") -> None:
        """Record ``message`` for ``row`` (None: the file as a whole) and field ``name``. Only the
        first ``ERRORS_LISTED`` invalid rows are listed; every one is counted."""
        if row is not None and row not in self._bad:
            self._bad.add(row)
            self.invalid_rows += 1
        if row is not None and row not in self._listed:
            if len(self._listed) >= ERRORS_LISTED:
                return
            self._listed.add(row)
        key = "file" if row is None else f"row {row}"
        if name:
            key += f".{name}"
        self.errors.setdefault(key, []).append(message)

    @property
    def ok(self) -> bool:
        return not self.errors and self.invalid_rows == 0

    def summary(self) -> str:
        """The one line that heads the errors."""
        if self.invalid_rows == 0:
            first = next((messages[0] for messages in self.errors.values() if messages), "")
            return f"{first} Nothing was imported." if first else "The file cannot be imported; nothing was imported."
        rows = "1 row is" if self.invalid_rows == 1 else f"{self.invalid_rows} rows are"
        listed = len(self._listed)
        more = f" (the first {listed} are listed)" if listed < self.invalid_rows else ""
        return f"{rows} invalid{more}; nothing was imported."


def language_normalise(tag: str) -> str:
    """``tag`` in BCP-47's conventional case (``pt-br`` → ``pt-BR``, ``ZH-hant`` → ``zh-Hant``), or
    ``ValueError``. ``und`` (undetermined) is a valid tag."""
    if len(tag) > LANGUAGE_MAX_CHARS or not _LANGUAGE.match(tag):
        raise ValueError(
            f"Not a language tag: {tag[:20]!r}; write a code such as en, de or pt-BR "
            f"(at most {LANGUAGE_MAX_CHARS} characters), or und for undetermined."
        )
    primary, *rest = tag.split("-")
    parts = [primary.lower()]
    for part in rest:
        if len(part) == 2 and part.isalpha():
            parts.append(part.upper())
        elif len(part) == 4 and part.isalpha():
            parts.append(part.title())
        else:
            parts.append(part.lower())
    return "-".join(parts)


def _is_unicode(text: str) -> bool:
    # JSON may spell an unpaired surrogate (a \ud800 escape), which no database text column can store.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unicode(text: str) -> None:
    if not _is_unicode(text):
        raise ValueError("Prompt contains an unpaired surrogate, which is not valid text.")


def _row(parsed: ParsedFile, row: int, values: dict[str, Any], seen_ids: dict[str, int]) -> None:
    """Validate one row's values (already keyed by field name) and keep it or record its errors."""
    bad = False
    unknown = sorted(set(values) - set(FIELDS))
    for name in unknown:
        shown = str(name)[:40].encode("utf-8", "replace").decode("utf-8")
        parsed.error(row, f"Unknown field; the fields are {', '.join(FIELDS)}.", name=shown)
        bad = True

    text = values.get("text")
    clean = ""
    if text is None or text == "":
        parsed.error(row, "This field is required.", name="text")
        bad = True
    else:
        try:
            clean = prompt_validate(text)
            _unicode(clean)
        except ValueError as exc:
            parsed.error(row, str(exc), name="text")
            bad = True

    category = values.get("category") or ""
    if isinstance(category, str):
        category = category.strip()
    if not isinstance(category, str) or (category and category not in CATEGORIES):
        parsed.error(row, f"Not a category; the categories are {', '.join(CATEGORIES)}.", name="category")
        bad = True
        category = ""

    language = values.get("language") or ""
    if not isinstance(language, str):
        parsed.error(row, "A language tag is text, such as en or pt-BR.", name="language")
        bad = True
    elif language:
        try:
            language = language_normalise(language.strip())
        except ValueError as exc:
            parsed.error(row, str(exc), name="language")
            bad = True

    external_id = values.get("external_id")
    if external_id is None:
        external_id = ""
    if isinstance(external_id, int) and not isinstance(external_id, bool):
        external_id = str(external_id)
    if not isinstance(external_id, str):
        parsed.error(row, "An external id is text (or a whole number).", name="external_id")
        bad = True
        external_id = ""
    external_id = external_id.strip()
    if len(external_id) > EXTERNAL_ID_MAX_CHARS or "\x00" in external_id or not _is_unicode(external_id):
        parsed.error(
            row,
            f"An external id is at most {EXTERNAL_ID_MAX_CHARS} characters of valid text, without NUL.",
            name="external_id",
        )
        bad = True
    elif external_id:
        first = seen_ids.setdefault(external_id, row)
        if first != row:
            parsed.error(row, f"The same external id as row {first}.", name="external_id")
            bad = True

    if not bad:
        parsed.rows.append(
            PromptRow(row=row, text=clean, category=category, language=language, external_id=external_id)
        )


def _too_many(parsed: ParsedFile, max_rows: int) -> bool:
    if len(parsed.rows) + parsed.invalid_rows >= max_rows:
        parsed.errors["file"] = [f"The file has more than {max_rows} rows; split it into smaller files."]
        return True
    return False


def parse_jsonl(data: bytes, *, max_rows: int) -> ParsedFile:
    """One JSON object per line; blank lines are skipped."""
    parsed = ParsedFile()
    seen_ids: dict[str, int] = {}
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        if _too_many(parsed, max_rows):
            break
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            parsed.error(number, "Not UTF-8 text.")
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            parsed.error(number, f"Not valid JSON: {exc.msg} (column {exc.colno}).")
            continue
        except (RecursionError, ValueError):  # nested too deeply; an integer of thousands of digits
            parsed.error(number, "Not valid JSON: nested too deeply or a number too long.")
            continue
        if not isinstance(value, dict):
            parsed.error(number, 'Each line must be one JSON object, such as {"text": "..."}.')
            continue
        _row(parsed, number, value, seen_ids)
    if not parsed.rows and not parsed.errors:
        parsed.errors["file"] = ["The file has no rows."]
    return parsed


def parse_csv(data: bytes, *, max_rows: int) -> ParsedFile:
    """A header row naming the columns (``text`` required; case and spaces around names ignored),
    then one prompt per record. Empty cells count as left out; empty records are skipped."""
    parsed = ParsedFile()
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        parsed.errors["file"] = [f"Not UTF-8 text (line {line} of the file)."]
        return parsed
    reader = csv.reader(io.StringIO(content, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        parsed.errors["header"] = [f"Not valid CSV: {exc}."]
        return parsed
    if header is None:
        parsed.errors["file"] = ["The file has no rows."]
        return parsed
    columns = [name.strip().lower() for name in header]
    problems = []
    if "text" not in columns:
        problems.append(f"No text column; the header names {', '.join(columns) or 'nothing'}.")
    unknown = [name for name in columns if name not in FIELDS]
    if unknown:
        problems.append(f"Unknown columns: {', '.join(unknown)}; the columns are {', '.join(FIELDS)}.")
    repeated = sorted({name for name in columns if columns.count(name) > 1})
    if repeated:
        problems.append(f"Columns named twice: {', '.join(repeated)}.")
    if problems:
        parsed.errors["header"] = problems
        return parsed
    seen_ids: dict[str, int] = {}
    number = 1
    while True:
        number += 1
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            parsed.error(number, f"Not valid CSV: {exc}.")
            break  # the reader cannot resynchronise after a broken quote
        if not any(cell.strip() for cell in cells):
            continue
        if _too_many(parsed, max_rows):
            break
        if len(cells) > len(columns):
            parsed.error(number, f"{len(cells)} cells, but the header names {len(columns)} columns.")
            continue
        values = {name: cell for name, cell in zip(columns, cells, strict=False) if cell != ""}
        _row(parsed, number, values, seen_ids)
    if not parsed.rows and not parsed.errors:
        parsed.errors["file"] = ["The file has no rows."]
    return parsed


def format_for(content_type: str, filename: str = "") -> str | None:
    """``"jsonl"`` or ``"csv"`` from a media type (parameters ignored) or, failing that, a file name's
    ending; None for anything else."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media in JSONL_TYPES:
        return "jsonl"
    if media in CSV_TYPES:
        return "csv"
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if name.endswith(".csv"):
        return "csv"
    return None


def parse(data: bytes, *, kind: str, max_rows: int) -> ParsedFile:
    if kind == "jsonl":
        return parse_jsonl(data, max_rows=max_rows)
    if kind == "csv":
        return parse_csv(data, max_rows=max_rows)
    raise ValueError(f"Unknown format {kind!r}")
