"""Exact work and traffic of one attention call, and the rates they give: counts and arithmetic only, so that
records, migrations' readers and the dashboard can all use them without importing a record."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import get_args

from runner import paging
from runner.masks import kept_elements, kept_rows
from runner.shape import Fp8Matmul, Params

BWD_FLOP_FACTOR = 3.5  # fwd + bwd = 3.5 x fwd, the convention of FlashAttention's benchmarks
ITEMSIZE = {"float32": 4, "bfloat16": 2, "float16": 2}


def flops(p: Params) -> int:
    """2*N*(H + Hv)*(score elements the mask keeps over the batch: causal, window, padding): Q·Kᵀ and P·V at 2 FLOPs
    per multiply-add, masked-out scores not counted (so TFLOP/s stays honest); x3.5 with backward."""
    forward = 2 * p.heads * (p.head_dim + p.v_head_dim) * kept_elements(p)
    return int(forward * BWD_FLOP_FACTOR) if p.pass_ == "fwd_bwd" else forward


def _row_bytes(p: Params) -> tuple[float, float]:
    """Bytes of one token's row of a query-shaped tensor (Q, O) and of a key-shaped one (K, V), at the mean of Q/K's
    and V/O's head dimensions (they differ under MLA). bytes_min, kv_cache_bytes and gathered_bytes take such rows in
    pairs of one of each width (Q and O, dO and dQ, K and V, dK and dV), so they are exact under MLA too; tensor_bytes
    (one tensor's size, for memory estimates) is not: Q at the mean width, not head_dim."""
    width = ITEMSIZE[p.dtype] * (p.head_dim + p.v_head_dim) / 2
    return p.heads * width, p.kv_heads * width


def tensor_bytes(p: Params) -> tuple[int, int]:
    """Bytes of one query-shaped tensor (Q, O) and one dense key-shaped tensor (K, V: a serving cell's holds its
    longest request, runner.paging.cache_len)."""
    q_row, kv_row = _row_bytes(p)
    return int(p.batch * p.seq_len * q_row), int(p.batch * paging.cache_len(p) * kv_row)


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
    """What a decoder keeps per layer: K and V, dense, or a paged cell's page pool (runner.paging)."""
    if p.page_size is None:
        return 2 * tensor_bytes(p)[1]
    return int(2 * sum(paging.pages_of(p)) * p.page_size * _row_bytes(p)[1])


def gathered_bytes(p: Params) -> int:
    """A paged cell's K and V gathered through the table into a dense copy: B x max pages x P keys each."""
    return int(2 * p.batch * paging.gathered_len(p) * _row_bytes(p)[1])


# Dense MMA FLOPs per clock per SM by data type (bf16 / fp16 with FP32 accumulate, as attention runs them), for the
# GPUs a cited figure covers: (compute capability major, a pattern the NVML name must hold, the rates, or None where
# no source was found). The first row a GPU matches counts; a GPU that matches none has no MMA peak. The figures are
# NVIDIA's dense (not 2:4 sparse) TFLOP/s over SMs x boost clock, as cudnn-frontend's peak_mma_tflops table gives
# them (https://github.com/NVIDIA/cudnn-frontend/blob/0282420d338c2c29078479cdc88c90eabdbe69f6/benchmark/
# attention_training/benchmark_single_sdpa.py, _FLOPS_PER_CLOCK_PER_SM and its comments):
# - sm90, H100 / H200 (GH100): 989.5 dense BF16 TFLOP/s on the H100 SXM = 132 SMs x 1.83 GHz x 4096; FP8 twice that
#   (cudnn-frontend's H200 rows: 2141 against 1071 at one clock, docs/reference/).
# - sm90, H20: unsourced. The same compute capability with its tensor rate cut: third parties quote 148 dense BF16
#   TFLOP/s over 78 SMs (https://huggingface.co/hardware/h20, https://zangshuxian.com/new/674733024499207168), under a
#   quarter of 4096's at any boost clock; we found no NVIDIA datasheet for it, so it has no peak.
# - sm100 (the B200 line): 8192 bf16 / fp16 (cudnn-frontend's "Blackwell datacenter" row).
# - sm120, RTX PRO 6000 Blackwell: 1024: NVIDIA's RTX Blackwell PRO whitepaper lists 503.8 dense BF16 TFLOP/s with
#   FP32 accumulate = 188 SMs x 2.617 GHz x 1024. Other sm12x GPUs are unsourced: GeForce RTX 50 cards run FP32
#   accumulate at half that by third-party figures (the RTX 5090's 209.5 dense FP16 TFLOP/s = 170 SMs x 2.407 GHz x
#   512, https://www.codesota.com/hardware/rtx-5090; an RTX 5060 Ti measured at 47 BF16 TFLOP/s,
#   https://github.com/QuantumDrizzy/BLACKWALL), not NVIDIA's own sheet, so they have no peak.
MMA_PER_CLOCK_PER_SM = (
    (9, re.compile(r"\bH20\b"), None),
    (9, re.compile(""), {"bfloat16": 4096, "float16": 4096, "fp8": 8192}),
    (10, re.compile(""), {"bfloat16": 8192, "float16": 8192}),
    (12, re.compile(r"RTX PRO 6000"), {"bfloat16": 1024, "float16": 1024}),
)


def _mma_rates(capability: str | None, gpu: str | None) -> dict[str, int] | None:
    """This GPU's (compute capability, NVML name) first row of MMA_PER_CLOCK_PER_SM; None without a cited figure."""
    major = int(str(capability).split(".")[0]) if capability else None
    return next((rates for cap, name, rates in MMA_PER_CLOCK_PER_SM if cap == major and name.search(gpu or "")), None)


def mma_per_clock(capability: str | None, gpu: str | None, data_type: str) -> int | None:
    """Dense MMA FLOPs per clock per SM of this GPU (compute capability, NVML name) for `data_type`: its first row of
    MMA_PER_CLOCK_PER_SM; None without a cited figure, or a fact unknown."""
    return (_mma_rates(capability, gpu) or {}).get(data_type)


def no_mma_rate(machine) -> str | None:
    """The line said where `% MMA@clock` would stand for a run on a GPU that no row of MMA_PER_CLOCK_PER_SM gives a
    rate (an L4, an H20), so that the column is not missing without a word: show's tables and leaderboard, the
    report's and the dashboard's Throughput tab say it; None on a CPU or a GPU with a cited rate."""
    if machine is None or machine.gpu is None or _mma_rates(machine.compute_capability, machine.gpu.name):
        return None
    return (f"% MMA@clock: no cited MMA rate for {machine.gpu.name or machine.device_kind} (compute capability "
            f"{machine.compute_capability or 'not recorded'}), so no cell has a share of the MMA peak at its clock.")


def peak_mma_tflops(capability: str | None, sm_count: int | None, data_type: str, sm_mhz: float | None,
                    gpu: str | None = None):
    """The GPU's dense MMA TFLOP/s for `data_type` (bfloat16, float16 or fp8) at this SM clock, as cudnn-frontend
    computes its peak_mma_tflops (flops per clock per SM x SMs x MHz / 1e6); `gpu`: its NVML name, which some rows
    need (an H20 is sm90 without GH100's rate; no name matches only the rows that need none). None where a fact is
    unknown."""
    per_clock = mma_per_clock(capability, gpu, data_type)
    if per_clock is None or not sm_count or not sm_mhz or sm_mhz != sm_mhz:  # NaN from a table
        return None
    return per_clock * sm_count * sm_mhz / 1e6


# Q·Kᵀ and P·V: what an FP8 variant runs on f8 values unless it says otherwise (the names: runner.shape.Fp8Matmul)
FP8_MATMULS: tuple[Fp8Matmul, ...] = get_args(Fp8Matmul)


def mma_peak_tflops(c, capability: str | None, sm_count: int | None, sm_mhz: float | None,
                    gpu: str | None = None) -> float | None:
    """The dense MMA TFLOP/s a cell record's matmuls could reach at this clock: its dtype's, or where FP8 reached the
    compiled program, FP8's for the matmuls its variant runs on f8 values (`c.fp8.matmuls`) and its dtype's for the
    rest, the two rates weighted by each matmul's share of a forward's FLOPs (Q·Kᵀ's head_dim, P·V's v_head_dim), as
    time adds: tokamax_triton_fp8's P·V reads V rescaled to bf16, so its peak is 4/3 of bf16's on an H200, not twice
    (a forward+backward cell with only some matmuls in FP8: None, its backward's are not recorded)."""
    if not (c.fp8 and c.fp8.in_hlo):
        return peak_mma_tflops(capability, sm_count, c.params.dtype, sm_mhz, gpu)
    in_fp8 = FP8_MATMULS if c.fp8.matmuls is None else c.fp8.matmuls
    if set(in_fp8) != set(FP8_MATMULS) and c.params.pass_ == "fwd_bwd":
        return None  # a backward's matmuls are more than these two, and which of them run on f8 is not recorded
    widths = {"qk": c.params.head_dim, "pv": c.params.v_head_dim}
    seconds = 0.0  # per TFLOP
    for matmul, width in widths.items():
        peak = peak_mma_tflops(capability, sm_count, "fp8" if matmul in in_fp8 else c.params.dtype, sm_mhz, gpu)
        if peak is None:
            return None
        seconds += width / sum(widths.values()) / peak
    return 1 / seconds


def clock_of(c, timer: str | None = None) -> float | None:
    """The median SM clock NVML read while `timer` (default: the record's headline timer) took a cell record's
    samples. Telemetry spans one timer's samples (`telemetry.timer`, the sampling's headline): for another timer (a
    split cell's wall headline, a board ranked by wall) no clock was read, and a share of its time against the
    other's clock would mix two windows: None, as without telemetry."""
    t = c.telemetry
    return t.sm_clock_mhz.median if t is not None and t.timer is not None and t.timer == (timer or c.timer) else None


def clock_peak_tflops(c, machine, timer: str | None = None) -> float | None:
    """The dense MMA TFLOP/s of the GPUs a cell record ran on at the SM clock read while `timer` sampled (clock_of;
    default: its headline timer; the run's `machine` gives the capability and SMs; mma_peak_tflops the data types):
    D such peaks for a cell split across D GPUs, whose FLOPs are the whole call's; None without that clock or the
    machine's facts."""
    if machine is None or machine.gpu is None:
        return None
    peak = mma_peak_tflops(c, machine.compute_capability, machine.gpu.sm_count, clock_of(c, timer), machine.gpu.name)
    return None if peak is None else peak * c.params.devices


def clock_peak_share(tflops, peak):
    """100 x tflops / an MMA peak at the cell's clock (clock_peak_tflops, or a publisher's): numbers or pandas
    columns alike, None (NaN in a column) where either is unknown."""
    if tflops is None or (isinstance(tflops, float) and tflops != tflops):  # NaN from a table
        return None
    return _share(tflops, peak)


def clock_peak(c, machine) -> float | None:
    """A cell record's headline TFLOP/s as a share of its GPUs' MMA peak at its clock (clock_peak_tflops), or None."""
    return clock_peak_share(c.tflops, clock_peak_tflops(c, machine))


@dataclass(frozen=True)
class Ceilings:
    """The machine's measured ceilings that rates are shares of (None: not measured, as on a CPU)."""

    peak_tflops: float | None = None  # bf16 matmul
    bandwidth_gbps: float | None = None  # device-memory copy (either may be a pandas column: one run's per row)


def rates(work, traffic, seconds, ceilings: Ceilings = Ceilings(), devices=1) -> dict:
    """TFLOP/s, GB/s and their share of the ceilings for `work` FLOPs and `traffic` bytes in `seconds`, of a call on
    `devices` GPUs (a split cell's work and traffic are the whole call's: shares of that many GPUs' ceilings): numbers
    or pandas columns alike, so a record, a soak's points and the dashboard's tables (by any timer) rate alike."""
    tflops, gbps = work / seconds / 1e12, traffic / seconds / 1e9
    return {"tflops": tflops, "gbps": gbps, "pct_of_peak": _share(tflops, ceilings.peak_tflops, devices),
            "pct_of_bandwidth": _share(gbps, ceilings.bandwidth_gbps, devices)}


def _share(rate, ceiling, devices=1):
    """100 x rate / (devices x ceiling); None without a ceiling (a column of ceilings gives NaN where one is
    missing)."""
    if ceiling is None or (isinstance(ceiling, (int, float)) and not ceiling):
        return None
    return 100 * rate / (ceiling * devices)


def seconds_per_token(seconds, batch, new_tokens):
    """A decode step's seconds per token it generates: the batch's B x T new tokens (a serving cell's T are the
    tokens it scores at once, all kept when speculation is right); numbers or pandas columns alike."""
    return seconds / (batch * new_tokens)


def scaling_efficiency(one_device_s, devices, seconds):
    """Strong scaling of a cell split across `devices`: its one-device time over devices x its time (1 is perfect,
    0.5 is half the devices' worth wasted); numbers or pandas Series alike."""
    return one_device_s / (devices * seconds)


def energy(p: Params, seconds: float | None, mean_power_w: float | None) -> dict:
    """Joules per call (mean power x kernel time) and TFLOP per joule."""
    if not seconds or not mean_power_w:
        return {}
    joules = mean_power_w * seconds
    return {"energy_j": joules, "tflops_per_j": flops(p) / 1e12 / joules}
