"""scripts/replay_energy.py: a file that is not a probe's output is one line naming it and what it lacks."""

import json
import sys

import pytest
from helpers import script


@pytest.mark.parametrize("probe, missing", [({"probes": [{}]}, "'nvml'"), ({"nvml": [], "probes": [{}]}, "'nvml'"),
                                            ({"nvml": [[0, 0, 0, 0, 0, 0]]}, "'probes'"), ([], "'nvml' and no 'probes'")])
def test_a_json_without_the_probes_rows_is_one_line_naming_the_file_and_what_it_lacks(tmp_path, monkeypatch, capsys,
                                                                                      probe, missing):
    path = tmp_path / "probe.json"
    path.write_text(json.dumps(probe))
    monkeypatch.setattr(sys, "argv", ["replay_energy.py", str(path)])
    with pytest.raises(SystemExit) as exit:
        script("scripts/replay_energy.py").main()
    out, err = capsys.readouterr()
    assert exit.value.code == 2 and out == ""
    assert len(err.splitlines()) == 1 and str(path) in err and f"no {missing} rows" in err
