"""conftest.py's test servers (the Gate, the metadata server): a client that leaves before its answer is let go
quietly; any other error of a handler fails the test that served it."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from conftest import Answering, LoopbackServer


def served(fail: bool) -> LoopbackServer:
    """A server whose one request, sent by a client that then resets its connection, is answered once the client is
    gone; `fail`: its handler raises instead."""
    asked, gone = threading.Event(), threading.Event()

    class Handler(Answering):
        def do_GET(self):
            asked.set()
            gone.wait(10)
            if fail:
                raise ValueError("a handler's own error")
            self.answer(200, {}, b"x" * 65536)

    server = LoopbackServer(Handler)
    host, port = server.server_address
    with socket.create_connection((host, port)) as client:
        client.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert asked.wait(10), "the server never read the request"
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends a reset
    gone.set()
    return server


def test_a_client_gone_before_its_answer_is_let_go_quietly(capfd):
    """test_resume's run killed at start-up while the Gate held its request: the answer met a broken pipe, whose
    traceback socketserver printed outside every test's captured output."""
    served(fail=False).close()
    assert capfd.readouterr().err == ""


def test_a_handlers_own_error_fails_the_test_that_served_it(capfd):
    server = served(fail=True)
    with pytest.raises(AssertionError, match="ValueError: a handler's own error"):
        server.close()
    assert capfd.readouterr().err == ""
