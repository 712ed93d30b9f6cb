"""Apps depend one way: raters <- serving <- battles <- ranking. An app imports only from the apps to
its left, at module level and inside functions alike (no function-local import to dodge a cycle);
the pure packages (ranking/estimators, serving/triton) import no Django at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ("raters", "serving", "battles", "ranking")
PURE = (ROOT / "ranking" / "estimators", ROOT / "serving" / "triton")


def imported_modules(source: str, *, package: str) -> list[tuple[int, str]]:
    """Every module an import statement names, anywhere in the source (relative imports resolved
    against ``package``), with its line."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((node.lineno, module))
    return found


def violations(source: str, *, app: str, package: str) -> list[str]:
    higher = ORDER[ORDER.index(app) + 1 :]
    return [
        f"line {line}: imports {module}"
        for line, module in imported_modules(source, package=package)
        if module.split(".")[0] in higher
    ]


def app_modules(app: str) -> list[Path]:
    return sorted(p for p in (ROOT / app).rglob("*.py") if "model_repository" not in p.parts)


def package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])


@pytest.mark.parametrize("app", ORDER)
def test_an_app_imports_no_app_to_its_right(app: str) -> None:
    problems = []
    for path in app_modules(app):
        for problem in violations(path.read_text(), app=app, package=package_of(path)):
            problems.append(f"{path.relative_to(ROOT)} {problem}")
    assert not problems, "\n".join(problems)


def test_the_pure_packages_import_no_django() -> None:
    problems = []
    for folder in PURE:
        own = ".".join(folder.relative_to(ROOT).parts)
        for path in sorted(folder.rglob("*.py")):
            for line, module in imported_modules(path.read_text(), package=package_of(path)):
                if (
                    module != own
                    and not module.startswith(own + ".")
                    and module.split(".")[0] in ("django", "rest_framework", *ORDER)
                ):
                    problems.append(f"{path.relative_to(ROOT)} line {line}: imports {module}")
    assert not problems, "\n".join(problems)


def test_the_check_sees_imports_inside_functions_and_relative_ones() -> None:
    source = (
        "from raters.models import Organization\n"
        "def f():\n"
        "    from ranking.services import leaderboards_schedule\n"
        "    import battles.models\n"
        "from ..battles import x\n"
    )
    assert sorted(violations(source, app="serving", package="serving.triton")) == [
        "line 3: imports ranking.services",
        "line 4: imports battles.models",
    ]
    assert (5, "serving.battles") in imported_modules(source, package="serving.triton")
    assert violations(source, app="ranking", package="ranking") == []
