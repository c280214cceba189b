"""runner/assembly.py: a cell's record gets its work, traffic, rates and energy in one place, from its headline
timing, and a soak's bins are rated by the same rates."""

import pytest

from helpers import params
from runner import metrics
from runner.assembly import ceilings, cell_record
from runner.cells import Cell
from runner.metrics import Ceilings
from runner.record import Machine, Soak, SoakPoint, TimerSummary


def timing(timer: str, median_s: float) -> TimerSummary:
    return TimerSummary(timer=timer, median_s=median_s, q1_s=median_s, q3_s=median_s, min_s=median_s, samples=3,
                        noise=0.0, converged=True)


def test_the_headline_is_the_device_timer_and_the_rates_are_shares_of_the_ceilings():
    cell = Cell("e", "xla", params(seq_len=64, causal=True))
    record = cell_record(cell, "r", "2026-01-01T00:00:00+00:00", 1.0, "ok", ceilings=Ceilings(100.0, 2000.0),
                         timings=[timing("wall", 2e-3), timing("device", 1e-3)])
    work, traffic = metrics.flops(cell.params), metrics.bytes_min(cell.params)
    assert (record.timer, record.median_s, record.flops, record.bytes_min) == ("device", 1e-3, work, traffic)
    assert record.tflops == pytest.approx(work / 1e-3 / 1e12) and record.gbps == pytest.approx(traffic / 1e-3 / 1e9)
    assert record.pct_of_peak == pytest.approx(record.tflops) and record.pct_of_bandwidth == pytest.approx(
        record.gbps / 20)


def test_a_cell_split_across_devices_is_rated_by_the_wall_clock():
    cell = Cell("e", "ring", params(seq_len=64, devices=2))
    record = cell_record(cell, "r", "2026-01-01T00:00:00+00:00", 1.0, "ok",
                         timings=[timing("device", 1e-3), timing("wall", 2e-3)])
    assert (record.timer, record.median_s, record.pct_of_peak) == ("wall", 2e-3, None)


def test_a_split_cells_shares_are_of_all_its_devices_ceilings():
    """Its TFLOP/s and GB/s are the whole call's, done on D GPUs: shares of D ceilings, never up to D x 100 %."""
    one, split = (Cell("e", "ring", params(seq_len=64, devices=d)) for d in (1, 4))
    alone, across = (cell_record(cell, "r", "2026-01-01T00:00:00+00:00", 1.0, "ok", ceilings=Ceilings(100.0, 2000.0),
                                 timings=[timing("wall", 1e-3)]) for cell in (one, split))
    assert across.tflops == pytest.approx(alone.tflops) and across.gbps == pytest.approx(alone.gbps)
    assert across.pct_of_peak == pytest.approx(alone.pct_of_peak / 4)
    assert across.pct_of_bandwidth == pytest.approx(alone.pct_of_bandwidth / 4)


def test_a_cell_without_timings_has_counts_and_no_rates():
    record = cell_record(Cell("e", "xla", params()), "r", "2026-01-01T00:00:00+00:00", 0.1, "skipped", "declined")
    assert record.flops > 0 and record.tflops is None and record.gbps is None and record.energy_j is None


def test_a_soaks_bins_are_rated_by_the_records_rates():
    cell = Cell("e", "xla", params(seq_len=64))
    soak = Soak(seconds=2.0, bin_s=1.0, points=[SoakPoint(t_s=1.0, calls=10, median_s=2e-3),
                                                 SoakPoint(t_s=2.0, calls=0)])
    record = cell_record(cell, "r", "2026-01-01T00:00:00+00:00", 1.0, "ok", timings=[timing("device", 2e-3)],
                         soak=soak)
    assert [p.tflops for p in record.soak.points] == [pytest.approx(record.tflops), None]


def test_the_ceilings_come_from_the_machine_record():
    machine = Machine(host="h", platform="gpu", device_kind="H200", device_count=1, matmul_peak_tflops=700.0,
                      memory_bandwidth_gbps=4285.0)
    assert ceilings(machine) == Ceilings(700.0, 4285.0) and ceilings(None) == Ceilings()


def test_a_paged_cell_whose_pool_is_mostly_empty_pages_says_so_in_its_note():
    """page_size 65536 beside requests of about 100 keys: 2 pages, 131,072 rows for 200 keys; pages of 16 fill their
    pool; a declined cell keeps its reason."""
    def record(page_size: int, status: str = "ok", reason: str = ""):
        p = params(batch=2, seq_len=1, kv_seq_len=100, causal=True, kv_lengths="uniform", page_size=page_size)
        return cell_record(Cell("bigpage", "xla_paged", p), "r", "2026-01-01T00:00:00+00:00", 1.0, status, reason,
                           timings=[timing("wall", 1e-3)] if status == "ok" else [])

    assert record(65536).reason == ("page pool mostly empty: 2 pages of 65,536 tokens hold 200 keys (0.2% of its "
                                    "rows); a kernel that reads whole pages reads the empty rows too")
    assert record(256).reason.startswith("page pool mostly empty: 2 pages of 256 tokens hold 200 keys (39.1%")
    assert record(16).reason == "" and record(128).reason == ""  # 200 keys in 256 rows: most of the pool is keys
    assert record(65536, "skipped", "naive declines a paged KV cache").reason == "naive declines a paged KV cache"
