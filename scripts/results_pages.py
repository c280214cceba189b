"""The docs' H200 results pages, generated from the committed runs: `make results-pages` (this script) writes
docs/results/*.md and their figures; tests/test_docs.py checks that the committed pages are what it writes now.

Every table and figure on a page comes from the runs named beside it (examples/results/h200, docs/evidence/runs-*),
through runner/figures.py: a figure's footer names its run ids, its table holds the numbers it draws.

    python scripts/results_pages.py [--out docs/results]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from runner import figures, marks, shape  # noqa: E402
from runner.record import policy_said  # noqa: E402
from runner.store import read_run  # noqa: E402

H200 = "examples/results/h200"
EVIDENCE = "docs/evidence/runs-20261203"


@dataclass(frozen=True)
class Source:
    """A committed run folder and the words its lines carry in a chart that draws several runs ('' for one)."""

    folder: str
    suffix: str = ""


@dataclass(frozen=True)
class Block:
    """One figure and its table: an experiment of one or more runs, a metric against the size it sweeps."""

    sources: tuple[Source, ...]
    experiment: str
    metric: str = "latency"
    variants: tuple[str, ...] = ()  # only these, when set
    where: tuple[tuple[str, object], ...] = ()  # only the cells whose params hold these values (axis, value)
    x: str | None = None  # the size axis to draw along, when not T (or the first that varies)


@dataclass(frozen=True)
class Verdicts:
    """A table of what each FP8 cell of an experiment really ran, beside its bf16 baseline's time."""

    source: Source
    experiment: str


@dataclass(frozen=True)
class Page:
    title: str
    intro: str
    blocks: tuple[Block | Verdicts, ...]


LAB = Source(f"{EVIDENCE}/lab5-warm-20261203-102856")
HOPPER_STEADY = Source(f"{EVIDENCE}/hopper-long-warm-20261203-102524", "steady")
HOPPER_BURST = Source(f"{EVIDENCE}/hopper-long-burst-20261203", "burst")
KERNELS = Source(f"{H200}/kernels-20261202")
DECODE = Source(f"{H200}/decode-20261202")
MODELS = Source(f"{H200}/h200-models-steady-20261203")
LLAMA_70B = Source(f"{H200}/llama3.1-70b-20261206-burst")

PAGES = {
    "lab": Page("The lab on the H200", "The lab's sections (specs/lab5.yaml) as the runner measures them: kernel time "
                "on the device, in the steady power state, every cell checked against float32.",
                (Block((LAB,), "seq-len"), Block((LAB,), "batch"), Block((LAB,), "te-causal"))),
    "hopper": Page("Hopper shapes: B=1, 64 query and 8 KV heads, H=128, causal",
                   "cudnn-frontend's published H200 configuration (specs/hopper-long.yaml), in the steady state: "
                   "what a training step sees. The published figures are beside them in `attnbench show` "
                   "(docs/reference/).",
                   (Block((HOPPER_STEADY,), "fwd", "tflops"), Block((HOPPER_STEADY,), "fwd-bwd", "tflops"))),
    "fp8": Page("FP8 attention", "cuDNN's FP8 attention (`cudnn_fp8`: e4m3 with per-tensor amax scales, forward only) "
                "beside its bf16 twin at the hopper shapes, steady; then what each FP8 variant of the lab's FP8 "
                "section really ran, as its record's `fp8.verdict` says (the dashboard's FP8 tab too).",
                (Block((HOPPER_STEADY,), "fwd", "tflops", ("cudnn", "cudnn_fp8")), Verdicts(LAB, "fp8"))),
    "power": Page("Power states: steady against burst", "The same cells sampled inside an unbroken load (`steady`, "
                  "at the power cap) and on a cool GPU's first calls (`burst`, the figure vendors publish).",
                  (Block((HOPPER_STEADY, HOPPER_BURST), "fwd", "tflops", ("cudnn", "cudnn_fp8")),
                   Block((HOPPER_STEADY, HOPPER_BURST), "fwd-bwd", "tflops", ("cudnn",)))),
    "models": Page("Attention as models use it", "Sliding windows, padded batches, ALiBi, soft caps, MLA heads and "
                   "tensor parallelism (specs/h200-models.yaml), each checked against float32; then a model preset, "
                   "Llama 3.1 70B's causal prefill at tp 1 in burst (specs/models/llama3.1-70b.yaml). Every preset's "
                   "runs are "
                   "in examples/results/h200/.",
                   (Block((MODELS,), "window"), Block((MODELS,), "tp", x="tp"),
                    Block((LLAMA_70B,), "prefill", where=(("pass", "fwd"), ("causal", True))))),
    "kernels": Page("Kernels: Pallas beside cuDNN and XLA", "The kernel shootout (specs/kernels.yaml): Pallas Mosaic "
                    "GPU and Triton, their configurations searched per shape, beside cuDNN, XLA, auto and naive.",
                    (Block((KERNELS,), "hopper-fwd"), Block((KERNELS,), "lab-fwd"))),
    "decode": Page("Decode: one query token against a KV cache", "specs/decode.yaml: the bandwidth each backend "
                   "reaches reading the KV cache, against its length (GQA at B8, MHA at B2); then GQA against MHA at "
                   "one shape, in time: the float16 experiment's B8 S32k N32, 8 KV heads against 32, a KV cache a "
                   "quarter of MHA's.",
                   (Block((DECODE,), "gqa-length", "gbps"), Block((DECODE,), "mha-length", "gbps"),
                    Block((DECODE,), "float16", x="kv_heads"))),
}


def cells_of(source: Source, block: Block) -> tuple[str, list]:
    run = read_run(ROOT / source.folder)
    cells = [c for c in run.cells if c.experiment == block.experiment
             and (not block.variants or c.variant in block.variants)
             and all(c.params.as_dict()[axis] == value for axis, value in block.where)]
    return run.run_id, cells


def chart_of(block: Block) -> figures.Chart:
    sources = [(run_id, source.suffix, cells) for source in block.sources for run_id, cells in [cells_of(source,
                                                                                                        block)]]
    name = "-".join([sources[0][0], block.experiment, block.metric, *block.variants,
                     *(f"{axis}{value}" for axis, value in block.where)])
    chart = figures.sweep_chart(name, block.experiment, sources, block.metric, block.x)
    if chart is None:
        raise SystemExit(f"{block.sources[0].folder}: experiment {block.experiment!r} has no timed cell that sweeps "
                         "a size")
    return chart


def table(chart: figures.Chart) -> str:
    """The figure's numbers: a row per swept value, a column per line, each number marked as show and the dashboard
    mark its cell (runner.marks: unsettled, not converged), and under the table what each mark it shows means."""
    xs = sorted({x for s in chart.series for x, _ in s.points})
    values = [{x: f"{y:.4g}{mark}" for (x, y), mark in zip(s.points, s.marks or [""] * len(s.points))}
              for s in chart.series]
    header = f"| {chart.x} | " + " | ".join(s.label for s in chart.series) + " |"
    rows = [f"| {x:g} | " + " | ".join(v.get(x, "—") for v in values) + " |" for x in xs]
    key = marks.key(mark for s in chart.series for point in s.marks for mark in point)
    return "\n".join([header, "|---" * (len(chart.series) + 1) + "|", *rows, *([f"\n*{key}.*"] if key else [])])


def policies(block: Block) -> str:
    """The power policy each run of the block ran under ('burst'; 'steady (in load)'), which the page's numbers are."""
    return ", ".join(dict.fromkeys(policy_said(read_run(ROOT / s.folder).manifest) for s in block.sources))


def block_markdown(block: Block, chart: figures.Chart) -> str:
    runs = ", ".join(f"`{s.folder}`" for s in block.sources)
    return "\n\n".join([f"## {chart.title}", f"![{chart.title}](figures/{chart.name}.png)",
                        f"*{chart.subtitle}. {chart.y} · from {runs} (run ids: {', '.join(chart.runs)}; power "
                        f"{policies(block)}).*", table(chart)])


def verdicts_markdown(block: Verdicts) -> str:
    """Per FP8 cell: its shape, its time against its bf16 baseline's at the same shape, and the verdict."""
    run = read_run(ROOT / block.source.folder)
    cells = [c for c in run.cells if c.experiment == block.experiment and c.status == "ok"]
    rows = [verdict_row(c, run.manifest.variants[c.variant].fp8_baseline, cells) for c in cells if c.fp8]
    header = "| variant | shape | ms | bf16 baseline | its ms | speed-up | what ran |\n|---|---|---|---|---|---|---|"
    return "\n\n".join([f"## {block.experiment}: what FP8 ran",
                         f"*From `{block.source.folder}` (run id: {run.run_id}); median {cells[0].timer} time.*",
                         "\n".join([header, *rows])])


def verdict_row(cell, baseline: str, cells: list) -> str:
    twin = next(c for c in cells if c.variant == baseline and c.params == cell.params)
    return (f"| {cell.variant} | {shape.label(cell.params.as_dict())} | {cell.median_s * 1e3:.4g} | {baseline} | "
            f"{twin.median_s * 1e3:.4g} | {twin.median_s / cell.median_s:.2f}× | {cell.fp8.verdict} |")


def page_markdown(name: str, page: Page, charts: list[figures.Chart | None]) -> str:
    parts = [block_markdown(b, c) if isinstance(b, Block) else verdicts_markdown(b)
             for b, c in zip(page.blocks, charts)]
    return "\n\n".join([f"# {page.title}", GENERATED, page.intro, *parts]) + "\n"


GENERATED = ("<!-- generated by scripts/results_pages.py (make results-pages) from the committed runs; edit that, "
             "not this -->")


def index_markdown() -> str:
    links = "\n".join(f"- [{page.title}]({name}.md)" for name, page in PAGES.items())
    return "\n\n".join(["# H200 results", GENERATED,
                        "Headline results of the committed H200 runs, each table and figure generated from the runs "
                        "it names. How they were measured, and everything else measured, is in the "
                        "[evidence log](../benchmarks.md).",
                        "Each figure's caption names its runs and the power policy they ran under (`burst`, `steady "
                        "(in load)`, or `steady (after settling)`: the sampler of the runs before schema 5, "
                        f"[regressions](../regressions.md)); a number whose cell was {marks.UNSETTLED} "
                        f"({marks.UNSETTLED_MARK.symbol}) or {marks.NOT_CONVERGED} "
                        f"({marks.UNCONVERGED_MARK.symbol}) carries the mark `attnbench show` and the dashboard give "
                        "it, and a line under its table says what the marks mean.", links]) + "\n"


def generate() -> dict[str, bytes]:
    """Every file under docs/results/, by name."""
    made = {"index.md": index_markdown().encode()}
    for name, page in PAGES.items():
        charts = [chart_of(block) if isinstance(block, Block) else None for block in page.blocks]
        made[f"{name}.md"] = page_markdown(name, page, charts).encode()
        made.update({f"figures/{c.name}.png": figures.draw(c) for c in charts if c})
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results")
    out = parser.parse_args().out
    made = generate()
    for name, data in made.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    stale = [p for p in (out / "figures").glob("*.png") if f"figures/{p.name}" not in made]
    for path in stale:
        path.unlink()
    print(f"wrote {len(made)} files to {out}" + (f", removed {len(stale)} stale figures" if stale else ""))


if __name__ == "__main__":
    main()
