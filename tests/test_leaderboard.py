"""runner/leaderboard.py on real records (the shipped H200 run, copied) and on made-up times."""

from __future__ import annotations

import pytest

from runner import leaderboard
from runner.leaderboard import Time, rank
from runner.report import leaderboard_markdown
from stores import CPU_LAB5, H200_LAB5, H200_LONG, broken, device_timing, shipped


def times(*entries: tuple[str, float], shape: str = "B1 T8", noise: float = 0.01) -> list[Time]:
    return [Time("run", shape, variant, seconds, noise) for variant, seconds in entries]


def test_the_fastest_wins_with_its_margins_over_the_next_and_over_auto():
    (board,) = rank(times(("xla", 2.0), ("cudnn", 1.0), ("auto", 2.5), ("naive", 4.0)))
    assert board.winner.variant == "cudnn" and board.runner_up.variant == "xla"
    assert board.margin == pytest.approx(1.0) and board.over_auto == pytest.approx(1.5)
    assert board.variants == 4 and board.decisive


def test_auto_winning_is_a_margin_of_zero_and_a_shape_without_auto_has_none():
    auto_wins, no_auto = rank([*times(("auto", 1.0), ("xla", 1.1)), *times(("xla", 1.0), shape="B2 T8")])
    assert auto_wins.over_auto == 0.0
    assert no_auto.over_auto is None and no_auto.runner_up is None and no_auto.margin is None
    assert not no_auto.decisive  # nothing to beat


def test_a_margin_inside_either_variants_noise_is_not_decisive():
    (close,) = rank(times(("xla", 1.00), ("cudnn", 1.03), noise=0.05))
    (clear,) = rank(times(("xla", 1.00), ("cudnn", 1.10), noise=0.05))
    assert not close.decisive and clear.decisive
    assert "(within noise)" in leaderboard.rows([close])[0]["margin"]


def test_a_margin_inside_the_noise_of_one_variant_alone_is_not_decisive():
    noisy, steady = 0.2, 0.01
    for winner, runner_up in ((noisy, steady), (steady, noisy)):
        (board,) = rank([Time("run", "T8", "xla", 1.0, winner), Time("run", "T8", "cudnn", 1.1, runner_up)])
        assert not board.decisive, (winner, runner_up)


def test_a_margin_beside_a_noise_not_known_is_never_decisive_and_says_so():
    """A noise not recorded (NaN) reads as unknown, not as a perfectly quiet time: 50 % clear of a known noise is
    decisive, beside an unknown one it is not."""
    unknown = float("nan")
    for winner, runner_up in ((unknown, 0.01), (0.01, unknown)):
        (board,) = rank([Time("run", "T8", "xla", 1.0, winner), Time("run", "T8", "cudnn", 1.5, runner_up)])
        assert not board.decisive and leaderboard.rows([board])[0]["margin"] == "+50% (noise unknown)"
    (known,) = rank(times(("xla", 1.0), ("cudnn", 1.5)))
    assert known.decisive and leaderboard.rows([known])[0]["margin"] == "+50%"


def test_a_boards_key_line_says_what_each_mark_it_shows_means_and_only_those():
    """One line under the board, from one owner (runner.leaderboard.marks_key): a board with no mark has none; FP8
    alone is explained alone; unsettled and a noise not known where they show."""
    plain = rank(times(("xla", 1.0), ("cudnn", 1.5)))
    assert leaderboard.marks_key(plain) == "" and leaderboard.notes(plain, {}) == []
    assert leaderboard_markdown(plain).count("\n\n") == 0
    fp8 = rank([Time("run", "T8", "cudnn_fp8", 1.0, 0.01, fp8_mark="FP8"), Time("run", "T8", "cudnn", 1.5, 0.01)])
    said = leaderboard.marks_key(fp8)
    assert said.startswith("Marks: (FP8) computes in FP8") and "unsettled" not in said and "noise" not in said
    assert leaderboard_markdown(fp8).endswith("\n\n" + said)
    rough = rank([Time("run", "T8", "xla", 1.0, 0.01, unsettled=True), Time("run", "T8", "cudnn", 1.5, float("nan"))])
    assert "(unsettled) sampled before its power state settled or on an SM clock that moved more than 2 %" in (
        leaderboard.marks_key(rough))
    assert "noise unknown" not in leaderboard.marks_key(rough)  # the margin says unsettled, not noise unknown
    quiet = rank([Time("run", "T8", "xla", 1.0, 0.01), Time("run", "T8", "cudnn", 1.5, float("nan"))])
    assert leaderboard.marks_key(quiet) == ("Marks: (noise unknown) a noise (IQR / median) not recorded: the margin "
                                            "is never decisive.")


def test_a_margin_under_half_a_percent_reads_as_none_and_a_lone_winner_has_no_noise_note():
    (tiny,) = rank(times(("xla", 1.0), ("cudnn", 1.001), noise=0.0))
    (alone,) = rank(times(("xla", 1.0)))
    assert tiny.decisive and [r["margin"] for r in leaderboard.rows([tiny, alone])] == ["±0%", "—"]
    for runner_up, said in ((1.004, "±0%"), (1.006, "+1%")):  # the edge: what rounds to 0 %, and what to 1 %
        (board,) = rank(times(("xla", 1.0), ("cudnn", runner_up), noise=0.0))
        assert leaderboard.rows([board])[0]["margin"] == said, runner_up
    assert leaderboard._percent(0.005) == "±0%"  # half a percent rounds to even, 0 %: never +0%
    assert leaderboard.rows(rank(times(("xla", 0.00123))))[0]["ms"] == "1.23"  # the winner's median, in ms


def test_a_variant_timed_twice_at_a_shape_counts_with_its_faster_time():
    (board,) = rank(times(("xla", 3.0), ("xla", 1.0), ("cudnn", 2.0)))
    assert board.winner.variant == "xla" and board.winner.seconds == 1.0 and board.variants == 2


def test_shapes_and_runs_are_ranked_apart_in_the_order_they_come():
    entries = [Time("a", "T8", "xla", 1.0, 0.0), Time("b", "T8", "xla", 2.0, 0.0), Time("a", "T16", "xla", 3.0, 0.0)]
    assert [(s.run_id, s.shape) for s in rank(entries)] == [("a", "T8"), ("b", "T8"), ("a", "T16")]


def test_only_correct_cells_compete():
    cells = {c.variant: c for c in shipped(H200_LAB5).cells if c.experiment == "fp8" and not c.params.causal}
    assert cells["cudnn_fp8"].status == "incorrect"  # cuDNN 9.14: out relative error 12.4
    cells["cudnn_fp8"] = cells["cudnn_fp8"].model_copy(update={"timings": [device_timing(1e-9)]})  # fast, wrong
    cells["te"] = broken(cells["te"], "crashed", "worker exited with SIGSEGV")
    (board,) = leaderboard.leaderboard(cells.values(), timer="device")
    assert {board.winner.variant, board.runner_up.variant} == {"cudnn", "te_fp8"} and board.variants == 2


def test_the_shipped_hopper_run_by_its_headline_timer():
    run = shipped(H200_LONG)
    board = leaderboard.leaderboard(run.cells)
    assert len(board) == 8  # fwd and fwd_bwd at four lengths
    fwd_32k = next(s for s in board if s.shape == "B1 T32768 N64 K8 H128 bfloat16 causal fwd")
    assert fwd_32k.winner.variant == "cudnn_fp8" and fwd_32k.auto is None
    recorded = {c.variant: c.median_s for c in run.cells if c.params.seq_len == 32768 and c.params.pass_ == "fwd"}
    assert fwd_32k.winner.seconds == recorded["cudnn_fp8"]
    assert fwd_32k.margin == pytest.approx(min(recorded["cudnn"], recorded["te"]) / recorded["cudnn_fp8"] - 1)


def test_auto_names_the_backend_jax_picked():
    board = leaderboard.leaderboard(shipped(H200_LAB5).cells, timer="device")
    default = next(s for s in board if s.shape == "B4 T128 N8 H64 bfloat16 fwd")
    assert default.auto.backend == "xla" and default.over_auto > 0  # auto compiled to XLA; cudnn is faster
    assert leaderboard.rows([default])[0]["auto"].endswith("(xla)")


def test_markdown_has_a_row_per_shape():
    board = leaderboard.leaderboard(shipped(H200_LONG).cells)
    lines = leaderboard_markdown(board).splitlines()
    assert lines[0] == "| shape | fastest | ms | next | margin | auto | variants | fastest non-FP8 |"
    assert len(lines) == 2 + len(board) + 2  # a blank line, then what its (FP8) marks mean
    assert lines[-1] == leaderboard.marks_key(board) and lines[-1].startswith("Marks: (FP8) ")
    assert leaderboard_markdown([]) == ""


def test_the_module_stays_light():
    import subprocess
    import sys

    code = "import sys, runner.leaderboard; print(any(m in sys.modules for m in ('jax', 'pandas', 'numpy')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_legacy_variant_is_named_so_with_its_deprecation_under_the_board():
    boards = rank(times(("pallas_triton", 1.0), ("cudnn", 2.0)))
    legacy = {"pallas_triton": "deprecated in jax 0.11; tokamax replaces it", "pallas_mgpu": "the same"}
    (row,) = leaderboard.rows(boards, legacy)
    assert (row["fastest"], row["next"]) == ("pallas_triton (legacy)", "cudnn")
    assert leaderboard.legacy_notes(boards, legacy) == [
        "pallas_triton (legacy): deprecated in jax 0.11; tokamax replaces it"]  # pallas_mgpu is not on the board
    assert leaderboard_markdown(boards, legacy).endswith("\n\npallas_triton (legacy): deprecated in jax 0.11; "
                                                         "tokamax replaces it")
    assert leaderboard.rows(boards)[0]["fastest"] == "pallas_triton"  # no manifest says so: no label


def test_a_legacy_runner_up_is_noted_under_the_board_too():
    boards = rank(times(("cudnn", 1.0), ("pallas_triton", 2.0)))
    legacy = {"pallas_triton": "deprecated in jax 0.11; tokamax replaces it"}
    assert leaderboard.legacy_notes(boards, legacy) == [
        "pallas_triton (legacy): deprecated in jax 0.11; tokamax replaces it"]


def test_legacy_is_what_the_runs_manifests_say():
    from runner.registry import VARIANTS, load_all

    load_all()
    old = shipped(H200_LONG).manifest
    assert leaderboard.legacy_of([old, None]) == {}  # runs before the label say nothing of it
    today = old.model_copy(update={"variants": {**old.variants, "pallas_triton": VARIANTS["pallas_triton"].info()}})
    assert leaderboard.legacy_of([today]) == {"pallas_triton": VARIANTS["pallas_triton"].legacy}


def test_each_winner_carries_its_share_of_the_mma_peak_at_its_own_clock(capsys):
    """With the run's manifest (its machine), the board gives the winner's TFLOP/s (by the timer ranked) over the GPU's
    MMA rate at the SM clock NVML read while that cell ran, the figure `show`'s cell tables give it
    (runner.metrics.clock_peak); without the manifest there is no such column."""
    from helpers import REPO, in_process
    from runner import metrics
    from runner.store import read_run

    folder = REPO / "examples" / "results" / "h200" / "hopper-long-burst-20261202"  # with NVML telemetry
    run = read_run(folder)
    board = leaderboard.leaderboard(run.cells, manifest=run.manifest)
    cells = {(c.variant, c.params.label()): c for c in run.cells}
    for standing in board:
        cell = cells[standing.winner.variant, standing.shape]
        assert standing.winner.clock_peak == pytest.approx(metrics.clock_peak(cell, run.manifest.machine))
    assert all(s.winner.clock_peak for s in board)
    (first, *_) = leaderboard.rows(board)
    assert first["% MMA@clock"] == f"{board[0].winner.clock_peak:.3g}"
    assert "% MMA@clock" not in leaderboard.rows(leaderboard.leaderboard(run.cells))[0]
    result = in_process(capsys, "show", folder, "--format", "leaderboard")
    assert result.code == 0 and "| variants | % MMA@clock |" in result.out.splitlines()[0]


def test_a_board_by_a_timer_the_clock_was_not_read_over_gives_no_share_of_the_peak_at_that_clock():
    """NVML read the SM clock over the headline's (device) samples alone: a board ranked by wall, whose samples came
    after under a clock of their own, rates no winner against it, and has no % MMA@clock column."""
    from helpers import REPO
    from runner.store import read_run

    run = read_run(REPO / "examples" / "results" / "h200" / "hopper-long-burst-20261202")
    assert {c.telemetry.timer for c in run.cells if c.telemetry} == {"device"}  # schema 3: by step 14 -> 15
    by_wall = leaderboard.leaderboard(run.cells, "wall", run.manifest)
    assert by_wall and all(s.winner.clock_peak is None for s in by_wall)
    assert "% MMA@clock" not in leaderboard.rows(by_wall)[0]
    by_device = leaderboard.leaderboard(run.cells, "device", run.manifest)
    assert all(s.winner.clock_peak for s in by_device)


def test_a_board_where_one_winner_has_a_share_of_the_peak_gives_the_column_and_a_dash_where_none_is_known():
    """A winner without telemetry (None) or with no rate to share (NaN) reads '—' beside one that has a share."""
    shares = {"T8": 41.23, "T16": None, "T32": float("nan")}
    board = rank(Time("run", shape, "xla", 1.0, 0.0, clock_peak=share) for shape, share in shares.items())
    assert [row["% MMA@clock"] for row in leaderboard.rows(board)] == ["41.2", "—", "—"]


def test_an_unsettled_winner_or_runner_up_is_named_so_and_its_margin_is_never_decisive():
    """A time sampled before its power state settled (or on a moving clock) ranks, but is flagged, and a margin it
    takes part in, however wide, says "unsettled" where a settled one would say decisive."""
    for rough in ("xla", "cudnn"):
        (board,) = rank([Time("run", "T8", v, s, 0.01, unsettled=v == rough) for v, s in (("xla", 1.0), ("cudnn", 2.0))])
        row = leaderboard.rows([board])[0]
        assert board.unsettled and not board.decisive, rough
        assert row["margin"] == "+100% (unsettled)", rough
        assert f"{rough} (unsettled)" in (row["fastest"], row["next"]), rough
    (settled,) = rank(times(("xla", 1.0), ("cudnn", 2.0)))
    assert settled.decisive and leaderboard.rows([settled])[0]["margin"] == "+100%"


def test_a_not_converged_winner_or_runner_up_is_named_so_and_its_margin_is_never_decisive():
    """show gave a cell '[† not converged: …]' and the board named the same time plain, its margin decisive where it
    cleared a noise that never met its target: the board names it '(not converged)' (runner.marks' word), says so of
    its margin, however wide, and says what the mark means under it."""
    for loose in ("xla", "cudnn"):
        (board,) = rank([Time("run", "T8", v, s, 0.01, unconverged=v == loose) for v, s in (("xla", 1.0),
                                                                                             ("cudnn", 2.0))])
        row = leaderboard.rows([board])[0]
        assert board.unconverged and not board.decisive, loose
        assert row["margin"] == "+100% (not converged)", loose
        assert f"{loose} (not converged)" in (row["fastest"], row["next"]), loose
        assert leaderboard.marks_key([board]) == ("Marks: (not converged) noise above its target when sampling "
                                                  "stopped, or under 5 samples: a margin it takes part in is never "
                                                  "decisive.")
    (both,) = rank([Time("run", "T8", "xla", 1.0, 0.01, unsettled=True, unconverged=True),
                    Time("run", "T8", "cudnn", 2.0, 0.01)])
    assert leaderboard.rows([both])[0]["fastest"] == "xla (unsettled, not converged)"


def test_a_record_whose_timer_did_not_converge_is_a_not_converged_time():
    ok = [c for c in shipped(CPU_LAB5).cells if c.status == "ok"]
    loose = next(c for c in ok if not c.timings[0].converged)
    settled = next(c for c in ok if c.timings[0].converged)
    assert leaderboard.time_of(loose).unconverged and not leaderboard.time_of(settled).unconverged


def test_a_record_unsettled_by_power_or_clock_is_an_unsettled_time():
    from runner.record import PowerState

    old = next(c for c in shipped(H200_LONG).cells if c.status == "ok")
    assert old.power is None and not leaderboard.time_of(old).unsettled  # not observed: not flagged
    for policy in ("steady", "burst"):
        settled = old.model_copy(update={"power": PowerState(policy=policy, settled=True)})
        never = old.model_copy(update={"power": PowerState(policy=policy, settled=False)})
        assert not leaderboard.time_of(settled).unsettled and leaderboard.time_of(never).unsettled, policy
    assert leaderboard.time_of(old.model_copy(update={"clock_unstable": True})).unsettled


def test_an_fp8_variant_is_named_fp8_beside_the_bf16_variants_it_ranks_with():
    board = leaderboard.leaderboard(shipped(H200_LONG).cells)
    fwd_32k = next(s for s in board if s.shape == "B1 T32768 N64 K8 H128 bfloat16 causal fwd")
    row = leaderboard.rows([fwd_32k])[0]
    assert row["fastest"] == "cudnn_fp8 (FP8)" and "FP8" not in row["next"]
    (legacy_fp8,) = rank([Time("run", "T8", "tokamax_triton_fp8", 1.0, 0.0, fp8_mark="FP8", unsettled=True)])
    assert leaderboard.rows([legacy_fp8], {"tokamax_triton_fp8": "x"})[0]["fastest"] == (
        "tokamax_triton_fp8 (legacy, FP8, unsettled)")


LLAMA_BURST = "h200/llama3.1-70b-20261206-burst"  # every te_fp8 record says not FP8: TE ran it in bf16


def test_fp8_is_marked_where_the_record_says_it_ran_and_an_fp8_request_that_did_not_is_marked_not_fp8():
    """fp8_mark reads the record's fp8 block, not the variant's promise: te_fp8's records say no f8 type reached its
    program, so it ranks as the bf16 it is and is named '(not FP8)', never '(FP8)' (it was, for any fp8 block)."""
    run = shipped(LLAMA_BURST)
    board = leaderboard.contested(leaderboard.leaderboard(run.cells))
    named = {name for row in leaderboard.rows(board) for name in (row["fastest"], row["next"])}
    opened = {n.split(",")[0].rstrip(")") for n in named}  # a burst cell's few samples add '(…, not converged)'
    assert {"te_fp8 (not FP8", "cudnn_fp8 (FP8"} <= opened and not any(n.startswith("te_fp8 (FP8") for n in named)
    assert "; (not FP8) asked for FP8, but no f8 type reached its compiled program" in leaderboard.marks_key(board)
    fp8 = next(c for c in run.cells if c.variant == "cudnn_fp8" and c.status == "ok")
    unreached = fp8.model_copy(update={"fp8": fp8.fp8.model_copy(update={"in_hlo": False})})
    assert leaderboard.time_of(fp8).fp8_mark == "FP8" and leaderboard.time_of(unreached).fp8_mark == "not FP8"
    assert leaderboard.fp8_mark(None, float("nan")) is None  # a frame's bf16 cell: no verdict, no mark
    assert leaderboard.fp8_mark("not FP8: …", float("nan")) == "not FP8"  # NaN is not an f8 type


def test_where_the_fastest_and_the_next_ran_two_cudnn_releases_each_is_named_with_its_own():
    """TE's worker loads its own cuDNN (9.14.0 beside jax's 9.19.0 in the shipped H200 runs): a te-against-cudnn
    margin is in part the releases', so the board names each side's where they differ, and only there."""
    def board(*sides):
        return rank([Time("run", "T8", v, s, 0.01, backend="cudnn", cudnn=c) for v, s, c in sides])

    (apart,) = board(("te", 1.0, "9.14.0"), ("cudnn", 1.1, "9.19.0"))
    row = leaderboard.rows([apart])[0]
    assert (row["fastest"], row["next"]) == ("te (cuDNN 9.14.0)", "cudnn (cuDNN 9.19.0)")
    assert "(cuDNN …) the fastest and the next ran two cuDNN releases" in leaderboard.marks_key([apart])
    one_release = board(("te", 1.0, "9.19.0"), ("cudnn", 1.1, "9.19.0"))
    one_cudnn = board(("te", 1.0, "9.14.0"), ("xla", 1.1, None))  # xla runs no cuDNN kernel
    for same in (one_release, one_cudnn):
        assert "cuDNN" not in " ".join(leaderboard.rows(same)[0].values()) + leaderboard.marks_key(same)
    run = shipped(LLAMA_BURST)
    te = next(c for c in run.cells if c.variant == "te" and c.status == "ok")
    assert leaderboard.time_of(te, manifest=run.manifest).cudnn == "9.14.0" and leaderboard.time_of(te).cudnn is None


def test_where_fp8_wins_the_board_names_the_race_of_the_others_with_its_own_margin():
    """cudnn_fp8 (FP8) fastest and a bf16 variant next never stated the bf16 race (te against cudnn): where the winner
    computed in FP8, `fastest non-FP8` names the fastest variant that did not (a not-FP8 one among them), its margin
    over its own next and whether that is decisive; a board with no FP8 winner has no such column."""
    fp8 = [Time("run", "B1 T8", "cudnn_fp8", 1.0, 0.01, fp8_mark="FP8")]
    mixed, plain = rank([*fp8, *times(("cudnn", 1.5), ("te_fp8", 1.56), ("xla", 3.0)),
                         *times(("cudnn", 1.0), ("te", 1.02), shape="B2 T8")])
    assert mixed.winner.variant == "cudnn_fp8" and mixed.runner_up.variant == "cudnn"
    race = mixed.unmixed
    assert (race.winner.variant, race.runner_up.variant, race.variants) == ("cudnn", "te_fp8", 3)
    assert race.margin == pytest.approx(0.04) and race.decisive and plain.unmixed is None
    rows = leaderboard.rows([mixed, plain])
    assert [row["fastest non-FP8"] for row in rows] == ["cudnn +4% over te_fp8", "—"]
    assert "fastest non-FP8" not in leaderboard.rows([plain])[0]
    (alone,) = rank([*fp8, *times(("cudnn", 1.5))])
    assert leaderboard.rows([alone])[0]["fastest non-FP8"] == "cudnn"
    (fp8_only,) = rank([*fp8, Time("run", "B1 T8", "fp8_b", 2.0, 0.01, fp8_mark="FP8")])
    assert fp8_only.unmixed is None


def test_where_fp8_wins_the_summary_line_names_it_fp8_and_the_winners_of_the_others_race():
    """'cudnn_fp8 fastest at 8 of 16 shapes' was the report's and the overview's first answer on the shipped H200 burst
    run, FP8 against bf16 unmarked; the line now marks each winner's FP8 and gives the board's `fastest non-FP8`
    winners too, over the shapes where one ran (none where every variant computed in FP8)."""
    fp8 = [Time("run", f"B{b} T8", "cudnn_fp8", 1.0, 0.01, fp8_mark="FP8") for b in (1, 2, 3)]
    board = rank([*fp8, *times(("cudnn", 1.5), ("te", 1.6), shape="B1 T8"),
                  Time("run", "B2 T8", "te_fp8", 1.5, 0.01, fp8_mark="not FP8"), *times(("cudnn", 1.6), shape="B2 T8"),
                  Time("run", "B3 T8", "fp8_b", 2.0, 0.01, fp8_mark="FP8"),
                  *times(("te", 1.0), ("xla", 2.0), shape="B4 T8")])
    assert leaderboard.winners(board, lambda v: f"*{v}*") == (
        "*cudnn_fp8* (FP8) fastest at 3, *te* at 1 of 4 shapes; fastest non-FP8: *cudnn* at 1, *te_fp8* (not FP8) at "
        "1, *te* at 1 of 3")
    assert leaderboard.winners(board[3:]) == "te fastest at 1 of 1 shapes"  # no FP8 winner: no non-FP8 clause
