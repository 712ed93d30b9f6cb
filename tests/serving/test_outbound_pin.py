"""The outbound-address rule, round two: IPv6 forms that carry an IPv4 address, and the pinned call.

Known truth: every address below is written out by hand with the IPv4 address the network delivers it to
(RFC 4291 mapped and compatible, RFC 6052 NAT64, RFC 3056 6to4, RFC 4380 Teredo), so which must be refused
and which may pass is fixed, not computed by the code under test. The pinned call is checked with a
listener on loopback standing for the approved address, and a name no DNS can resolve standing for
whatever the name would resolve to a second time: a call that connects at all connected to the address
the check approved.
"""

from __future__ import annotations

import socket
import threading

import pytest

from core.outbound import AddressRefused, address_approve, address_check, allow_list_parse, url_check
from serving.models import ModelEndpoint, endpoint_address_check, endpoint_address_pin
from serving.triton.client import EndpointSpec, SamplingParams, generate, model_readiness

PARAMS = SamplingParams(temperature=1.0, top_p=1.0, max_tokens=4)

# (address, the IPv4 address it carries, which is internal)
INTERNAL_INSIDE_IPV6 = [
    ("::127.0.0.1", "127.0.0.1"),  # IPv4-compatible
    ("::7f00:1", "127.0.0.1"),  # the same, spelt in hex
    ("::a00:1", "10.0.0.1"),
    ("::ffff:0:127.0.0.1", "127.0.0.1"),  # IPv4-translated (SIIT)
    ("::ffff:169.254.169.254", "169.254.169.254"),  # IPv4-mapped, cloud metadata
    ("64:ff9b::127.0.0.1", "127.0.0.1"),  # NAT64 well-known prefix
    ("64:ff9b::7f00:1", "127.0.0.1"),
    ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
    ("64:ff9b::c0a8:10a", "192.168.1.10"),
    ("2002:7f00:1::", "127.0.0.1"),  # 6to4: the 32 bits after 2002:
    ("2002:7f00:1:1::1", "127.0.0.1"),
    ("2002:a00:1::1", "10.0.0.1"),
    ("2002:a9fe:a9fe::1", "169.254.169.254"),
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1"),  # Teredo: client = last 32 bits inverted
]


@pytest.mark.parametrize(("address", "carried"), INTERNAL_INSIDE_IPV6)
def test_an_ipv6_address_carrying_an_internal_ipv4_address_is_refused(address, carried):
    with pytest.raises(AddressRefused):
        address_check(address, 8001, allowed=())
    # ... through the model form's host:port and a webhook URL as well
    with pytest.raises(AddressRefused):
        address_approve(address, 443, allowed=())
    with pytest.raises(AddressRefused):
        url_check(f"https://[{address}]/hook", allowed=())


def test_a_name_resolving_to_nat64_of_loopback_is_refused_and_the_message_names_what_it_carries():
    def dns(host: str, port: int) -> list[str]:
        return ["64:ff9b::7f00:1"]

    with pytest.raises(AddressRefused, match=r"resolves to 64:ff9b::7f00:1 \(carries 127\.0\.0\.1\)"):
        address_check("sneaky.attacker.example", 8001, allowed=(), resolver=dns)


def test_the_local_use_nat64_prefix_is_never_public():
    for address in ["64:ff9b:1::808:808", "64:ff9b:1:ffff::1"]:
        with pytest.raises(AddressRefused):
            address_check(address, 8001, allowed=())


@pytest.mark.parametrize(
    "address",
    [
        "64:ff9b::808:808",  # NAT64 of 8.8.8.8: what DNS64 gives an IPv6-only network for a public name
        "64:ff9b::5db8:d70e",  # 93.184.215.14
        "2002:808:808::1",  # 6to4 of 8.8.8.8
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",  # plain global IPv6
        "2001:4860:4860::8888",  # in 2001::/23's global part, not Teredo
    ],
)
def test_ipv6_forms_of_public_addresses_still_pass(address):
    assert address_approve(address, 8001, allowed=()) == (address,)


def test_the_operator_allow_list_still_opens_its_own_addresses():
    allowed = allow_list_parse(["127.0.0.0/8", "[64:ff9b::a00:5]:8001"])
    address_check("::ffff:127.0.0.1", 8001, allowed=allowed)  # mapped: the very address listed
    address_check("64:ff9b::a00:5", 8001, allowed=allowed)  # listed as written
    with pytest.raises(AddressRefused):
        address_check("64:ff9b::a00:5", 8002, allowed=allowed)


def test_the_model_form_refuses_a_bracketed_ipv6_loopback(settings):
    settings.ARENA_MODEL_HOSTS = []
    for url in ["[::127.0.0.1]:8001", "[64:ff9b::7f00:1]:8001", "[2002:7f00:1::]:8001", "[::ffff:7f00:1]:6379"]:
        with pytest.raises(AddressRefused):
            endpoint_address_check(url)


# -- the pinned call ----------------------------------------------------------------------------------


def test_the_pin_is_the_address_the_check_approved(settings):
    settings.ARENA_MODEL_HOSTS = ["triton:8001", "10.0.5.0/24"]

    def dns(host: str, port: int) -> list[str]:
        return {
            "models.example.com": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
            "v6.example.com": ["2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
            "inside.example.com": ["10.0.5.7"],
        }[host]

    assert endpoint_address_pin("models.example.com:8001", resolver=dns) == "93.184.215.14:8001"
    assert endpoint_address_pin("v6.example.com:8001", resolver=dns) == "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:8001"
    assert endpoint_address_pin("inside.example.com:8001", resolver=dns) == "10.0.5.7:8001"
    assert endpoint_address_pin("10.0.5.9:8001", resolver=dns) == "10.0.5.9:8001"
    assert endpoint_address_pin("triton:8001", resolver=dns) is None  # listed by name: the client resolves it
    with pytest.raises(AddressRefused):
        endpoint_address_pin("[::127.0.0.1]:8001", resolver=dns)


class _Recorder:
    """A loopback port that answers HTTP/2 with an empty SETTINGS frame (so a gRPC client sends its request
    headers) and records the first bytes of the first connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        conn.settimeout(0.5)
        try:
            conn.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # SETTINGS, empty
            while len(self.received) < 8192:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                self.received += chunk
        except OSError:
            pass
        finally:
            conn.close()
            self.done.set()

    def close(self) -> bytes:
        self.done.wait(timeout=3)
        self.sock.close()
        return self.received


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_model_call_connects_to_the_approved_address_and_keeps_the_host(protocol):
    """The guard approved 127.0.0.1:PORT for "rebind.invalid:8001"; the name resolves nowhere now. The
    call reaches the approved address and still names the endpoint's host (HTTP Host, gRPC :authority)."""
    recorder = _Recorder()
    endpoint = EndpointSpec(
        "rebind.invalid:8001", protocol, "m", timeout_s=2, guard=lambda url: f"127.0.0.1:{recorder.port}"
    )
    result = generate(endpoint, "x", PARAMS)
    received = recorder.close()
    assert not result.ok  # not a Triton server: what matters is where the call went
    assert received, "the call did not reach the approved address"
    if protocol == "http":
        assert b"POST /v2/models/m/infer HTTP/1.1" in received
        assert b"\r\nHost: rebind.invalid:8001\r\n" in received
    else:
        assert received.startswith(b"PRI * HTTP/2.0")
        assert b":authority\x13rebind.invalid:8001" in received  # HPACK literal, length 19


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_the_readiness_check_connects_to_the_approved_address(protocol):
    recorder = _Recorder()
    endpoint = EndpointSpec(
        "rebind.invalid:8001", protocol, "m", timeout_s=2, guard=lambda url: f"127.0.0.1:{recorder.port}"
    )
    assert model_readiness(endpoint)  # not ready: not a Triton server
    received = recorder.close()
    assert b"rebind.invalid:8001" in received


def test_a_platform_endpoint_is_resolved_once_and_called_at_that_address(settings, monkeypatch):
    """DNS rebinding against a model endpoint: the name answers the operator's own network at the check
    and elsewhere at any later lookup. The call goes to the address the check approved."""
    recorder = _Recorder()
    lookups: list[str] = []

    def dns(host: str, port: int) -> list[str]:  # the DNS, the boundary an attacker controls
        lookups.append(host)
        return ["127.0.0.1"] if len(lookups) == 1 else ["10.66.66.66"]

    monkeypatch.setattr("core.outbound._resolve", dns)
    settings.ARENA_MODEL_HOSTS = ["127.0.0.0/8"]
    endpoint = ModelEndpoint(
        name="rebinder", url=f"rebind.invalid:{recorder.port}", protocol="http", model_name="m", timeout_s=2
    )
    result = generate(endpoint.spec(), "x", PARAMS)
    received = recorder.close()
    assert lookups == ["rebind.invalid"]
    assert not result.ok and "address refused" not in result.error
    assert f"Host: rebind.invalid:{recorder.port}".encode() in received
