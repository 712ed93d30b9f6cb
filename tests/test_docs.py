"""The front door and the manual stay true to the code: every environment variable the settings read is in
the configuration page's one table, and README.md stays a short front door whose links into the manual
resolve. Reads files only (no database, no server). The manual's own links and anchors are checked by
``mkdocs build --strict`` in scripts/test."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = ROOT / "arena" / "settings"
CONFIGURATION = ROOT / "docs" / "deployment" / "configuration.md"
TABLE_HEADING = "## Every variable the settings read"
# arena/settings/test.py is the suite's own: what it reads belongs in the table of the tests' variables.
TEST_SETTINGS = SETTINGS / "test.py"
TESTS_TABLE_HEADING = "## Variables of the scripts, the Compose file and the tests"
README = ROOT / "README.md"
README_MAX_LINES = 250
# The typed readers of arena/settings/env.py; each takes the variable's name first.
ENV_HELPERS = {"env_str", "env_int", "env_bool", "env_list", "env_url", "env_hosts", "env_rate", "env_path"}
CODE = ("arena", "raters", "battles", "serving", "ranking", "scripts")


def is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def variables_read(source: str) -> set[str]:
    """Every environment variable a module reads by name: through the env helpers, ``os.environ[...]``,
    ``os.environ.get/setdefault/pop(...)``, ``os.getenv(...)`` and ``"NAME" in os.environ``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            helper = isinstance(func, ast.Name) and func.id in ENV_HELPERS
            environ_method = (
                isinstance(func, ast.Attribute)
                and func.attr in {"get", "setdefault", "pop"}
                and is_os_environ(func.value)
            )
            getenv = (
                isinstance(func, ast.Attribute)
                and func.attr == "getenv"
                and isinstance(func.value, ast.Name)
                and func.value.id == "os"
            )
            if helper or environ_method or getenv:
                name = string(node.args[0])
                if name:
                    names.add(name)
        elif isinstance(node, ast.Subscript) and is_os_environ(node.value):
            name = string(node.slice)
            if name:
                names.add(name)
        elif isinstance(node, ast.Compare) and any(isinstance(op, ast.In | ast.NotIn) for op in node.ops):
            if any(is_os_environ(comparator) for comparator in node.comparators):
                name = string(node.left)
                if name:
                    names.add(name)
    return names


def settings_variables() -> set[str]:
    names: set[str] = set()
    for path in sorted(SETTINGS.glob("*.py")):
        if path.name != "env.py" and path != TEST_SETTINGS:  # env.py: the helpers read the name they are given
            names |= variables_read(path.read_text())
    return names


def table_variables(markdown: str, heading: str) -> set[str]:
    """The backticked upper-case names in the first column of the first table after ``heading``."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    rows: list[str] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows or line.startswith("#"):
            break  # the table ended, or the section did without one
    names: set[str] = set()
    for row in rows[2:]:  # after the header and its separator
        first = row.split("|")[1]
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]*)`", first))
    return names


def test_the_parser_sees_the_settings_variables() -> None:
    # A parser that silently found nothing would pass the test below.
    sample = 'import os\nX = env_int("A_INT", 1)\nY = os.environ.get("B")\nif "C" in os.environ: pass\nos.environ["D"]'
    assert variables_read(sample) == {"A_INT", "B", "C", "D"}
    found = settings_variables()
    assert {"DATABASE_URL", "SECRET_KEY", "DEBUG", "REDIS_URL", "ARENA_CONTENT_SECURITY_POLICY"} <= found
    assert len(found) > 50


def test_every_settings_variable_is_in_the_configuration_table() -> None:
    documented = table_variables(CONFIGURATION.read_text(), TABLE_HEADING)
    missing = sorted(settings_variables() - documented)
    assert not missing, (
        f"read by arena/settings but missing from the table under {TABLE_HEADING!r} in "
        f"{CONFIGURATION.relative_to(ROOT)}: {', '.join(missing)}"
    )


def test_every_test_settings_variable_is_in_the_tests_table() -> None:
    documented = table_variables(CONFIGURATION.read_text(), TESTS_TABLE_HEADING)
    own = variables_read(TEST_SETTINGS.read_text()) - settings_variables()
    assert own, "the parser found nothing in arena/settings/test.py"
    missing = sorted(own - documented)
    assert not missing, (
        f"read by arena/settings/test.py but missing from the table under {TESTS_TABLE_HEADING!r} in "
        f"{CONFIGURATION.relative_to(ROOT)}: {', '.join(missing)}"
    )


def test_every_variable_in_the_table_is_read_somewhere() -> None:
    # A row for a variable nothing reads any more is a stale row.
    code = "\n".join(
        path.read_text(errors="replace")
        for folder in CODE
        for path in (ROOT / folder).rglob("*")
        if path.is_file() and (path.suffix == ".py" or folder == "scripts")
    )
    documented = table_variables(CONFIGURATION.read_text(), TABLE_HEADING)
    stale = sorted(name for name in documented if not re.search(rf"\b{name}\b", code))
    assert not stale, f"in the configuration table but read nowhere: {', '.join(stale)}"


def test_the_readme_is_a_short_front_door() -> None:
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; the front door keeps to {README_MAX_LINES}"


def readme_links() -> list[str]:
    """The relative targets of README.md's links and images (no web addresses, no in-page anchors)."""
    targets = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    return [target for target in targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)]


def test_the_readme_links_into_the_manual() -> None:
    links = readme_links()
    assert any(link.startswith("docs/") and link.split("#")[0].endswith(".md") for link in links)
    broken = sorted({link for link in links if not (ROOT / link.split("#")[0]).is_file()})
    assert not broken, f"README.md links to files that do not exist: {', '.join(broken)}"
