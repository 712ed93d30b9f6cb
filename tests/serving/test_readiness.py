"""``model_readiness`` answers in fixed words: what a server at a manager-typed address sends back is
never echoed (the console must not become a probe of the network)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from serving.triton.client import EndpointSpec, Protocol, model_readiness

SECRET = "internal-admin-token-42"


class _Chatty(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = f"<html>{SECRET}</html>".encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def chatty_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chatty)
    # Polled every 20 ms for the shutdown (serve_forever waits up to 0.5 s by default).
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_a_server_that_is_not_triton_is_reported_without_its_answer(chatty_server: str, protocol: str) -> None:
    problem = model_readiness(
        EndpointSpec(
            url=chatty_server,
            protocol=protocol,  # type: ignore[arg-type]
            model_name="zen-bigram",
            timeout_s=2.0,
        )
    )
    assert problem and SECRET not in problem
    assert problem.startswith(f"zen-bigram at {protocol}://{chatty_server}: ")


def test_nothing_listening_is_unreachable() -> None:
    problem = model_readiness(EndpointSpec(url="127.0.0.1:1", protocol="http", model_name="m", timeout_s=2.0))
    assert problem.endswith("server unreachable")


@pytest.mark.triton
def test_a_served_model_is_ready_and_an_absent_one_is_not(triton_server) -> None:  # type: ignore[no-untyped-def]
    pairs: tuple[tuple[str, Protocol], ...] = ((triton_server.grpc_url, "grpc"), (triton_server.http_url, "http"))
    for url, protocol in pairs:
        assert model_readiness(EndpointSpec(url=url, protocol=protocol, model_name="zen-bigram")) == ""
        assert "not ready" in model_readiness(EndpointSpec(url=url, protocol=protocol, model_name="no-such-model"))
