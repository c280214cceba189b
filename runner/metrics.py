"""Exact work and traffic of one attention call, the rates they give, and a cell's record built around them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.masks import kept_elements, kept_rows
from runner.record import CellRecord, Params

if TYPE_CHECKING:  # a record is built around a cell; cells import the sizes defined here
    from runner.cells import Cell

BWD_FLOP_FACTOR = 3.5  # fwd + bwd = 3.5 x fwd, the convention of FlashAttention's benchmarks
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def flops(p: Params) -> int:
    """2*N*(H + Hv)*(score elements the mask keeps over the batch: causal, window, padding): Q·Kᵀ and P·V at 2 FLOPs
    per multiply-add, masked-out scores not counted (so TFLOP/s stays honest); x3.5 with backward."""
    forward = 2 * p.heads * (p.head_dim + p.v_head_dim) * kept_elements(p)
    return int(forward * BWD_FLOP_FACTOR) if p.pass_ == "fwd_bwd" else forward


def _row_bytes(p: Params) -> tuple[float, float]:
    """Bytes of one token's row of a query-shaped tensor (Q, O) and of a key-shaped one (K, V), at the mean of Q/K's
    and V/O's head dimensions (they differ under MLA)."""
    width = ITEMSIZE[p.dtype] * (p.head_dim + p.v_head_dim) / 2
    return p.heads * width, p.kv_heads * width


def tensor_bytes(p: Params) -> tuple[int, int]:
    """Bytes of one query-shaped tensor (Q, O) and one key-shaped tensor (K, V)."""
    q_row, kv_row = _row_bytes(p)
    return int(p.batch * p.seq_len * q_row), int(p.batch * p.kv_seq_len * kv_row)


def bytes_min(p: Params) -> int:
    """Least traffic: fwd reads Q, K, V and writes O; bwd also reads Q, K, V, O, dO and writes dQ, dK, dV. Only the
    rows that take part count (masks.kept_rows): a padded batch's real tokens, and the keys some query keeps, so a
    kernel that skips a window's or the padding's keys is not credited with bytes it never had to move."""
    (queries, keys), (q_row, kv_row) = kept_rows(p), _row_bytes(p)
    q, kv = int(queries * q_row), int(keys * kv_row)
    forward = 2 * q + 2 * kv
    if p.pass_ == "fwd_bwd":
        return forward + (3 * q + 2 * kv) + (q + 2 * kv)
    return forward


def kv_cache_bytes(p: Params) -> int:
    """What a decoder keeps per layer: K and V."""
    return 2 * tensor_bytes(p)[1]



def rates(p: Params, seconds: float | None, peak_tflops: float | None, bandwidth_gbps: float | None) -> dict:
    """TFLOP/s, GB/s and their share of the machine's measured ceilings, for a call of `seconds`."""
    if not seconds:
        return {}
    return rates_of(flops(p), bytes_min(p), seconds, peak_tflops, bandwidth_gbps)


def rates_of(work, traffic, seconds, peak_tflops, bandwidth_gbps) -> dict:
    """The rates of `work` FLOPs and `traffic` bytes in `seconds`, numbers or pandas columns alike (the
    dashboard rates a whole table by another timer with this)."""
    tflops, gbps = work / seconds / 1e12, traffic / seconds / 1e9
    return {"tflops": tflops, "gbps": gbps, "pct_of_peak": _share(tflops, peak_tflops),
            "pct_of_bandwidth": _share(gbps, bandwidth_gbps)}


def _share(rate, ceiling):
    """100 x rate / ceiling; None without a ceiling (a column of ceilings gives NaN where one is missing)."""
    if ceiling is None or (isinstance(ceiling, (int, float)) and not ceiling):
        return None
    return 100 * rate / ceiling


def scaling_efficiency(one_device_s, devices, seconds):
    """Strong scaling of a cell split across `devices`: its one-device time over devices x its time (1 is perfect,
    0.5 is half the devices' worth wasted); numbers or pandas Series alike."""
    return one_device_s / (devices * seconds)


def mean_power_w(telemetry, state) -> float | None:
    """The power the headline sample drew: the energy counter's over a long enough sample, else NVML's reading where
    it can be trusted (a trailing one-second average, so only after a second or more of steady back-to-back calls);
    None rather than a wrong figure otherwise (a burst, or a light load settled in 0.1-0.5 s)."""
    from runner.power import NVML_AVERAGE_S

    if telemetry is None:
        return None
    if telemetry.drawn_w is not None:
        return telemetry.drawn_w
    settled_long = state is not None and state.policy == "steady" and state.wait_s >= NVML_AVERAGE_S
    return telemetry.power_w.mean if settled_long and telemetry.power_w else None


def energy(p: Params, seconds: float | None, mean_power_w: float | None) -> dict:
    """Joules per call (mean power x kernel time) and TFLOP per joule."""
    if not seconds or not mean_power_w:
        return {}
    joules = mean_power_w * seconds
    return {"energy_j": joules, "tflops_per_j": flops(p) / 1e12 / joules}


def cell_record(cell: Cell, run_id: str, started_at: str, duration_s: float, status: str, reason: str = "",
                ceilings: tuple[float | None, float | None] = (None, None), **fields) -> CellRecord:
    """A cell's record with its work, traffic and rates derived from the headline timing: device, else the first;
    wall for a cell split across devices, whose kernel times CUPTI sums over every GPU and stream."""
    timings = fields.get("timings", [])
    preferred = "wall" if cell.params.devices > 1 else "device"
    headline = next((t for t in timings if t.timer == preferred), timings[0] if timings else None)
    seconds = headline.median_s if headline else None
    telemetry = fields.get("telemetry")
    kernel_time = headline is not None and headline.timer != "wall"
    power = mean_power_w(telemetry, fields.get("power")) if kernel_time else None
    return CellRecord(
        key=cell.key, run_id=run_id, experiment=cell.experiment, variant=cell.variant, params=cell.params,
        status=status, reason=reason, started_at=started_at, duration_s=duration_s,
        timer=headline.timer if headline else None, median_s=seconds,
        flops=flops(cell.params), bytes_min=bytes_min(cell.params), kv_cache_bytes=kv_cache_bytes(cell.params),
        **rates(cell.params, seconds, *ceilings), **energy(cell.params, seconds, power), **fields,
    )
