"""An HTML checker for tests: which tags and attributes a page really has (not what its text says)."""

from __future__ import annotations

from html.parser import HTMLParser


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))


def tags_and_attributes(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    collector = _Collector()
    collector.feed(html)
    collector.close()
    return collector.tags


def unsafe_markup(html: str) -> list[str]:
    """Every script-capable construct in the markup: script/iframe/img/object tags, on* attributes,
    javascript: or data: URLs."""
    problems = []
    for tag, attrs in tags_and_attributes(html):
        if tag in {"script", "iframe", "img", "object", "embed", "svg", "style", "link", "meta", "form"}:
            problems.append(f"<{tag}>")
        for name, value in attrs:
            if name.startswith("on"):
                problems.append(f"<{tag} {name}>")
            if name in {"href", "src", "action"} and (value or "").strip().lower().startswith(("javascript:", "data:")):
                problems.append(f"<{tag} {name}={value}>")
    return problems
