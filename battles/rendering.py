"""Markdown to safe HTML, the one renderer for prompts and both answers.

Two layers, each enough on its own for the common attacks, together for the rest:

1. markdown-it-py, CommonMark preset plus GFM tables and strikethrough, with ``html=False`` so raw
   HTML in the text is escaped and shown as text rather than interpreted, and ``linkify=False`` so
   bare URLs stay text (CommonMark ``<https://...>`` autolinks still become links). markdown-it's
   own link validator already drops ``javascript:``, ``vbscript:``, ``file:`` and most ``data:`` URLs.
2. nh3 (ammonia) over the result with a fixed allow-list of tags and attributes. Links keep
   ``href`` only for http, https and mailto (relative URLs are removed too, so an answer cannot
   link into the platform itself), and get ``rel="noopener noreferrer nofollow"`` and
   ``target="_blank"`` (following a link must not navigate the rater away from the open battle).

Images are never emitted: an ``<img>`` would make the rater's browser fetch a remote URL, which can
leak the rater's address to whoever wrote the URL and lets a model "sign" its answer with a
picture. Markdown images render as the plain text ``[image: <alt text>]`` instead, so the rater still
sees that the answer tried to show a picture. Fenced code keeps its text but loses the
``language-*`` class (there is no highlighter to consume it). Table cell alignment survives as a
``style`` attribute filtered down to the single property ``text-align``.

Markdown headings render as paragraphs styled like headings (``<p class="md-h2">``), not ``<h1>``-``<h6>``:
the page's outline (what a screen reader lists as headings) is the page's own, Prompt, Answer A,
Answer B, and an answer's headings must not enter it, or a model could add entries to it.

An answer is rendered once, when it is stored (``answer_rendered``: the generation worker, gold battles),
not on every view of its page: the row keeps its HTML beside its text with the version of the renderer that
made it (``RENDERER_VERSION``: this module's source and both libraries' versions), as GitLab keeps its
cached markdown. A page shows the stored HTML where the version is this renderer's, cleaned again by nh3 on
the way out (a fraction of the parse's cost, so no stored string reaches a page unsanitised), and renders
the text anew where it is not (rows from before, or from another release, or written without it).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import markdown_it
import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

__all__ = [
    "ALLOWED_TAGS",
    "ALLOWED_URL_SCHEMES",
    "BLANK_ANSWER_HTML",
    "HEADING_CLASSES",
    "LINK_REL",
    "RENDERER_VERSION",
    "answer_html",
    "answer_rendered",
    "answer_to_safe_html",
    "markdown_to_safe_html",
]

ALLOWED_TAGS: frozenset[str] = frozenset(
    {
        "p", "br", "strong", "em", "code", "pre", "ul", "ol", "li",
        "blockquote", "hr", "del", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_URL_SCHEMES: frozenset[str] = frozenset({"http", "https", "mailto"})
LINK_REL = "noopener noreferrer nofollow"

_ATTRIBUTES: dict[str, set[str]] = {
    # An explicit empty generic set: otherwise ammonia's defaults (lang, title) apply to every tag.
    "*": set(),
    "a": {"href"},
    # markdown-it emits alignment as style="text-align:..."; filter_style_properties keeps only that.
    "th": {"style"},
    "td": {"style"},
    # Ordered lists that start at another number ("3. item") carry start="3".
    "ol": {"start"},
}


def _image_as_text(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any) -> str:
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env).strip()
    return escapeHtml(f"[image: {alt}]" if alt else "[image]")


HEADING_CLASSES: frozenset[str] = frozenset(f"md-h{level}" for level in range(1, 7))


def _heading_open(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any) -> str:
    return f'<p class="md-{tokens[idx].tag}">'


def _heading_close(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any) -> str:
    return "</p>\n"


def _build_parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_text)
    md.add_render_rule("heading_open", _heading_open)
    md.add_render_rule("heading_close", _heading_close)
    # markdown-it-py renders ~~x~~ as <s>; <del> is the element in the allow-list.
    md.add_render_rule("s_open", lambda *_args: "<del>")
    md.add_render_rule("s_close", lambda *_args: "</del>")
    return md


_PARSER = _build_parser()

_CLEANER = nh3.Cleaner(
    tags=set(ALLOWED_TAGS),
    # Disallowed tags are unwrapped (their text kept); these have contents that are never text.
    clean_content_tags={"script", "style", "iframe", "object", "embed", "svg", "math", "template"},
    attributes=_ATTRIBUTES,
    # Only the heading classes this renderer writes; any other class is removed.
    allowed_classes={"p": set(HEADING_CLASSES)},
    url_schemes=set(ALLOWED_URL_SCHEMES),
    url_relative="deny",
    link_rel=LINK_REL,
    set_tag_attribute_values={"a": {"target": "_blank"}},
    filter_style_properties={"text-align"},
    strip_comments=True,
)


def markdown_to_safe_html(text: str) -> str:
    """Render untrusted markdown ``text`` to an HTML fragment that is safe to insert into a page."""
    return _CLEANER.clean(_PARSER.render(text))


# What a pane shows for an answer with no visible text (empty, or blank lines and spaces only, which a sampled
# model does send): said in words, the same for either side, so an empty pane is not taken for a page that
# failed to load. It names no model and no reason, only what the answer is.
BLANK_ANSWER_HTML = '<p class="md-blank">This answer is empty: the model sent no visible text.</p>'


def answer_to_safe_html(text: str) -> str:
    """A model's answer as a pane shows it: ``markdown_to_safe_html``, or ``BLANK_ANSWER_HTML`` for an answer
    that has no visible text (the rater judges it as what it is, an empty answer)."""
    return _blank_or(text, markdown_to_safe_html(text))


def _blank_or(text: str, html: str) -> str:
    return html if text.strip() and html.strip() else BLANK_ANSWER_HTML


# What made a stored answer's HTML: this module (allow-lists, parser rules) and the two libraries. Any change
# to one is another version, and answers stored before it are rendered anew when shown.
RENDERER_VERSION = hashlib.sha256(
    b"\0".join((Path(__file__).read_bytes(), markdown_it.__version__.encode(), metadata.version("nh3").encode()))
).hexdigest()[:16]


def answer_rendered(text: str) -> dict[str, str]:
    """The fields a stored answer keeps its HTML in (``Generation.text_html`` and ``text_html_version``)."""
    return {"text_html": markdown_to_safe_html(text), "text_html_version": RENDERER_VERSION}


def answer_html(text: str, text_html: str = "", text_html_version: str = "") -> str:
    """``answer_to_safe_html(text)``, from the HTML stored with the answer when this renderer made it."""
    if text_html_version != RENDERER_VERSION:
        return answer_to_safe_html(text)
    return _blank_or(text, _CLEANER.clean(text_html))
