"""Cells of the CSV files the platform writes, safe to open in a spreadsheet.

Spreadsheets (Excel, LibreOffice, Google Sheets) run a text cell that starts with ``=``, ``+``, ``-`` or
``@`` as a formula, and so do some of them after a leading tab or carriage return: a model name, a family,
a system prompt or a flag reason typed as ``=HYPERLINK("https://evil.test", "click")`` would become a live
link (or worse) in the manager's spreadsheet. Every CSV writer passes its cells through ``csv_cell``,
which prefixes such a text with an apostrophe (OWASP's "CSV injection" advice). Numbers are left alone:
``-0.5`` stays a number. JSON downloads keep the exact text; only CSV cells are neutralised."""

from __future__ import annotations

from typing import Any

__all__ = ["FORMULA_PREFIXES", "csv_cell", "csv_row"]

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """The value to write in a CSV cell: None is an empty cell, a date or time its ISO text, a text that
    a spreadsheet would run as a formula is prefixed with an apostrophe; anything else is unchanged."""
    if value is None:
        return ""
    if isinstance(value, str):
        return "'" + value if value.startswith(FORMULA_PREFIXES) else value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def csv_row(row: dict[str, Any], columns: tuple[str, ...] | list[str]) -> list[Any]:
    """The cells of one row, in the columns' order (a column the row lacks is an empty cell)."""
    return [csv_cell(row.get(column)) for column in columns]
