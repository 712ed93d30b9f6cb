"""An in-process fake of a Triton server's HTTP inference endpoint (KServe v2: ``POST
/v2/models/<model>[/versions/<v>]/infer``), for tests that need the real client on the wire and a
server that fails on cue: it parses the request tritonclient sends (a JSON header, then the binary
tensors), answers ``text_output`` with ``answer(prompt)`` as JSON, or a Triton error (HTTP 400 with
``{"error": ...}``) when ``fail(call_number, prompt)`` returns a message."""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[str], str]
Fail = Callable[[int, str], str | None]


def _text_input(body: bytes, header_length: int | None) -> str:
    header = json.loads(body[:header_length] if header_length is not None else body)
    offset = header_length or 0
    for tensor in header["inputs"]:
        size = tensor.get("parameters", {}).get("binary_data_size")
        if tensor["name"] == "text_input":
            if size is None:
                return str(tensor["data"][0])
            (length,) = struct.unpack("<I", body[offset : offset + 4])
            return body[offset + 4 : offset + 4 + length].decode("utf-8")
        offset += size or 0
    raise ValueError("no text_input")


class FakeTriton:
    def __init__(self, answer: Answer, fail: Fail | None = None) -> None:
        self.answer = answer
        self.fail = fail or (lambda _n, _p: None)
        self.requests = 0
        self.failed = 0
        self._lock = threading.Lock()

    def handle(self, body: bytes, header_length: int | None) -> tuple[int, dict[str, Any]]:
        prompt = _text_input(body, header_length)
        with self._lock:
            self.requests += 1
            number = self.requests
        message = self.fail(number, prompt)
        if message is not None:
            with self._lock:
                self.failed += 1
            return 400, {"error": message}
        text = self.answer(prompt)
        return 200, {
            "model_name": "fake",
            "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [1], "data": [text]}],
        }


@contextmanager
def fake_triton(answer: Answer, fail: Fail | None = None) -> Iterator[tuple[str, FakeTriton]]:
    """Serve a FakeTriton on 127.0.0.1 (a free port); yields ``("127.0.0.1:<port>", the fake)``."""
    fake = FakeTriton(answer, fail)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            raw = self.headers.get("Inference-Header-Content-Length")
            if not self.path.endswith("/infer"):
                status, payload = 404, {"error": "not found"}
            else:
                status, payload = fake.handle(body, int(raw) if raw is not None else None)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", fake
    finally:
        server.shutdown()
        server.server_close()
