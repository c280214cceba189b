"""scripts/replay_energy.py: a file that is not a probe's output, or does not read, is one line naming it and what it
lacks."""

import json
import sys

import pytest
from helpers import script


def refused(path, monkeypatch, capsys) -> str:
    """What main() says of `path`, having exited 2 and printed nothing."""
    monkeypatch.setattr(sys, "argv", ["replay_energy.py", str(path)])
    with pytest.raises(SystemExit) as exit:
        script("scripts/replay_energy.py").main()
    out, err = capsys.readouterr()
    assert exit.value.code == 2 and out == ""
    return err


@pytest.mark.parametrize("probe, missing", [({"probes": [{}]}, "'nvml'"), ({"nvml": [], "probes": [{}]}, "'nvml'"),
                                            ({"nvml": [[0, 0, 0, 0, 0, 0]]}, "'probes'"), ([], "'nvml' and no 'probes'")])
def test_a_json_without_the_probes_rows_is_one_line_naming_the_file_and_what_it_lacks(tmp_path, monkeypatch, capsys,
                                                                                      probe, missing):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(probe))
    err = refused(path, monkeypatch, capsys)
    assert len(err.splitlines()) == 1 and str(path) in err and f"no {missing} rows" in err


STREAM = {"T": 8192, "stream": {"t0": 1.0, "chunk_done": [0.05, 0.1]}}


@pytest.mark.parametrize("probe, said", [
    ({"nvml": [[0, 0, 0]], "probes": [STREAM]}, "has an 'nvml' row that is not 6 numbers"),
    ({"nvml": [[0, 0, 0, 0, 0, None]], "probes": [STREAM]}, "has an 'nvml' row that is not 6 numbers"),
    ({"nvml": 5, "probes": [STREAM]}, "has an 'nvml' row that is not 6 numbers"),
    ({"nvml": [[0] * 6], "probes": [{"T": 8192}]}, "has a 'probes' entry without its T and a stream"),
    ({"nvml": [[0] * 6], "probes": [{**STREAM, "stream": {"t0": 1.0, "chunk_done": []}}]}, "has a 'probes' entry"),
    ({"nvml": [[0] * 6], "probes": [{"stream": STREAM["stream"]}]}, "has a 'probes' entry"),
    ({"nvml": [[0] * 6], "probes": [STREAM, "T=8192"]}, "has a 'probes' entry"),
])  # fmt: skip
def test_rows_or_streams_not_of_a_probes_shape_are_one_line_not_a_traceback(tmp_path, monkeypatch, capsys, probe, said):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(probe))
    err = refused(path, monkeypatch, capsys)
    assert err.startswith(f"replay_energy.py: {path} {said}") and len(err.splitlines()) == 1
    assert err.endswith(": not a scripts/probe_stream.py output\n")


@pytest.mark.parametrize("content, said", [(None, "No such file"), ("{", "Expecting property name"),
                                           (b"\xff", "can't decode byte 0xff")])
def test_a_file_that_does_not_read_is_one_line_naming_it(tmp_path, monkeypatch, capsys, content, said):
    path = tmp_path / "probe.json"
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    err = refused(path, monkeypatch, capsys)
    assert err.startswith(f"replay_energy.py: cannot read {path}: ") and said in err and len(err.splitlines()) == 1
