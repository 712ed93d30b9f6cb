"""A real HTTP receiver for webhook tests: a server on 127.0.0.1 in a thread that checks each request's
signature with the secret it is given, as a customer's receiver would (docs/api/webhooks.md)."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from raters.webhook_signing import SignatureInvalid, verify_signature

# A test-only CA and a certificate it signed for ``receiver.invalid`` (valid for a century; the key is
# public and protects nothing).
TLS_DIR = Path(__file__).parent / "webhook_tls"
TLS_CA = TLS_DIR / "ca.pem"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    verified: bool
    refusal: str


@dataclass
class Receiver:
    port: int = 0
    secret: str = ""
    # Statuses to answer, in order; once used up, 200.
    statuses: list[int] = field(default_factory=list)
    answer: bytes = b"ok"
    extra_headers: dict[str, str] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    scheme: str = "http"
    # Seconds to wait before answering (a slow receiver; a sender killed while it waits).
    delay_s: float = 0.0
    # Requests being answered now, and the most there ever were at once.
    in_flight: int = 0
    most_in_flight: int = 0

    def url(self, path: str = "/hooks/arena", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


@contextmanager
def receiver_running(*, tls: bool = False) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1; with ``tls``, over HTTPS with the certificate for ``receiver.invalid``."""
    receiver = Receiver(scheme="https" if tls else "http")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            verified, refusal = False, ""
            try:
                verify_signature(receiver.secret, body, self.headers.get("X-Arena-Signature", ""), 300)
                verified = True
            except SignatureInvalid as exc:
                refusal = str(exc)
            receiver.requests.append(Received(self.path, dict(self.headers.items()), body, verified, refusal))
            with lock:
                receiver.in_flight += 1
                receiver.most_in_flight = max(receiver.most_in_flight, receiver.in_flight)
            try:
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
            finally:
                with lock:
                    receiver.in_flight -= 1
            status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            for name, value in receiver.extra_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(receiver.answer)))
            self.end_headers()
            self.wfile.write(receiver.answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(TLS_DIR / "leaf.pem", TLS_DIR / "leaf.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
    receiver.port = server.server_address[1]
    # Polled every 20 ms for the shutdown, not every 0.5 s (serve_forever's default): each test that used
    # a receiver waited up to half a second for it to stop.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
