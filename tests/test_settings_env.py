"""Settings from the environment fail loudly on malformed values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from arena.settings.env import ImproperEnvironment, env_bool, env_int, env_list, env_url

ROOT = Path(__file__).resolve().parents[1]


def test_typed_readers(monkeypatch):
    monkeypatch.setenv("X_BOOL", "yes")
    assert env_bool("X_BOOL", False) is True
    monkeypatch.setenv("X_BOOL", "ture")
    with pytest.raises(ImproperEnvironment, match="X_BOOL"):
        env_bool("X_BOOL", False)
    monkeypatch.setenv("X_INT", "12a")
    with pytest.raises(ImproperEnvironment, match="X_INT"):
        env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "0")
    with pytest.raises(ImproperEnvironment, match="minimum"):
        env_int("X_INT", 1, minimum=1)
    monkeypatch.setenv("X_LIST", "a,,b")
    with pytest.raises(ImproperEnvironment):
        env_list("X_LIST", [])
    monkeypatch.setenv("X_URL", "mysql://x")
    with pytest.raises(ImproperEnvironment, match="schemes"):
        env_url("X_URL", None, schemes=("postgres",))
    monkeypatch.delenv("X_URL")
    assert env_url("X_URL", None, schemes=("redis",)) is None


def _settings_in_subprocess(module: str = "arena.settings.local", **env: str) -> subprocess.CompletedProcess[str]:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "DJANGO_SETTINGS_MODULE"}
    }
    environment.update(env)
    code = (
        f"import django, os; os.environ['DJANGO_SETTINGS_MODULE']='{module}'; django.setup(); "
        "from django.conf import settings as s; "
        "print(s.DATABASES['default']['ENGINE'], s.CELERY_TASK_ALWAYS_EAGER, s.CACHES['default']['BACKEND'], "
        "s.DEBUG)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


def test_defaults_are_a_working_local_platform():
    result = _settings_in_subprocess()
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "django.db.backends.sqlite3",
        "True",
        "django.core.cache.backends.locmem.LocMemCache",
        "True",
    ]


def test_redis_url_switches_to_real_broker_and_cache():
    result = _settings_in_subprocess(
        REDIS_URL="redis://127.0.0.1:6379/3", DATABASE_URL="postgres://postgres@127.0.0.1:5432/x"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["django.db.backends.postgresql", "False", "arena.cache.FailoverRedisCache", "True"]


def test_production_without_secret_key_refuses_to_start():
    result = _settings_in_subprocess(DEBUG="false")
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_settings_fail_closed():
    """What a WSGI server imports: DEBUG is off unless asked for, and then a SECRET_KEY is required."""
    result = _settings_in_subprocess("arena.settings.base")
    assert result.returncode != 0 and "SECRET_KEY must be set" in result.stderr
    result = _settings_in_subprocess("arena.settings.base", SECRET_KEY="k" * 50)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"


def test_entry_points_default_to_the_right_settings():
    assert "arena.settings.base" in (ROOT / "arena" / "wsgi.py").read_text()
    assert "arena.settings.base" in (ROOT / "arena" / "asgi.py").read_text()
    assert "arena.settings.local" in (ROOT / "manage.py").read_text()


def test_malformed_debug_refuses_to_start():
    result = _settings_in_subprocess(DEBUG="maybe")
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def _pool_settings(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "DB_", "DJANGO_"))}
    environment.update({"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", **env})
    code = (
        "import django, json, os; os.environ['DJANGO_SETTINGS_MODULE']='arena.settings.local'; django.setup(); "
        "from django.conf import settings as s; d = s.DATABASES['default']; "
        "print(json.dumps([d.get('OPTIONS', {}).get('pool'), d['CONN_HEALTH_CHECKS'], d['CONN_MAX_AGE']]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


def test_a_connection_pool_is_asked_for_by_its_size_and_checks_what_it_hands_out():
    import json

    result = _pool_settings(DB_POOL_MAX_SIZE="12", DB_POOL_TIMEOUT_S="5")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [{"min_size": 2, "max_size": 12, "timeout": 5.0}, True, 0]
    result = _pool_settings(DB_POOL_MAX_SIZE="1")
    assert json.loads(result.stdout)[0] == {"min_size": 1, "max_size": 1, "timeout": 3.0}
    result = _pool_settings()  # the default: no pool, a connection per request
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)[0] is None
    result = _pool_settings(DB_POOL_MAX_SIZE="12", DB_CONN_MAX_AGE="60")  # Django refuses both at once
    assert result.returncode != 0 and "exclude each other" in result.stderr
