"""The house's rules that a reviewer should not have to remember (docs/architecture/index.md):

- rooms of a readable size: no module of the app code over 800 lines (migrations and the Python-backend
  model repositories aside), so a concern that grows becomes a package of modules;
- every package inside an app is reached through its face: its ``__init__.py`` names what it offers in
  ``__all__`` (import-linter's protected contracts keep other apps out of the modules behind it);
- import-linter's contracts (``pyproject.toml``, run by scripts/test) cover every first-party package: a
  new app or a new top-level package must take its place in the layers, or the layers would not hold it;
- every module that writes CSV passes its cells through ``core.spreadsheet`` (no formula runs when a
  manager opens an export in a spreadsheet).

Reads files only: no database, no server."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = [pattern.rstrip("*") for pattern in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]]
MAX_LINES = 800
# Folders Django finds by convention, not faces: management commands, the settings modules.
CONVENTIONAL = ("management", "commands", "settings")
# Not app code: generated migrations, and the models Triton runs on its own interpreter.
OUTSIDE = ("migrations", "model_repository", "standin_repository", "judge_repository", "llm_model_repository")


def app_modules() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(part in OUTSIDE for part in path.relative_to(ROOT).parts)
    ]


def test_the_rules_see_the_code() -> None:
    modules = app_modules()
    assert {"arena", "core", "raters", "serving", "battles", "ranking"} <= set(PACKAGES)
    assert len(modules) > 150
    assert ROOT / "battles" / "services" / "vote.py" in modules


def test_no_module_is_over_800_lines() -> None:
    too_long = {
        str(path.relative_to(ROOT)): lines
        for path in app_modules()
        if (lines := path.read_text().count("\n")) > MAX_LINES
    }
    assert not too_long, f"split these by concern into a package (DESIGN.md section 8): {too_long}"


def test_every_package_inside_an_app_has_a_face() -> None:
    faceless = []
    for package in PACKAGES:
        for init in sorted((ROOT / package).rglob("__init__.py")):
            folder = init.parent
            depth = len(folder.relative_to(ROOT).parts)
            if depth < 2 or any(
                part in OUTSIDE or part in ("management", "commands", "settings") for part in folder.parts
            ):
                continue  # the app itself, and folders Django finds by convention
            if not any(p.suffix == ".py" and p.name != "__init__.py" for p in folder.iterdir()):
                continue
            tree = ast.parse(init.read_text())
            names = {
                target.id
                for node in tree.body
                if isinstance(node, ast.Assign | ast.AnnAssign)
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)
            }
            if "__all__" not in names:
                faceless.append(str(init.relative_to(ROOT)))
    assert not faceless, f"these packages name nothing in __all__ (their face): {faceless}"


def test_the_import_contracts_cover_every_package() -> None:
    linter = PYPROJECT["tool"]["importlinter"]
    assert sorted(linter["root_packages"]) == sorted(PACKAGES)
    contracts = {contract["id"]: contract for contract in linter["contracts"]}
    assert sorted(contracts["layers"]["layers"]) == sorted(PACKAGES), "each package takes one place in the layers"
    assert contracts["layers"]["layers"][0] == "arena" and contracts["layers"]["layers"][-1] == "core"
    apps = [package for package in PACKAGES if (ROOT / package / "apps.py").exists() and package != "arena"]
    for app in apps:
        protected = contracts[f"faces-{app}"]
        assert protected["type"] == "protected" and protected["protected_modules"] == [f"{app}.*.*"]
        assert protected["allowed_importers"] == [app]
    assert {"django", "rest_framework", "celery"} <= set(contracts["pure"]["forbidden_modules"])


def test_data_migrations_query_through_the_connection_they_are_given() -> None:
    """``migrate --database migrate`` runs as the tables' owner while the default connection is the
    application's role: a data migration that queried through a model's default manager ran as the
    application (permission denied, then a lock between the two connections). Every migration that
    loads a model from ``apps`` must route its queries with ``schema_editor.connection.alias``
    (tests/test_deployment_migrate.py runs the whole path on an empty database)."""
    unrouted = []
    for path in sorted(ROOT.glob("*/migrations/0*.py")):
        text = path.read_text()
        if "apps.get_model(" not in text:
            continue
        queries = text.count(".objects.") + text.count("._base_manager.")
        routed = text.count(".objects.using(") + text.count("._base_manager.using(")
        if "schema_editor.connection.alias" not in text or routed < queries:
            unrouted.append(f"{path.relative_to(ROOT)} ({queries - routed} of {queries} queries unrouted)")
    assert not unrouted, "data migrations querying through the default connection: " + ", ".join(unrouted)


def test_every_csv_writer_neutralises_formulas() -> None:
    """A module of the app code that makes a ``csv.writer`` (or ``DictWriter``) writes its cells through
    ``core.spreadsheet.csv_cell`` / ``csv_row``: snapshot.csv once wrote a model name typed as
    ``=HYPERLINK(...)`` unescaped while the other CSVs quoted it."""
    writers = [
        path for path in app_modules() if "csv.writer(" in (text := path.read_text()) or "csv.DictWriter(" in text
    ]
    assert writers, "the rule sees no CSV writer"
    unsafe = [
        str(path.relative_to(ROOT))
        for path in writers
        if "from core.spreadsheet import" not in (text := path.read_text())
        or not ("csv_cell(" in text or "csv_row(" in text)
    ]
    assert not unsafe, f"CSV writers that do not use core.spreadsheet: {unsafe}"
