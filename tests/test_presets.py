"""specs/models/: each model preset validates, cites its source, runs the config values it cites, and covers prefill
at 4k-32k, decode (one query token, KV 4k-128k), tp 1-8 and a padded batch at fill 0.5 and 0.8."""

from __future__ import annotations

import re

import pytest

from runner.cells import expand
from runner.registry import load_all
from runner.spec import load_spec
from helpers import REPO

PRESETS = sorted((REPO / "specs" / "models").glob("*.yaml"))
MODELS = {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mistral-7b", "gemma2-9b", "gemma2-27b", "gemma3-27b",
          "qwen3-8b", "qwen3-32b", "gpt-oss-120b", "deepseek-v3"}


def test_every_model_the_issue_names_has_a_preset():
    assert MODELS <= {p.stem for p in PRESETS}


@pytest.fixture(scope="module", params=PRESETS, ids=lambda p: p.stem)
def preset(request):
    return request.param, load_spec(request.param, set(load_all()))


def test_a_preset_cites_its_source_and_runs_the_values_it_cites(preset):
    path, spec = preset
    assert re.search(r"Source: https://huggingface\.co/\S+/config\.json", spec.description)
    assert "# Source: https://huggingface.co/" in path.read_text()
    cited = {key: int(value) for key, value in re.findall(r"(\w+) (\d+)", spec.description.split("Source:")[0])}
    d = spec.defaults
    assert (cited["num_attention_heads"], cited["num_key_value_heads"], cited["head_dim"]) == (
        d.heads, d.kv_heads, d.head_dim)
    assert cited.get("v_head_dim", d.head_dim) == (d.v_head_dim or d.head_dim)


def test_a_preset_covers_prefill_decode_tp_and_padding(preset):
    _, spec = preset
    cells = expand(spec)
    prefill = {c.params.seq_len for c in cells if c.params.seq_len > 1}
    decode = {c.params.kv_seq_len for c in cells if c.params.seq_len == 1}
    assert {4096, 8192, 16384, 32768} <= prefill
    assert {4096, 16384, 65536, 131072} <= decode
    assert {c.params.tp for c in cells} == {1, 2, 4, 8}
    assert {0.5, 0.8} <= {c.params.fill for c in cells if c.params.seq_len > 1}
    assert {0.5, 0.8} <= {c.params.fill for c in cells if c.params.seq_len == 1}
