"""Shared fixtures: a real GCS-API server (gcp-storage-emulator) on a free loopback port, and tiny specs."""

from __future__ import annotations

import http.server
import json
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from helpers import spec_data, write_spec

BUCKET = "attnbench-test"
READY_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def held_port() -> socket.socket:
    """A loopback port kept for as long as the socket is open: bound with SO_REUSEADDR and never listening, so a
    server of ours binds it beside (http.server and tornado set SO_REUSEADDR too), no bind(0) elsewhere is given it
    meanwhile, and a client meets a closed port while no server listens. free_port's number is free for anyone
    between its close and the server's bind."""
    held = socket.socket()
    held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    held.bind(("127.0.0.1", 0))
    return held


class Emulator:
    """gcp-storage-emulator as a subprocess with its data on disk, so a stop and a start keep the objects; its port
    is held from its first start to the end of the test, outages included, so its restart finds it free."""

    def __init__(self, data_dir: Path):
        self.held = held_port()
        self.data_dir, self.port = data_dir, self.held.getsockname()[1]
        self.host = f"http://127.0.0.1:{self.port}"
        self.log = data_dir / "emulator.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "gcp_storage_emulator", "-d", str(self.data_dir), "start",
                   "--host", "127.0.0.1", "--port", str(self.port), "--default-bucket", BUCKET, "-q"]
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the emulator exited ({self.process.returncode}): {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.host}/storage/v1/b/{BUCKET}", timeout=1):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.1)
        raise RuntimeError(f"the emulator did not answer on {self.host} within {READY_TIMEOUT_S}s")

    def stop(self) -> None:
        """SIGINT, its own clean stop: the request in hand finishes first. SIGTERM could cut the emulator's rewrite of
        its metadata file (.meta, truncated then written), and the next start failed on an empty file."""
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """SIGKILL, for the end of a test, whose objects are thrown away: the clean stop waits for the emulator, which
        serves one connection at a time, to see every client's keep-alive connection closed (10 s, then the kill)."""
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None

    def bucket(self):
        """The test bucket through google-cloud-storage, the client the runner uses."""
        from google.cloud import storage

        return storage.Client(client_options={"api_endpoint": self.host}).bucket(BUCKET)

    def text(self, name: str) -> str:
        """An object's text, '' when there is none."""
        blob = self.bucket().blob(name)
        return blob.download_as_text() if blob.exists() else ""

    def lines(self, name: str) -> list[str]:
        return [line for line in self.text(name).splitlines() if line.strip()]


@pytest.fixture
def emulator(tmp_path, monkeypatch):
    """A running emulator for one test; STORAGE_EMULATOR_HOST points this process's clients at it."""
    data_dir = tmp_path / "gcs"
    data_dir.mkdir()
    server = Emulator(data_dir)
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.host)
    yield server
    server.kill()
    server.held.close()


def shapes_spec(folder: Path, seq_lens: list[int]) -> Path:
    """naive and xla over these sequence lengths, causal and not: 4 cells each, well under a second apiece."""
    sweep = {"seq_len": seq_lens, "causal": [False, True]}
    experiment = {"name": "shapes", "variants": ["naive", "xla"], "sweep": sweep}
    return write_spec(folder / "shapes.yaml", spec_data(experiment))


@pytest.fixture
def tiny_spec(tmp_path) -> Path:
    """8 cells."""
    return shapes_spec(tmp_path, [8, 16])


@pytest.fixture(autouse=True)
def registry_as_it_was():
    """What a test registers (its own variant, or a file through $ATTNBENCH_VARIANTS, with its backend and module) is
    gone after it, so a later test's load_all() lists what a user's would; runner.variants' own stay (imported once,
    they would not register again)."""
    from runner import registry

    variants, backends, broken = set(registry.VARIANTS), set(registry.BACKENDS), dict(registry.BROKEN)
    modules = set(sys.modules)
    yield
    for name in set(registry.VARIANTS) - variants:
        if not registry.VARIANTS[name].build.__module__.startswith("runner.variants."):
            del registry.VARIANTS[name]
    used = {v.backend for v in registry.VARIANTS.values()}
    for backend in set(registry.BACKENDS) - backends - used:
        del registry.BACKENDS[backend]
    registry.BROKEN.clear()
    registry.BROKEN.update(broken)
    for module in [m for m in sys.modules if m.startswith("attnbench_variants_") and m not in modules]:
        del sys.modules[module]


@pytest.fixture(autouse=True)
def no_job_environment(monkeypatch, tmp_path_factory):
    """Tests choose run ids, shards and spools themselves, even when they run inside a Kubernetes Job, and keep
    their caches (spools, compiled programs) out of the user's: one cache folder for the whole session."""
    for name in ("ATTNBENCH_RUN_ID", "ATTNBENCH_SPOOL", "JOB_COMPLETION_INDEX", "JOB_COMPLETIONS", "ATTNBENCH_VARIANTS",
                 "ATTNBENCH_COMPILE_CACHE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))


REFUSALS = {
    403: ("forbidden", "Caller does not have the permission this call needs on the Google Cloud Storage bucket "
          "(or it may not exist)."),
    401: ("required", "Request is missing required authentication credential. Expected OAuth 2 access token."),
}


class Answering(http.server.BaseHTTPRequestHandler):
    """A test server's handler: logs nothing, and lets a client that left before its answer go quietly (a run killed
    while a request of its was held, as test_resume's SIGTERM at start-up is), where socketserver printed the broken
    pipe's traceback outside any test's captured output."""

    timeout = 60  # a client that sends nothing ends its thread, which the server's close() waits for

    def log_message(self, *args):
        pass

    def answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client is gone: no one to answer
            pass


class LoopbackServer(http.server.ThreadingHTTPServer):
    """An HTTP server on a free loopback port, serving from a thread of its own. An error a handler raised (other
    than a client gone, which Answering lets go) is kept, and close() fails the test with it."""

    daemon_threads = False  # so close() waits for each request's thread, whose error is then kept

    def __init__(self, handler: type[Answering]):
        super().__init__(("127.0.0.1", 0), handler)
        self.errors: list[str] = []
        self.address = f"127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request, client_address) -> None:
        self.errors.append(traceback.format_exc())

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        assert not self.errors, "a test server's handler raised:\n" + "\n".join(self.errors)


class Gate:
    """A forwarding proxy in front of the emulator that answers some requests itself with GCS's own refusals:
    what a principal without a permission, or a node whose metadata server is not ready yet, sees."""

    def __init__(self, emulator: Emulator):
        self.emulator, self.refuse = emulator, lambda method, path: None
        self.refused: list[str] = []
        gate = self

        class Handler(Answering):
            def _any(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = gate.refuse(self.command, self.path)
                if status is not None:
                    gate.refused.append(f"{self.command} {self.path}")
                    reason, message = REFUSALS[status]
                    payload = json.dumps({"error": {"code": status, "message": message,
                                                    "errors": [{"reason": reason, "message": message}]}})
                    return self.answer(status, {"Content-Type": "application/json"}, payload.encode())
                status, headers, data = gate.forward(self.command, self.path, dict(self.headers), body)
                self.answer(status, {key: value for key, value in headers.items() if key.lower() not in (
                    "transfer-encoding", "connection", "content-length", "server", "date")}, data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

        self.server = LoopbackServer(Handler)
        self.host = f"http://{self.server.address}"

    def forward(self, method: str, path: str, headers: dict, body: bytes) -> tuple[int, dict, bytes]:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.emulator.port, timeout=30)
        headers = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        data = response.read()
        connection.close()
        return response.status, dict(response.getheaders()), data

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def gate(emulator, monkeypatch):
    """The emulator behind a Gate; STORAGE_EMULATOR_HOST points this process's clients at the gate."""
    proxy = Gate(emulator)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.host)
    yield proxy
    proxy.close()


class MetadataServer:
    """A GCE metadata server on loopback, as google-auth pings it: GET / answered `Metadata-Flavor: Google`, after
    `delay_s` (a node's server that is there but slow). google-auth finds it through GCE_METADATA_IP / _HOST."""

    def __init__(self, delay_s: float):
        class Handler(Answering):
            def do_GET(self):
                time.sleep(delay_s)
                self.answer(200, {"Metadata-Flavor": "Google"}, b"")

        self.server = LoopbackServer(Handler)
        self.address = self.server.address

    def close(self) -> None:
        self.server.close()


def point_metadata_at(monkeypatch, address: str) -> None:
    for name in ("GCE_METADATA_IP", "GCE_METADATA_HOST"):
        monkeypatch.setenv(name, address)


@pytest.fixture
def metadata_server(monkeypatch):
    """A slow metadata server (0.5 s an answer) that google-auth's ping finds: this process is on a GKE node."""
    server = MetadataServer(0.5)
    point_metadata_at(monkeypatch, server.address)
    yield server
    server.close()


@pytest.fixture
def no_metadata_server(monkeypatch):
    """No metadata server answers (a closed loopback port, whatever network the machine has): off GKE, unless the
    machine's firmware says it is a GCE VM, where the test does not apply."""
    from google.auth.compute_engine import _metadata

    if _metadata.detect_gce_residency_linux():
        pytest.skip("this machine is a GCE VM: a metadata server serves it")
    with held_port() as closed:
        point_metadata_at(monkeypatch, f"127.0.0.1:{closed.getsockname()[1]}")
        yield
