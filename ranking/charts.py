"""Server-side SVG charts for the managers' dashboard: bars over days or bins, a pair matrix, and dots with
intervals per rater. Pure Python (no Django, no numbers read here): each function takes the aggregates a
selector computed and returns one ``<svg>`` element as text.

Why SVG drawn on the server: the site's Content-Security-Policy runs no inline script and loads nothing
from elsewhere, so a JavaScript chart library would need a bundle of its own and still draw nothing for a
reader without script. Inline SVG needs neither: colours and sizes are presentation *attributes* (not
``style``), every mark carries a ``<title>`` (a tooltip on hover and a name for assistive technology), and
each chart is ``role="img"`` labelled by its own ``<title>`` and ``<desc>``. Every text that reaches the
markup (competitor and rater names) is escaped here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 720
FONT = 'font-family="system-ui, sans-serif" font-size="11"'
BAR = "#2155cc"
INTERVAL = "#7a93d6"
SECOND = "#c2410c"
GRID = "#d0d5dd"
INK = "#344054"


def _esc(text: object) -> str:
    return escape(str(text), quote=True)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 × 10^k at or above ``value`` (an axis maximum a reader can count in)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value - 1e-9:
            return float(step * power)
    return float(10 * power)


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2g}"


def _open(chart_id: str, title: str, desc: str, height: int, width: int = WIDTH) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{_esc(chart_id)}" role="img" '
        f'viewBox="0 0 {width} {height}" width="100%" preserveAspectRatio="xMinYMin meet" '
        f'aria-labelledby="{_esc(chart_id)}-title {_esc(chart_id)}-desc">'
        f'<title id="{_esc(chart_id)}-title">{_esc(title)}</title><desc id="{_esc(chart_id)}-desc">{_esc(desc)}</desc>'
    )


def _empty(chart_id: str, title: str, message: str) -> str:
    return _open(chart_id, title, message, 60) + f'<text x="8" y="34" {FONT} fill="{INK}">{_esc(message)}</text></svg>'


def bar_chart(
    points: Sequence[tuple[str, float]],
    *,
    chart_id: str,
    title: str,
    unit: str,
    x_label: str,
    empty: str = "Nothing to plot yet.",
    marker: tuple[float, str] | None = None,
) -> str:
    """Vertical bars, one per (label, value), in the order given; ``marker`` = (position, text) draws a
    dashed line at that position on the bar axis (2.5: half-way through the third bar; the minimum
    decision time on the histogram, say)."""
    if not points:
        return _empty(chart_id, title, empty)
    height, left, right, top, bottom = 240, 56, 12, 12, 46
    plot_w, plot_h = WIDTH - left - right, height - top - bottom
    top_value = nice_ceiling(max(v for _, v in points))
    total = sum(v for _, v in points)
    desc = f"{len(points)} bars, {_number(total)} {unit} in all, at most {_number(max(v for _, v in points))}."
    parts = [_open(chart_id, title, desc, height)]
    for i in range(5):  # gridlines and y ticks at 0, 1/4 ... of the axis maximum
        value = top_value * i / 4
        y = top + plot_h - plot_h * i / 4
        parts.append(f'<line x1="{left}" x2="{WIDTH - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="{GRID}"/>')
        parts.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT} fill="{INK}">{_number(value)}</text>'
        )
    slot = plot_w / len(points)
    label_every = max(1, math.ceil(len(points) / 12))
    for i, (label, value) in enumerate(points):
        h = plot_h * value / top_value
        x = left + i * slot
        parts.append(
            f'<rect class="bar" x="{x + slot * 0.1:.1f}" y="{top + plot_h - h:.1f}" width="{max(slot * 0.8, 0.5):.1f}" '
            f'height="{h:.1f}" fill="{BAR}"><title>{_esc(label)}: {_number(value)} {_esc(unit)}</title></rect>'
        )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{top + plot_h + 14}" text-anchor="middle" {FONT} '
                f'fill="{INK}">{_esc(label)}</text>'
            )
    if marker is not None:
        index, text = marker
        x = left + index * slot
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + plot_h}" stroke="{SECOND}" stroke-dasharray="4 3"/>'
            f'<text x="{x + 4:.1f}" y="{top + 10}" {FONT} fill="{SECOND}">{_esc(text)}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" {FONT} fill="{INK}">'
        f"{_esc(x_label)}</text>"
    )
    parts.append(
        f'<text x="12" y="{top + plot_h / 2:.1f}" text-anchor="middle" {FONT} fill="{INK}" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">{_esc(unit)}</text></svg>'
    )
    return "".join(parts)


# Up to this many competitors each cell is labelled and has its own title; past it the matrix is drawn as
# its upper triangle of small unlabelled cells (19,900 pairs at 200 competitors: a full labelled matrix
# would be megabytes of markup for marks too small to point at).
MATRIX_DETAILED = 60


def matrix_chart(
    labels: Sequence[str],
    counts: dict[tuple[int, int], int],
    *,
    chart_id: str,
    title: str,
    empty: str = "No pairs yet.",
) -> str:
    """A symmetric k × k matrix of counts (``counts`` keyed by index pairs i < j), shaded from white to the
    largest count; a pair that never met is grey and named "never met" in its title."""
    k = len(labels)
    if k < 2:
        return _empty(chart_id, title, empty)
    detailed = k <= MATRIX_DETAILED
    label_w = 150 if detailed else 10
    cell = max(10.0, min(40.0, (WIDTH - label_w - 10) / k)) if detailed else (WIDTH - label_w - 10) / k
    size = int(label_w + cell * k + 10)
    most = max(counts.values(), default=0)
    met = sum(1 for i in range(k) for j in range(i + 1, k) if counts.get((i, j), 0))
    desc = f"{k} competitors, {met} of {k * (k - 1) // 2} pairs met; at most {most} battles for one pair."
    parts = [_open(chart_id, title, desc, size, max(size, WIDTH))]
    if detailed:
        for i, label in enumerate(labels):
            short = label if len(label) <= 22 else label[:21] + "…"
            y = label_w + cell * i + cell / 2 + 4
            x = label_w + cell * i + cell / 2
            parts.append(
                f'<text x="{label_w - 6}" y="{y:.1f}" text-anchor="end" {FONT} fill="{INK}">{_esc(short)}</text>'
                f'<text x="{x:.1f}" y="{label_w - 6}" {FONT} fill="{INK}" '
                f'transform="rotate(-60 {x:.1f} {label_w - 6})">{_esc(short)}</text>'
            )
    for i in range(k):
        for j in range(k) if detailed else range(i + 1, k):
            x, y = label_w + cell * j, label_w + cell * i
            if i == j:
                continue
            n = counts.get((min(i, j), max(i, j)), 0)
            if n == 0:
                fill, text = "#eaecf0", "never met"
            else:
                strength = n / most
                fill = f"rgb({int(255 - 222 * strength)},{int(255 - 170 * strength)},{int(255 - 51 * strength)})"
                text = f"{n:,} battles"
            tip = f"<title>{_esc(labels[i])} vs {_esc(labels[j])}: {text}</title>" if detailed else ""
            parts.append(
                f'<rect class="cell" x="{x:.1f}" y="{y:.1f}" width="{cell:.2f}" height="{cell:.2f}" fill="{fill}"'
                + (f' stroke="#ffffff">{tip}</rect>' if detailed else "/>")
            )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class RaterDot:
    label: str
    accuracy: float | None  # gold accuracy
    lower: float | None
    upper: float | None
    answered: int
    agreement: float | None
    flagged: bool


def rater_chart(rows: Sequence[RaterDot], *, chart_id: str, title: str, empty: str = "No raters yet.") -> str:
    """One line per rater on a 0–1 axis: gold accuracy (a dot with its Wilson interval) and agreement with
    the other raters (a diamond). A flagged rater's name is marked with "⚑"."""
    if not rows:
        return _empty(chart_id, title, empty)
    label_w, right, top, row_h = 170, 16, 26, 16
    plot_w = WIDTH - label_w - right
    height = top + row_h * len(rows) + 28
    desc = (
        f"{len(rows)} raters. Dots: gold accuracy with its 95% Wilson interval; diamonds: agreement with the "
        "other raters on shared items."
    )
    parts = [_open(chart_id, title, desc, height)]
    for i in range(5):
        x = label_w + plot_w * i / 4
        parts.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top - 6}" y2="{top + row_h * len(rows)}" stroke="{GRID}"/>'
            f'<text x="{x:.1f}" y="{top - 10}" text-anchor="middle" {FONT} fill="{INK}">{i * 25}%</text>'
        )
    for i, row in enumerate(rows):
        y = top + row_h * i + row_h / 2
        name = row.label if len(row.label) <= 26 else row.label[:25] + "…"
        mark = "⚑ " if row.flagged else ""
        parts.append(
            f'<text x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end" {FONT} fill="{INK}">{_esc(mark + name)}</text>'
        )
        if row.accuracy is not None and row.lower is not None and row.upper is not None:
            x0, x1 = label_w + plot_w * row.lower, label_w + plot_w * row.upper
            cx = label_w + plot_w * row.accuracy
            parts.append(
                f'<line x1="{x0:.1f}" x2="{x1:.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{INTERVAL}" stroke-width="3"/>'
                f'<circle class="gold" cx="{cx:.1f}" cy="{y:.1f}" r="4" fill="{BAR}"><title>{_esc(row.label)}: gold '
                f"accuracy {row.accuracy:.0%} ({row.lower:.0%}–{row.upper:.0%}, {row.answered} answered)"
                "</title></circle>"
            )
        if row.agreement is not None:
            cx = label_w + plot_w * row.agreement
            parts.append(
                f'<path class="agreement" d="M{cx:.1f} {y - 5:.1f} L{cx + 5:.1f} {y:.1f} L{cx:.1f} {y + 5:.1f} '
                f'L{cx - 5:.1f} {y:.1f} Z" fill="{SECOND}"><title>{_esc(row.label)}: agreement '
                f"{row.agreement:.0%}</title></path>"
            )
    legend_y = top + row_h * len(rows) + 18
    parts.append(
        f'<circle cx="{label_w + 4}" cy="{legend_y - 4}" r="4" fill="{BAR}"/>'
        f'<text x="{label_w + 12}" y="{legend_y}" {FONT} fill="{INK}">gold accuracy (95% Wilson interval)</text>'
        f'<path d="M{label_w + 254} {legend_y - 9} L{label_w + 259} {legend_y - 4} L{label_w + 254} {legend_y + 1} '
        f'L{label_w + 249} {legend_y - 4} Z" fill="{SECOND}"/>'
        f'<text x="{label_w + 264}" y="{legend_y}" {FONT} fill="{INK}">agreement with other raters</text></svg>'
    )
    return "".join(parts)
