"""The memory rule (runner.memory.too_large) held to the committed runs: no cell a GPU measured is one the rule would
have skipped at that GPU's memory, and each cell that ran out of memory with its (B, N, T, S) scores is one it skips.
A later change of the rule (a variant's score_bytes, kv_copy, needed_bytes) that would skip a cell the H200 ran fails
here, and so does a variant's bytes a score that leaves the records' for any (variant, dtype, pass) they measured, or
its copies of K and V that leave what its decode cells keep."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from helpers import H200_MEMORY, REPO
from runner.memory import scores, scores_bytes, too_large
from runner.record import CellRecord, gpu_name
from runner.registry import VARIANTS, load_all
from runner.store import read_run

load_all()

RUNS = sorted(path.parent for folder in ("examples/results", "tests/fixtures")
              for path in (REPO / folder).rglob("cells.jsonl"))
SAID = re.compile(r"the device has ([\d.]+) GiB")
ROUNDING = 0.05  # size_text's GiB to one decimal: the bytes said lie within half a tenth of it
DECODE = 8  # at T <= 8 the copies of K and V (Variant.kv_copy) are memory the scores do not describe
UNDER_THE_MOST = 1.05  # bytes a score may sit this far under the most a record keeps: xla's forward 6 where
# mistral-7b's smallest windowed cells keep 6.25, and the tightest cell that ran fits up to 6.23


def measured() -> list[tuple[str, CellRecord]]:
    """(the GPU's name, a record) of every committed run on a GPU."""
    runs = [read_run(path) for path in RUNS]
    return [(gpu_name(run.manifest), cell) for run in runs
            if run.manifest and run.manifest.machine.platform == "gpu" for cell in run.cells]


def device_bytes(cells: list[tuple[str, CellRecord]]) -> dict[str, int]:
    """Each GPU's memory as JAX gave it to a worker (what the rule reads): the least that any of its runs' skip lines
    says ("the device has 104.9 GiB"), at the low edge of its rounding, so a cell judged to fit fits the true bytes."""
    said: dict[str, float] = {}
    for gpu, cell in cells:
        for found in SAID.findall(cell.reason or ""):
            said[gpu] = min(said.get(gpu, float("inf")), float(found))
    return {gpu: int((gib - ROUNDING) * 2**30) for gpu, gib in said.items()}


CELLS = measured()
MEMORY = device_bytes(CELLS)


def judged(statuses: tuple[str, ...]) -> list[tuple[CellRecord, str | None]]:
    """(record, the rule's reason at its GPU's memory) of each cell of these statuses, on a GPU whose memory a run
    says, of a variant registered today."""
    return [(cell, too_large(cell.params, MEMORY[gpu], VARIANTS[cell.variant])) for gpu, cell in CELLS
            if gpu in MEMORY and cell.status in statuses and cell.variant in VARIANTS]


def test_the_committed_runs_say_the_h200s_memory():
    assert MEMORY["NVIDIA H200"] == H200_MEMORY


def test_no_cell_a_gpu_ran_is_one_the_memory_rule_would_skip():
    ran = judged(("ok", "incorrect"))
    assert len(ran) > 3000 and sum(bool(VARIANTS[c.variant].requires.score_bytes) for c, _ in ran) > 1000
    assert [(c.run_id, c.variant, c.params.label(), why) for c, why in ran if why] == []


def test_each_cell_that_ran_out_of_memory_is_one_the_rule_skips_for_its_scores():
    """All of them, of every variant, 31 xla and 4 naive in the H200's runs: XLA's forward at 64 GiB of bf16 scores
    and more (6 bytes a score: 192 GiB), naive's at 64 GiB (4 bytes a score: 128 GiB, what its RESOURCE_EXHAUSTED line
    asked for). None is a decode cell (T <= DECODE)."""
    ran_out = judged(("oom",))
    assert len(ran_out) >= 35
    assert [(c.run_id, c.variant, c.params.label()) for c, why in ran_out if not why] == []
    assert all(re.fullmatch(rf"{c.variant}'s \(B, N, T, S\) scores need [\d.]+ GiB beside the inputs and float32 "
                            r"reference's [\d.]+ GiB; the device has [\d.]+ GiB", why) for c, why in ran_out)


def kept_per_score() -> dict[tuple[str, str, str], list[float]]:
    """(variant, dtype, pass) -> temp_bytes over the cell's scores (memory.scores), of each cell of T > DECODE that ran
    with its temp_bytes, of a variant that declares score_bytes."""
    kept = defaultdict(list)
    for _, cell in CELLS:
        p, variant = cell.params, VARIANTS.get(cell.variant)
        if cell.status in ("ok", "incorrect") and cell.temp_bytes and p.seq_len > DECODE and variant and \
                variant.requires.score_bytes:
            kept[(cell.variant, p.dtype, p.pass_)].append(cell.temp_bytes / scores(p))
    return kept


def test_each_variant_dtype_and_pass_the_records_measured_is_counted_at_the_most_they_keep_or_just_under():
    """Not over the most (a cell that fits would be skipped: float16's backward keeps 8, not bfloat16's 10), nor more
    than UNDER_THE_MOST under it (a cell that cannot fit would run to oom: float32 keeps 8, not bfloat16's 6)."""
    kept = kept_per_score()
    assert set(kept) == {(v, d, "fwd") for v in ("auto", "naive", "xla") for d in ("bfloat16", "float16", "float32")} \
        | {(v, d, "fwd_bwd") for v in ("naive", "xla") for d in ("bfloat16", "float16")}  # none of float32's backward
    counted = {key: VARIANTS[key[0]].requires.score_bytes[key[2]][key[1]] for key in kept}
    assert {key: n for key, n in counted.items() if not max(kept[key]) / UNDER_THE_MOST <= n <= max(kept[key])} == {}


def kept_per_counted() -> dict[str, list[float]]:
    """variant -> temp_bytes over what the rule counts beside the inputs (its scores_bytes and its kv_copy's bytes), of
    each decode cell (T <= DECODE) that ran with its temp_bytes, of a variant that declares its copies."""
    kept = defaultdict(list)
    for _, cell in CELLS:
        p, variant = cell.params, VARIANTS.get(cell.variant)
        if cell.status in ("ok", "incorrect") and cell.temp_bytes and p.seq_len <= DECODE and variant and \
                variant.kv_copy:
            kept[cell.variant].append(cell.temp_bytes / (scores_bytes(p, variant) + variant.kv_copy.bytes(p)))
    return kept


def test_each_decode_cell_keeps_no_more_than_its_scores_and_copies_and_the_most_keeps_about_that():
    """At T = 1 (none of T 2-8 ran) XLA lays one of K and V out again for its dot (its copy is a byte a K or V element
    in bfloat16, its dtype's width over two), and naive repeats the other to its query heads: no cell keeps more than
    the rule counts (a copy left uncounted lets a larger decode through to oom) and the most is not UNDER_THE_MOST
    under it (naive counting both repeated would skip cells that fit: 4 bytes an element where GQA's 2 groups keep 3)."""
    kept = kept_per_counted()
    assert {variant: len(ratios) for variant, ratios in kept.items()} == {"xla": 271, "naive": 84}
    assert {variant: max(ratios) for variant, ratios in kept.items()
            if not 1 / UNDER_THE_MOST <= max(ratios) <= 1} == {}


@pytest.mark.parametrize("line, gib", [("inputs and float32 reference need 129.5 GiB; the device has 104.9 GiB", 104.9),
                                       ("xla's ... the device has 16.8 GiB", 16.8)])
def test_a_devices_memory_is_read_from_a_skip_line(line, gib):
    assert device_bytes([("g", CellRecord.model_construct(reason=line))]) == {"g": int((gib - ROUNDING) * 2**30)}


def test_the_pass_and_dtype_no_record_measured_is_counted_at_one_guess_above_every_figure_they_measured():
    """Float32 with the backward (docs/benchmarks.md: no run measured it; an oom measures nothing and costs its
    compile, a wrong skip says its sizes, so the larger guess) counts one figure in every variant that declares its
    bytes a score, above the most any (variant, dtype, pass) the records measured keeps."""
    kept = kept_per_score()
    guesses = {name: v.requires.score_bytes["fwd_bwd"]["float32"] for name, v in VARIANTS.items()
               if "float32" in v.requires.score_bytes.get("fwd_bwd", {})}
    assert not [key for key in kept if key[1:] == ("float32", "fwd_bwd")] and {"xla", "naive"} <= set(guesses)
    assert len(set(guesses.values())) == 1 and min(guesses.values()) > max(max(values) for values in kept.values())
