"""runner/report.py: the tables `attnbench show` prints."""

from __future__ import annotations

from rich.console import Console

from runner.report import print_tables
from stores import H200_LONG, shipped


def test_a_cells_note_prints_as_text_not_markup():
    cell = shipped(H200_LONG).cells[0].model_copy(update=dict(
        status="skipped", correctness=None, reason="needs tokamax: pip install 'attnbench[tokamax]' [clock moved 9%]"))
    console = Console(record=True, width=400)
    print_tables([cell], console)
    assert "pip install 'attnbench[tokamax]' [clock moved 9%]" in console.export_text()
