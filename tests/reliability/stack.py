"""A production-like stack of the stack's own, for the fault tests and the load benchmark: a PostgreSQL
cluster (initdb + pg_ctl in a temporary folder), a Redis server, a Triton server with the fast test
models, gunicorn with uvicorn workers (production settings, DEBUG off) and a Celery worker serving both
queues, all on loopback ports picked free. Nothing of the machine's shared PostgreSQL or Redis is used,
so a test may stop and restart its own.

``Rater`` is a rater driven through the real HTTP stack: a session cookie from the login form, the CSRF
token on every POST, the next battle, the "preparing" page's poll, the battle page, the vote. Every
vote's answer goes into a ledger (acknowledged or not), which ``Ledger.check`` holds against the rows
stored in the vote log: 0 acknowledged votes lost, 0 stored twice, nothing stored that was refused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
import requests

from core import queues
from serving.triton.server import TritonServer
from tests.compose_workers import worker_argv, worker_environment, worker_services

ROOT = Path(__file__).resolve().parents[2]
MODEL_REPOSITORIES = [ROOT / "serving" / "model_repository", ROOT / "tests" / "serving" / "model_repository"]
# The slow campaign's models (tests/reliability/seed.py), served beside the main campaign's.
SLOW_MODELS = ("delay-slow", "delay-fast")
PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))[-1] if Path("/usr/lib/postgresql").is_dir() else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval_s)
    raise TimeoutError(f"{what} not within {timeout_s} s")


def together(*calls: Callable[[], None]) -> None:
    """Run the calls at once, each in a thread (stopping a process is mostly waiting for it to exit), and
    return when all have returned; the first exception is raised then."""
    if calls:
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            for _ in pool.map(lambda call: call(), calls):
                pass


class Child:
    """A child process with its output in a log file (read back for failure messages)."""

    def __init__(self, args: Sequence[str], env: dict[str, str], log: Path, prefix: Sequence[str] = ()) -> None:
        self.log = log
        self._out = log.open("ab")
        self.popen = subprocess.Popen(
            [*prefix, *args], cwd=ROOT, env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, chars: int = 3000) -> str:
        return self.log.read_bytes()[-chars:].decode(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 20.0) -> None:
        if self.alive():
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        self._out.close()


class Postgres:
    """A PostgreSQL cluster of its own (trust authentication, loopback and a socket in its folder)."""

    def __init__(self, port: int | None = None, listen: str = "127.0.0.1") -> None:
        if PG_BIN is None:
            raise RuntimeError("PostgreSQL's server binaries are not in /usr/lib/postgresql/*/bin")
        # A folder of its own under /tmp, which the postgres user can reach (pytest's tmp_path is 0700).
        folder = Path(tempfile.mkdtemp(prefix="arena-pg-"))
        folder.chmod(0o755)
        self.folder = folder
        self.bin: Path = PG_BIN
        self.data = folder / "data"
        self.port = port or free_port()
        self.listen = listen
        self.host = "127.0.0.1" if listen in ("127.0.0.1", "*", "0.0.0.0") else listen
        # initdb and the server refuse to run as root: as root, run them as the postgres user.
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(folder, "postgres")
        subprocess.run(
            [*self._as, str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        with (self.data / "pg_hba.conf").open("a") as hba:  # another namespace's hosts (tests/reliability netns)
            hba.write("host all all 0.0.0.0/0 trust\n")

    def url(self, database: str = "arena", host: str | None = None) -> str:
        return f"postgres://postgres@{host or self.host}:{self.port}/{database}"

    def start(self, prefix: Sequence[str] = ()) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses={self.listen} -c max_connections=200"
        subprocess.run(
            [*prefix, *self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l",
             str(self.folder / "server.log"), "-w", "-t", "60", "start"],
            check=True, capture_output=True, timeout=90,
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            [*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"],
            capture_output=True,
            timeout=90,
        )

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)

    def create_database(self, name: str = "arena") -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.url(), autocommit=True) as conn:
            cursor = conn.execute(sql, params)  # type: ignore[arg-type]
            return list(cursor.fetchall()) if cursor.description else []


class RedisServer:
    def __init__(self, folder: Path, port: int | None = None, bind: str = "127.0.0.1") -> None:
        self.folder = folder
        self.port = port or free_port()
        self.bind = bind
        self.child: Child | None = None

    def url(self, host: str = "127.0.0.1") -> str:
        return f"redis://{host}:{self.port}/0"

    def start(self, prefix: Sequence[str] = ()) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = ["redis-server", "--bind", self.bind, "--port", str(self.port), "--save", "", "--appendonly", "no"]
        if self.bind != "127.0.0.1":
            args += ["--protected-mode", "no"]
        self.child = Child(args, dict(os.environ), self.folder / "redis.log", prefix)
        client = redis.Redis(host="127.0.0.1" if self.bind == "0.0.0.0" else self.bind, port=self.port)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_until(up, 20, "redis-server up", 0.05)

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


PRODUCTION_ENV = {
    "DJANGO_SETTINGS_MODULE": "arena.settings.base",
    "SECRET_KEY": "reliability-only-secret-key-reliability-only-secret-key",
    "DEBUG": "false",
    "ALLOWED_HOSTS": "*",
    # Plain HTTP on loopback (docs/deployment/index.md: a trial on localhost).
    "SECURE_SSL_REDIRECT": "false",
    "SECURE_HSTS_SECONDS": "0",
    "SESSION_COOKIE_SECURE": "false",
    "CSRF_COOKIE_SECURE": "false",
    # The "preparing" page's poll rather than server-sent events: the drivers read the page, not a stream.
    "ARENA_LIVE_STREAMING": "false",
    # The drivers vote as fast as a battle allows; the rate limits are tested elsewhere.
    "ARENA_VOTE_RATE": "100000/m",
    "ARENA_BATTLE_RATE": "100000/m",
    # And per address: every driver comes from loopback (the default 120/m is 2 a second for all of them).
    "ARENA_VOTE_IP_RATE": "100000/m",
    "ARENA_BATTLE_IP_RATE": "100000/m",
    # Twenty raters log in from loopback within seconds (the burst test): the login throttle's per-address
    # limit is tested elsewhere (tests/raters/test_login_throttle.py).
    "ARENA_LOGIN_FAILED_RATE": "100000/m/ip,100000/5m/key",
    # The web has the connection pool of the settings' default (DB_POOL_MAX_SIZE 10 per process), the workers
    # none (the compose file's x-worker-env: tests/compose_workers.worker_environment).
    "ARENA_RANKING_DEBOUNCE_S": "2",
    "ARENA_RANKING_LEASE_S": "5",
    "ARENA_RANKING_SCHEDULE_S": "5",
    # Beat's endpoint health check: a model server that was down is back within seconds.
    "ARENA_HEALTH_INTERVAL_S": "3",
    "LOG_LEVEL": "WARNING",
    "PYTHONUNBUFFERED": "1",
}


# The web servers a stack (and benchmarks/load.py) can run: the deployment's ASGI (uvicorn workers: live battles
# stream), gunicorn's sync WSGI workers (a request at a time a process), or its threaded WSGI workers.
WEB_SERVERS = ("asgi", "wsgi", "gthread")
GTHREAD_THREADS = 4


def gunicorn_app(web_server: str, wsgi_app: str, asgi_app: str) -> list[str]:
    """gunicorn's application and worker class for ``web_server`` (one of WEB_SERVERS)."""
    if web_server == "wsgi":
        return [wsgi_app, "--worker-class", "sync"]
    if web_server == "gthread":
        return [wsgi_app, "--worker-class", "gthread", "--threads", str(GTHREAD_THREADS)]
    if web_server == "asgi":
        return [asgi_app, "--worker-class", "uvicorn_worker.UvicornWorker"]
    raise ValueError(f"web server {web_server!r}: one of {', '.join(WEB_SERVERS)}")


@dataclass
class Stack:
    """The stack's processes, started in order by ``start``; each can be stopped and started again."""

    folder: Path
    web_workers: int = 2
    web_server: str = "asgi"  # or "wsgi" or "gthread" (gunicorn_app)
    worker_concurrency: int = 4
    raters: int = 4
    prompts: int = 200  # pool prompts of the main campaign (a rater never rates one twice)
    models: tuple[str, str] = ("zen-bigram", "stdlib-trigram")
    hosts: dict[str, str] = field(default_factory=dict)  # role -> address, when not all on loopback
    prefixes: dict[str, list[str]] = field(default_factory=dict)  # role -> command prefix (ip netns exec)
    pg: Postgres | None = None
    redis: RedisServer | None = None
    triton: TritonServer | None = None
    triton_child: Child | None = None
    web: Child | None = None
    worker: Child | None = None
    workers: list[Child] = field(default_factory=list)  # every worker started, for the logs
    beat: Child | None = None
    web_port: int = 0
    seed: dict[str, Any] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)

    def host(self, role: str) -> str:
        return self.hosts.get(role, "127.0.0.1")

    @property
    def url(self) -> str:
        return f"http://{self.host('web')}:{self.web_port}"

    def env(self) -> dict[str, str]:
        assert self.pg is not None and self.redis is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "DJANGO_"))}
        env.update(PRODUCTION_ENV)
        env.update(
            {
                "DATABASE_URL": self.pg.url(host=self.host("db")),
                "REDIS_URL": self.redis.url(self.host("redis")),
                # The model servers are this stack's Triton: an operator's allow-list names its network.
                "ARENA_MODEL_HOSTS": "127.0.0.0/8" if "triton" not in self.hosts else f"{self.host('triton')}/32",
            }
        )
        env.update(self.extra_env)
        return env

    def model_repository(self) -> Path:
        """The models the seeded campaigns use, copied from MODEL_REPOSITORIES (with the repositories'
        top-level modules, which the models load by path) into a repository of the stack's own: Triton
        loads every model of a repository at start, and the suite's test models (a dozen Python-backend
        stubs this stack never calls) would triple its start, which the Triton fault test pays twice."""
        repository = self.folder / "models"
        if repository.is_dir():
            return repository
        wanted = {*self.models, *SLOW_MODELS}
        repository.mkdir(parents=True)
        for source in MODEL_REPOSITORIES:
            for entry in sorted(source.iterdir()):
                if entry.is_file() and entry.suffix == ".py":
                    shutil.copy2(entry, repository / entry.name)
                elif entry.name in wanted:
                    shutil.copytree(entry, repository / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
                    wanted.discard(entry.name)
        if wanted:
            raise RuntimeError(f"models {sorted(wanted)} are in none of {MODEL_REPOSITORIES}")
        return repository

    def triton_url(self) -> str:
        if self.triton is not None:
            return self.triton.grpc_url
        return f"{self.host('triton')}:{self.triton_grpc_port}"

    triton_grpc_port: int = 0
    triton_http_port: int = 0

    # -- the parts -------------------------------------------------------------------------------------

    def start_database(self) -> None:
        self.pg = Postgres(listen=self.host("db") if "db" in self.hosts else "127.0.0.1")
        self.pg.start(self.prefixes.get("db", []))
        self.pg.create_database()

    def start_redis(self) -> None:
        self.redis = RedisServer(self.folder / "redis", bind=self.host("redis"))
        self.redis.start(self.prefixes.get("redis", []))

    def triton_prepare(self) -> None:
        """Fix Triton's address before it starts (``triton_url``), so the seed can write it meanwhile."""
        if "triton" in self.prefixes:
            self.triton_grpc_port, self.triton_http_port = 8001, 8000
        elif self.triton is None:
            self.triton = TritonServer(model_repositories=[self.model_repository()], grpc_port=free_port())

    def start_triton(self) -> None:
        """In process (TritonServer) on loopback; in a namespace, ``python -m serving.triton.server`` there."""
        if "triton" not in self.prefixes:
            self.triton_prepare()
            assert self.triton is not None
            self.triton.start()
            return
        self.triton_prepare()
        args = [str(ROOT / ".venv-triton" / "bin" / "python"), "-m", "serving.triton.server", "--address", "0.0.0.0",
                "--grpc-port", str(self.triton_grpc_port), "--http-port", str(self.triton_http_port),
                "--model-repository", str(self.model_repository())]  # fmt: skip
        self.triton_child = Child(args, dict(os.environ), self.folder / "triton.log", self.prefixes["triton"])

    def stop_triton(self) -> None:
        if self.triton is not None:
            self.triton.stop()
        if self.triton_child is not None:
            self.triton_child.stop()

    def seed_start(self) -> subprocess.Popen[bytes]:
        """Migrate the stack's database and seed it, in one child process (one Django start, not two), which
        needs only Triton's address: it runs while Triton loads its models (``seed_wait`` collects it)."""
        self.triton_prepare()
        args = [*self.prefixes.get("web", []), sys.executable, "-m", "tests.reliability.seed", "--migrate",
                "--raters", str(self.raters), "--prompts", str(self.prompts), "--triton", self.triton_url(),
                "--models", ",".join(self.models)]  # fmt: skip
        with (self.folder / "seed.json").open("wb") as out, (self.folder / "seed.log").open("wb") as log:
            return subprocess.Popen(args, cwd=ROOT, env=self.env(), stdout=out, stderr=log)

    def seed_wait(self, child: subprocess.Popen[bytes], timeout_s: float = 600.0) -> None:
        try:
            code = child.wait(timeout=timeout_s)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if code != 0:
            log = (self.folder / "seed.log").read_text(errors="replace")[-3000:]
            raise RuntimeError(f"migrating and seeding the stack's database exited {code}:\n{log}")
        self.seed = json.loads((self.folder / "seed.json").read_text().strip().splitlines()[-1])

    def migrate_and_seed(self) -> None:
        self.seed_wait(self.seed_start())

    def start_web(self) -> None:
        self.web_port = self.web_port or free_port()
        bind = "0.0.0.0" if "web" in self.hosts else "127.0.0.1"
        app = gunicorn_app(self.web_server, "arena.wsgi:application", "arena.asgi:application")
        args = [sys.executable, "-m", "gunicorn", *app, "--workers", str(self.web_workers), "--bind",
                f"{bind}:{self.web_port}", "--timeout", "60", "--graceful-timeout", "5",
                "--log-level", "warning"]  # fmt: skip
        self.web = Child(args, self.env(), self.folder / "web.log", self.prefixes.get("web", []))
        self.wait_web()

    def wait_web(self, timeout_s: float = 90.0) -> None:
        def up() -> bool:
            assert self.web is not None
            if not self.web.alive():
                raise RuntimeError(f"gunicorn exited:\n{self.web.tail()}")
            try:
                return requests.get(self.url + "/accounts/login/", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_until(up, timeout_s, "the web server", 0.25)

    def web_worker_pids(self) -> list[int]:
        assert self.web is not None
        master = self.web.pid
        return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]

    def start_compose_workers(self, services: Sequence[str] = ()) -> None:
        """The Celery workers as docker/compose.yaml runs them, one service per queue (all of them, or
        ``services``); ``worker`` (the recompute queue and beat's sweeps) becomes ``self.worker``."""
        variables = {
            "WORKER_CONCURRENCY": "1",  # one recompute at a time on this 2-core machine
            "GENERATION_CONCURRENCY": str(self.worker_concurrency),
            "DELIVERY_CONCURRENCY": "4",
            "EXPORT_CONCURRENCY": "1",
        }
        for service in services or tuple(worker_services()):
            args = worker_argv(service, variables, hostname=f"rel-{service}-{time.time_ns()}@%h")
            log = self.folder / f"worker-{service}-{time.time_ns()}.log"
            env = {**self.env(), **worker_environment(service, variables)}
            child = Child(args, env, log, self.prefixes.get("worker", []))
            self.workers.append(child)
            if service == "worker":
                self.worker = child

    def stop_workers(self) -> None:
        together(*(child.stop for child in self.workers))

    def start_worker(self, module: Sequence[str] = ("celery",), queues: str = ",".join(queues.ALL)) -> Child:
        """One worker of the stack's own making (every queue by default: one machine's worker, as the
        several-hosts test has; tests.ranking.slow_worker for the recompute queue's attack)."""
        # tests.ranking.slow_worker adds the "worker" sub-command itself.
        head = ["-A", "arena", "worker"] if module[0] == "celery" else []
        args = [sys.executable, "-m", *module, *head,
                "-Q", queues, "--pool=threads", f"--concurrency={self.worker_concurrency}", "--loglevel=INFO",
                "--without-gossip", "--without-mingle", "--without-heartbeat",
                f"--hostname=rel-{time.time_ns()}@%h"]  # fmt: skip
        log = self.folder / f"worker-{module[-1].rsplit('.', 1)[-1]}-{queues}-{time.time_ns()}.log"
        # The environment of the compose file's workers (no connection pool).
        env = {**self.env(), **worker_environment("worker")}
        self.worker = Child(args, env, log, self.prefixes.get("worker", []))
        self.workers.append(self.worker)
        return self.worker

    def start_beat(self) -> None:
        """Beat, as the compose file runs it: the safety nets (leaderboards, buffers, endpoint health)."""
        args = [sys.executable, "-m", "celery", "-A", "arena", "beat", "--loglevel=INFO", "--schedule",
                str(self.folder / f"beat-schedule-{time.time_ns()}")]  # fmt: skip
        env = {**self.env(), **worker_environment("beat")}
        self.beat = Child(args, env, self.folder / "beat.log", self.prefixes.get("worker", []))

    def start(self) -> None:
        self.start_database()
        self.start_redis()
        # The database is migrated and seeded while Triton loads its models (neither waits for the other).
        seeding = self.seed_start()
        try:
            self.start_triton()
        except BaseException:
            seeding.kill()
            seeding.wait()
            raise
        self.seed_wait(seeding)
        # The workers (as the compose file runs them) and beat boot while the web server does: the web's
        # wait then covers theirs.
        self.start_compose_workers()
        self.start_beat()
        self.start_web()

    def stop(self) -> None:
        # Each part stops on its own (SIGTERM, its grace, SIGKILL): the application's processes together, then
        # the servers they use together (stopped first, Redis or Triton would keep a worker waiting on them).
        together(*(child.stop for child in (self.beat, *self.workers, self.web) if child is not None))
        together(
            self.stop_triton,
            *([self.redis.stop] if self.redis is not None else []),
            *([self.pg.remove] if self.pg is not None else []),
        )

    def logs(self) -> str:
        children = [self.web, self.beat, *self.workers]
        parts = [f"--- {c.log.name}\n{c.tail()}" for c in children if c is not None]
        return "\n".join(parts)

    # -- what is stored --------------------------------------------------------------------------------

    def stored_votes(self) -> Counter[str]:
        assert self.pg is not None
        return Counter({str(battle): n for battle, n in self.pg.query(
            "SELECT battle_id, count(*) FROM battles_vote GROUP BY battle_id")})  # fmt: skip

    def battle_statuses(self) -> dict[str, str]:
        assert self.pg is not None
        return {str(pk): status for pk, status in self.pg.query("SELECT id, status FROM battles_battle")}

    def rater(self, index: int, campaign: str = "campaign_id", poll_s: float = 0.25) -> Rater:
        rater = Rater(self.url, self.seed[campaign], poll_s=poll_s)
        rater.log_in(self.seed["raters"][index], self.seed["password"])
        return rater


# -- the raters ------------------------------------------------------------------------------------------


class Refused(Exception):
    """An answer that is not the one the flow expects (its status, and the start of its body)."""

    def __init__(self, what: str, status: int, body: str = "") -> None:
        super().__init__(f"{what}: {status} {body[:200]!r}")
        self.status = status
        self.body = body


class BufferDry(Exception):
    """The next battle was not ready when handed out: the warm buffer ran out."""


@dataclass
class Ledger:
    """Every vote's outcome as the rater saw it, thread-safe."""

    acknowledged: list[str] = field(default_factory=list)  # battle ids answered 302 to the vote
    failed: list[tuple[str, str]] = field(default_factory=list)  # (battle id, why): 5xx, connection error
    latencies: dict[str, list[float]] = field(default_factory=dict)  # request kind -> seconds
    errors: Counter[str] = field(default_factory=Counter)  # request kind + status -> count
    lock: threading.Lock = field(default_factory=threading.Lock)

    def timed(self, kind: str, seconds: float) -> None:
        with self.lock:
            self.latencies.setdefault(kind, []).append(seconds)

    def check(self, stored: Counter[str]) -> dict[str, int]:
        """0 lost (every acknowledged vote stored), 0 doubled (none stored twice); the counts."""
        acknowledged = Counter(self.acknowledged)
        lost = [b for b in acknowledged if stored.get(b, 0) == 0]
        doubled = [b for b, n in stored.items() if n > 1] + [b for b, n in acknowledged.items() if n > 1]
        return {"acknowledged": len(acknowledged), "stored": sum(stored.values()), "lost": len(lost),
                "doubled": len(doubled)}  # fmt: skip


class Rater:
    """One rater's browser session: cookies, CSRF, the pages a person opens."""

    def __init__(self, url: str, campaign_id: int, timeout_s: float = 30.0, poll_s: float = 0.25) -> None:
        self.url = url
        self.poll_s = poll_s  # the tests poll faster than a browser (1 s), to keep them short
        self.campaign_id = campaign_id
        self.timeout_s = timeout_s
        self.http = requests.Session()

    def _csrf(self) -> dict[str, str]:
        return {"csrfmiddlewaretoken": self.http.cookies.get("csrftoken") or ""}

    def _post(self, path: str, data: dict[str, str]) -> requests.Response:
        return self.http.post(
            self.url + path,
            data={**self._csrf(), **data},
            headers={"Referer": self.url + path},
            allow_redirects=False,
            timeout=self.timeout_s,
        )

    def log_in(self, email: str, password: str) -> None:
        self.http.get(self.url + "/accounts/login/", timeout=self.timeout_s).raise_for_status()
        response = self._post("/accounts/login/", {"login": email, "password": password})
        if response.status_code != 302:
            raise Refused("log in", response.status_code, response.text)

    def next_battle(self, ledger: Ledger | None = None) -> str:
        """POST next: the battle's id (from the redirect)."""
        t0 = time.perf_counter()
        response = self._post(f"/c/{self.campaign_id}/next/", {})
        if ledger is not None:
            ledger.timed("next", time.perf_counter() - t0)
        location = response.headers.get("Location", "")
        if response.status_code != 302 or not location.startswith("/b/"):
            raise Refused("next battle", response.status_code, response.text)
        return location.split("/")[2]

    def state(self, battle: str) -> str:
        response = self.http.get(f"{self.url}/b/{battle}/state/", timeout=self.timeout_s)
        if response.status_code != 200:
            raise Refused("state", response.status_code, response.text)
        status: str = response.json()["status"]
        return status

    def wait_prepared(self, battle: str, timeout_s: float = 60.0, stop: threading.Event | None = None) -> str:
        """Poll until the battle is ready (or void): at once, then after ``poll_s``, growing by a quarter
        each time up to 4 s, as the preparing page's script does (static/arena/battle.js, from 1 s).
        ``stop``: a driver that was told to stop leaves the page ("generating" then)."""
        deadline = time.monotonic() + timeout_s
        delay = self.poll_s
        while time.monotonic() < deadline:
            status = self.state(battle)
            if status != "generating":
                return status
            if stop is None:
                time.sleep(delay)
            elif stop.wait(delay):
                return status
            delay = min(delay * 1.25, 4.0)
        raise TimeoutError(f"battle {battle} still generating after {timeout_s} s")

    def page(self, battle: str) -> str:
        response = self.http.get(f"{self.url}/b/{battle}/", timeout=self.timeout_s)
        if response.status_code != 200:
            raise Refused("battle page", response.status_code, response.text)
        return response.text

    def vote(self, battle: str, ledger: Ledger, choice: str = "left") -> bool:
        """Vote; the outcome goes into the ledger. True when acknowledged (the redirect to the battle)."""
        t0 = time.perf_counter()
        try:
            response = self._post(f"/b/{battle}/vote/", {"choice": choice})
        except requests.RequestException as exc:
            with ledger.lock:
                ledger.failed.append((battle, type(exc).__name__))
                ledger.errors["vote " + type(exc).__name__] += 1
            return False
        ledger.timed("vote", time.perf_counter() - t0)
        if response.status_code == 302 and response.headers.get("Location", "") == f"/b/{battle}/":
            with ledger.lock:
                ledger.acknowledged.append(battle)
            return True
        with ledger.lock:
            ledger.failed.append((battle, str(response.status_code)))
            ledger.errors[f"vote {response.status_code}"] += 1
        return False

    def ready_battle_and_vote(self, ledger: Ledger, choice: str = "left") -> tuple[str, bool]:
        """From a warm buffer: next battle, its page (which must show both answers: no waiting for a
        model), the vote. ``BufferDry`` when the page is still preparing (the buffer ran out)."""
        battle = self.next_battle(ledger)
        t0 = time.perf_counter()
        page = self.page(battle)
        ledger.timed("page", time.perf_counter() - t0)
        if 'name="choice"' not in page:
            raise BufferDry(battle)
        return battle, self.vote(battle, ledger, choice)

    def battle_and_vote(self, ledger: Ledger, choice: str = "left") -> tuple[str, bool]:
        battle = self.next_battle(ledger)
        status = self.wait_prepared(battle)
        if status != "ready":
            raise Refused(f"battle {battle} {status}", 200)
        self.page(battle)
        return battle, self.vote(battle, ledger, choice)
