"""MkDocs hook: the REST API's OpenAPI schema, generated from the code at build time, into the site.

Adds three things to the build, none of them committed:

- ``api/openapi.json``: what ``manage.py spectacular`` generates (the schema the running server serves at
  ``/api/v1/schema/``);
- ``api/reference.md``: a page listing every operation by tag, with its parameters and answers;
- ``api/swagger/``: Swagger UI from the ``drf-spectacular-sidecar`` package (the server's own copy: no
  CDN), reading ``../openapi.json``.

The schema is cached in the system's temporary folder under a hash of the apps' Python sources, so a
rebuild that changed only the manual skips the Django start-up (about 10 s of CPU).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
APPS = ("arena", "raters", "battles", "serving", "ranking")
METHODS = ("get", "post", "put", "patch", "delete")
log = logging.getLogger("mkdocs.hooks.openapi")

SWAGGER_INIT = """window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "../openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: "StandaloneLayout",
  });
});
"""
SWAGGER_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Arena API: Swagger UI</title>
<link rel="stylesheet" href="swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="swagger-ui-bundle.js"></script>
<script src="swagger-ui-standalone-preset.js"></script>
<script src="init.js"></script>
</body>
</html>
"""


def sources_hash() -> str:
    digest = hashlib.sha256()
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def schema_generate() -> dict[str, Any]:
    cache = Path(tempfile.gettempdir()) / "arena-docs" / f"openapi-{sources_hash()}.json"
    if not cache.is_file():
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "arena.settings.local"}
        done = subprocess.run(
            [sys.executable, "manage.py", "spectacular", "--format", "openapi-json", "--file", str(partial)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise PluginError(f"manage.py spectacular failed:\n{done.stderr[-3000:]}")
        partial.replace(cache)
    return dict(json.loads(cache.read_text()))


def cell(text: object) -> str:
    """Text for a table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|") or " "


def schema_name(content: dict[str, Any]) -> str:
    """The body's schema as ``Name``, ``list of Name`` or its type, with its media type."""
    for media, body in content.items():
        schema = body.get("schema", {})
        ref = schema.get("$ref") or schema.get("items", {}).get("$ref")
        if ref:
            name = f"`{ref.rsplit('/', 1)[-1]}`"
            if schema.get("type") == "array":
                name = f"list of {name}"
        else:
            name = f"`{schema['type']}`" if schema.get("type") else ""
        return f"{name} ({media})".strip()
    return ""


def is_error(answer: dict[str, Any]) -> bool:
    return any(body.get("schema", {}).get("$ref", "").endswith("/Error") for body in answer.get("content", {}).values())


def reference_page(schema: dict[str, Any]) -> str:
    info = schema.get("info", {})
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                by_tag.setdefault((operation.get("tags") or ["other"])[0], []).append((method, path, operation))
    lines = [
        "# API reference",
        "",
        "<!-- Generated at build time by docs/hooks/openapi.py from the code's OpenAPI schema: not a file in "
        "the repository. -->",
        "",
        f"{info.get('title', 'API')} {info.get('version', '')}, generated from the code when this manual was "
        "built: the same schema the running server serves at `/api/v1/schema/` (YAML; `?format=json` for "
        "JSON) and explores at `/api/v1/docs/`. Here: [the schema as JSON](openapi.json) and "
        "[Swagger UI](swagger/index.html) on it (served by this site; *Try it out* needs a running server "
        "and a key). Conventions (keys, the error body, cursor pages) are in [The REST API](index.md).",
        "",
    ]
    for tag in sorted(by_tag):
        lines += [f"## {tag.capitalize()}", ""]
        for method, path, operation in sorted(by_tag[tag], key=lambda entry: (entry[1], METHODS.index(entry[0]))):
            lines += [f"### `{method.upper()} {path}`", ""]
            if operation.get("summary"):
                lines += [f"**{operation['summary'].rstrip('.')}.**", ""]
            if operation.get("description"):
                lines += [operation["description"], ""]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += ["| parameter | in | required | type | description |", "|---|---|---|---|---|"]
                for parameter in parameters:
                    kind = parameter.get("schema", {}).get("type", "")
                    lines.append(
                        f"| `{parameter['name']}` | {parameter.get('in', '')} | "
                        f"{'yes' if parameter.get('required') else 'no'} | {cell(kind)} | "
                        f"{cell(parameter.get('description', ''))} |"
                    )
                lines.append("")
            body = operation.get("requestBody", {}).get("content")
            if body:
                lines += [f"Request body: {schema_name(body)}.", ""]
            responses = operation.get("responses", {})
            answers = {status: answer for status, answer in responses.items() if not is_error(answer)}
            errors = sorted(status for status, answer in responses.items() if is_error(answer))
            if answers:
                lines += ["| status | meaning | body |", "|---|---|---|"]
                for status, answer in answers.items():
                    lines.append(
                        f"| {status} | {cell(answer.get('description', ''))} | "
                        f"{cell(schema_name(answer.get('content', {})))} |"
                    )
                lines.append("")
            if errors:
                lines += [f"Errors: {', '.join(errors)}, in [the one error body](index.md#conventions).", ""]
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    schema = schema_generate()
    files.append(File.generated(config, "api/openapi.json", content=json.dumps(schema, indent=1)))
    files.append(File.generated(config, "api/reference.md", content=reference_page(schema)))
    files.append(File.generated(config, "api/swagger/index.html", content=SWAGGER_PAGE))
    files.append(File.generated(config, "api/swagger/init.js", content=SWAGGER_INIT))
    import drf_spectacular_sidecar  # the app's dependency: the server serves the same files

    dist = Path(drf_spectacular_sidecar.__file__).parent / "static" / "drf_spectacular_sidecar" / "swagger-ui-dist"
    for name in ("swagger-ui.css", "swagger-ui-bundle.js", "swagger-ui-standalone-preset.js"):
        files.append(File.generated(config, f"api/swagger/{name}", abs_src_path=str(dist / name)))
    return files
