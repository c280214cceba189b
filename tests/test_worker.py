"""runner/worker.py: the worker's side of the pipe: it greets, answers each job with its record's line, starts the
cell it is told comes next and hands that to the next job, and sends no record when its libraries failed."""

from __future__ import annotations

from multiprocessing import Pipe

from helpers import params
from runner import worker
from runner.cells import Cell
from runner.machine import current_device
from runner.worker import Hello, Job, serve
from test_results import record


class FakeMeasurer:
    """Records what the worker asks of it; its records are made up."""

    def __init__(self):
        self.asked: list[tuple] = []

    def begin(self, cell: Cell) -> str:
        return f"begun {cell.key}"

    def measure(self, cell: Cell, ahead, begun, attempts):
        self.asked.append((cell.key, begun, attempts))
        return record("xla", params=cell.params)


def run_worker(monkeypatch, measurer, jobs: list[Job]) -> list:
    """Serve the jobs, then stop; what the worker sent back."""
    hello = Hello("jax", {}, current_device(), error=None if measurer else "libraries failed: ImportError: te")
    monkeypatch.setattr(worker, "hello", lambda start: (hello, measurer))
    inbox, to_worker = Pipe(duplex=False)  # (reader, writer)
    from_worker, outbox = Pipe(duplex=False)
    for message in [("start", None), *(("measure", job) for job in jobs), ("stop", None)]:
        to_worker.send(message)
    serve(inbox, outbox)
    sent = []
    while from_worker.poll():
        sent.append(from_worker.recv())
    return sent


def test_each_job_gets_its_records_line_and_the_next_cell_is_begun_for_it(monkeypatch):
    measurer = FakeMeasurer()
    first, second = Cell("e", "xla", params(seq_len=8)), Cell("e", "xla", params(seq_len=16))
    sent = run_worker(monkeypatch, measurer, [Job(first, upcoming=second), Job(second, attempts=2)])
    assert [verb for verb, _ in sent] == ["ready", "record", "record"]
    assert measurer.asked == [(first.key, None, 1), (second.key, f"begun {second.key}", 2)]
    assert all(isinstance(line, str) and line.startswith("{") for _, line in sent[1:])


def test_a_worker_whose_libraries_failed_sends_no_record_and_ends_when_asked_for_one(monkeypatch):
    sent = run_worker(monkeypatch, None, [Job(Cell("e", "te", params()))])
    assert [verb for verb, _ in sent] == ["ready"] and sent[0][1].error.startswith("libraries failed")
