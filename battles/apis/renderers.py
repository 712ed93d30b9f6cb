"""Renderers of the streamed and file formats (JSON lines, CSV, binary), so that an Accept of theirs passes
content negotiation (not a 406); used by the vote log, the export jobs and ranking's preference pairs."""

from __future__ import annotations

import json
from typing import Any

from rest_framework.renderers import BaseRenderer

# --- Renderers: the streamed formats pass content negotiation (an Accept of theirs is not a 406) ---


class _PassthroughRenderer(BaseRenderer):
    """The body of a streamed or file response is written by the view; only an error body (a dict)
    is rendered here, as JSON."""

    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data).encode() if data is not None else b""


class JSONLinesRenderer(_PassthroughRenderer):
    media_type = "application/x-ndjson"
    format = "jsonl"


class CSVRenderer(_PassthroughRenderer):
    media_type = "text/csv"
    format = "csv"


class BinaryRenderer(_PassthroughRenderer):
    media_type = "application/octet-stream"
    format = "bin"
    charset = None  # type: ignore[assignment]
