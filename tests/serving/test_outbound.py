"""Server-side request forgery: a tenant manager cannot make the platform call internal addresses.

The attack: an endpoint URL pointing at the platform's own Redis, database, web port or a cloud
metadata address; each battle then makes the server connect there and the console shows what came
back. The operator's allow-list (``ARENA_MODEL_HOSTS``) decides which internal servers are model
servers; anything else must resolve to public addresses only, and what the console shows of a
failed call never carries the answer's bytes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from battles.models import Battle, Generation
from core.outbound import AddressRefused, address_check, allow_list_parse, url_check
from serving.models import ModelEndpoint, endpoint_address_check
from serving.triton.client import EndpointSpec, SamplingParams, generate
from tests.conftest import endpoint_for, start_battle

SECRET = "SECRET-7f3a internal token=abc123"
PARAMS = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=8)


def fake_dns(table: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise socket.gaierror("Name or service not known")
        return table[host]

    return resolve


DNS = fake_dns(
    {
        "loopback.attacker.example": ["127.0.0.1"],
        "mixed.attacker.example": ["93.184.215.14", "10.1.2.3"],
        "metadata.attacker.example": ["169.254.169.254"],
        "mapped.attacker.example": ["::ffff:127.0.0.1"],
        "models.example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
        "triton": ["172.18.0.5"],
    }
)


@pytest.mark.parametrize(
    "host, port",
    [
        ("127.0.0.1", 6379),  # the platform's Redis
        ("127.0.0.1", 8000),  # its own web port
        ("10.0.0.1", 5432),  # a private network
        ("192.168.1.10", 8001),
        ("172.16.0.1", 8001),
        ("100.64.0.1", 8001),  # carrier-grade NAT
        ("169.254.169.254", 80),  # cloud metadata
        ("0.0.0.0", 8001),
        ("::1", 8001),
        ("fd00::1", 8001),
        ("fe80::1", 8001),
        ("::ffff:127.0.0.1", 8001),
        ("224.0.0.1", 8001),
        ("loopback.attacker.example", 8001),  # a name pointing at loopback
        ("mixed.attacker.example", 8001),  # one internal record among public ones
        ("metadata.attacker.example", 80),
        ("mapped.attacker.example", 8001),
        ("nowhere.invalid", 8001),  # does not resolve
    ],
)
def test_internal_addresses_are_refused_without_an_allow_list(host, port):
    with pytest.raises(AddressRefused):
        address_check(host, port, allowed=(), resolver=DNS)


def test_public_addresses_pass_and_the_allow_list_opens_exactly_what_it_names():
    address_check("93.184.215.14", 8001, allowed=(), resolver=DNS)
    address_check("models.example.com", 8001, allowed=(), resolver=DNS)
    allowed = allow_list_parse(["triton", "10.0.5.0/24", "127.0.0.1:8501", "[::1]:8001"])
    address_check("triton", 8001, allowed=allowed, resolver=DNS)  # by name, whatever it resolves to
    address_check("10.0.5.77", 8001, allowed=allowed, resolver=DNS)  # inside the network
    address_check("127.0.0.1", 8501, allowed=allowed, resolver=DNS)  # the one allowed port
    address_check("::1", 8001, allowed=allowed, resolver=DNS)
    for host, port in [("10.0.6.1", 8001), ("127.0.0.1", 6379), ("::1", 6379), ("loopback.attacker.example", 6379)]:
        with pytest.raises(AddressRefused):
            address_check(host, port, allowed=allowed, resolver=DNS)


def test_the_real_resolver_is_used_and_every_address_is_checked():
    # "localhost" resolves (through /etc/hosts) to loopback only.
    with pytest.raises(AddressRefused, match="resolves to"):
        address_check("localhost", 8001, allowed=())
    address_check("localhost", 8001, allowed=allow_list_parse(["127.0.0.0/8", "[::1]"]))


@pytest.mark.parametrize("items", [["10.0.0.0/33"], ["host:99999"], ["a b"], ["http://triton:8001"]])
def test_malformed_allow_list_entries_are_refused(items):
    with pytest.raises(ValueError):
        allow_list_parse(items)


def test_the_same_rule_guards_webhook_urls():
    url_check("https://93.184.215.14/hooks/arena", allowed=())
    for url in [
        "https://127.0.0.1/hook",
        "https://10.0.0.1:8443/hook",
        "http://93.184.215.14/hook",
        "https://user:pw@93.184.215.14/",
        "https://loopback.attacker.example/",
        "not a url",
    ]:
        with pytest.raises(AddressRefused):
            url_check(url, allowed=(), resolver=DNS)


def test_a_malformed_allow_list_stops_start_up(monkeypatch):
    from arena.settings.env import ImproperEnvironment, env_hosts

    monkeypatch.setenv("ARENA_MODEL_HOSTS", "triton,10.0.0.0/99")
    with pytest.raises(ImproperEnvironment, match="ARENA_MODEL_HOSTS"):
        env_hosts("ARENA_MODEL_HOSTS", [])
    monkeypatch.setenv("ARENA_MODEL_HOSTS", "")
    assert env_hosts("ARENA_MODEL_HOSTS", ["x"]) == []


# -- through the platform ----------------------------------------------------------------------------

ATTACKS = [
    "127.0.0.1:6379",
    "127.0.0.1:5432",
    "10.0.0.1:8001",
    "169.254.169.254:80",
    "localhost:8000",
    "[::1]:6379",
    "192.168.0.10:8001",
]


@pytest.mark.django_db
@pytest.mark.parametrize("url", ATTACKS)
def test_a_manager_cannot_enter_an_internal_address(acme, alice_client, settings, url):
    settings.ARENA_MODEL_HOSTS = ["triton:8001"]  # what a deployment allows: its own model server only
    response = alice_client.post(
        "/admin/serving/modelendpoint/add/",
        {
            "organization": acme.organization.pk,
            "name": "probe",
            "url": url,
            "protocol": "grpc",
            "model_name": "zen-bigram",
            "model_version": "",
            "timeout_s": "5",
        },
    )
    assert response.status_code == 200  # the form again, with the error
    html = response.content.decode()
    assert "internal address" in html or "does not resolve" in html
    assert "Model servers of this platform: triton:8001." in html  # what the manager may pick instead
    assert not ModelEndpoint.objects.filter(name="probe").exists()


@pytest.mark.django_db
@pytest.mark.triton
def test_an_allowed_address_is_accepted_by_the_console(acme, alice_client, settings, triton_server):
    settings.ARENA_MODEL_HOSTS = [triton_server.grpc_url]
    response = alice_client.post(
        "/admin/serving/modelendpoint/add/",
        {
            "organization": acme.organization.pk,
            "name": "allowed",
            "url": triton_server.grpc_url,
            "protocol": "grpc",
            "model_name": "zen-bigram",
            "model_version": "",
            "timeout_s": "5",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert ModelEndpoint.objects.filter(name="allowed").exists()


class _Listener:
    """A TCP port that records whether anybody connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]

    def connected(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except TimeoutError:
            return False
        conn.close()
        return True


@pytest.mark.django_db
def test_an_address_refused_at_call_time_is_never_connected_to(acme, bob_client, settings):
    """An endpoint stored while the rule allowed it (or whose name now resolves elsewhere) is checked
    again before each call: the battle is void and nothing connects."""
    listener = _Listener()
    acme.right.endpoint = endpoint_for(acme, model="zen-bigram", url=f"127.0.0.1:{listener.port}", timeout_s=3)
    acme.right.save()
    settings.ARENA_MODEL_HOSTS = []  # ... and the operator has since closed loopback
    battle, _ = start_battle(bob_client, acme.campaign)
    assert battle.status == Battle.Status.VOID
    failed = Generation.objects.get(battle=battle, competitor=acme.right)
    assert "address refused" in failed.error
    assert not listener.connected()
    listener.sock.close()


@pytest.fixture
def not_triton() -> Iterator[tuple[int, int]]:
    """Two services that are not Triton: an HTTP server answering with a secret, and a Redis-like one."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = f"<html>{SECRET}</html>".encode()
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    http = HTTPServer(("127.0.0.1", 0), Handler)
    # Polled every 20 ms for the shutdown (serve_forever waits up to 0.5 s by default).
    threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    raw = socket.socket()
    raw.bind(("127.0.0.1", 0))
    raw.listen()

    def answer() -> None:
        while True:
            try:
                conn, _ = raw.accept()
            except OSError:
                return
            conn.recv(65536)
            conn.sendall(f"-ERR {SECRET}\r\n".encode())
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    yield http.server_address[1], raw.getsockname()[1]
    http.shutdown()
    raw.close()


@pytest.mark.parametrize(
    ("protocol", "contract"), [("http", "arena"), ("grpc", "arena"), ("grpc", "vllm"), ("grpc", "trtllm")]
)
def test_failure_messages_never_carry_what_answered(not_triton, protocol, contract):
    for port in not_triton:
        endpoint = EndpointSpec(f"127.0.0.1:{port}", protocol, "m", timeout_s=3, contract=contract)  # type: ignore[arg-type]
        result = generate(endpoint, "x", PARAMS)
        assert not result.ok
        assert "SECRET" not in result.error and "abc123" not in result.error, result.error
        assert "frame type" not in result.error  # gRPC names the first byte it got: a fingerprint
        assert result.error.startswith(f"m at {protocol}://127.0.0.1:{port}: ")


def test_endpoint_address_check_uses_the_settings(settings):
    settings.ARENA_MODEL_HOSTS = ["127.0.0.1:8501"]
    endpoint_address_check("127.0.0.1:8501")
    with pytest.raises(AddressRefused):
        endpoint_address_check("127.0.0.1:6379")
    with pytest.raises(AddressRefused):
        endpoint_address_check("127.0.0.1")


def test_the_console_readiness_check_never_connects_to_a_refused_address(settings):
    from serving.triton.client import model_readiness

    listener = _Listener()
    settings.ARENA_MODEL_HOSTS = []
    endpoint = ModelEndpoint(
        name="probe", url=f"127.0.0.1:{listener.port}", protocol="grpc", model_name="m", timeout_s=3
    )
    assert "address refused" in model_readiness(endpoint.spec())
    assert not listener.connected()
    listener.sock.close()


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "localhost."])
def test_other_spellings_of_loopback_resolve_and_are_refused(host):
    """Forms Python's ipaddress does not parse but the resolver (and so the client) accepts."""
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(host, 6379, type=socket.SOCK_STREAM)}
    except socket.gaierror:
        resolved = set()
    with pytest.raises(AddressRefused):
        address_check(host, 6379, allowed=())
    assert resolved <= {"127.0.0.1", "::1"}
