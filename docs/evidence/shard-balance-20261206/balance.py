"""Shard balance of every shipped spec: FLOPs-balanced (before) vs price-balanced (after), priced by runner.cost.H200;
hopper-long by its measured warm run of 2026-12-03. Run from the checkout: python docs/evidence/shard-balance-20261206/balance.py"""
import heapq, sys
from pathlib import Path
sys.path.insert(0, ".")
from runner.cells import expand
from runner.metrics import flops
from runner.registry import load_all
from runner.shard import assign, cell_ms, families
from runner.spec import load_spec
from runner.store import read_run

def by_flops(cells, count):  # main's assign before this change (runner/shard.py at 799761c)
    costed = sorted((-sum(flops(c.params) for c in g), min(c.key for c in g), g) for g in families(cells))
    loads = [(0, 0, i) for i in range(count)]
    owner = {}
    for cost, _, g in costed:
        load, held, i = heapq.heappop(loads)
        owner.update((c.key, i) for c in g)
        heapq.heappush(loads, (load - cost, held + 1, i))
    return owner

def loads(cells, owner, count, cost):
    out = [0.0] * count
    for c in cells:
        out[owner[c.key]] += cost(c)
    return out

def ratio(xs):
    return "∞" if min(xs) == 0 else f"{max(xs) / min(xs):.2f}"

names = set(load_all())
specs = sorted(Path("specs").glob("*.yaml")) + sorted(Path("specs/models").glob("*.yaml"))
print("| spec | cells | families | priced s | shards | priced s per shard, by FLOPs (before) | largest/smallest | priced s per shard, by price (after) | largest/smallest |")
print("|---|---|---|---|---|---|---|---|---|")
for path in specs:
    spec = load_spec(path, names)
    cells = expand(spec)
    fams = len(families(cells))
    count = min(4, fams)
    if count < 2:
        print(f"| {path.stem} | {len(cells)} | {fams} | — | 1 | — | — | — | — |"); continue
    ms = {c.key: cell_ms(c) for c in cells}
    cost = lambda c: ms[c.key] / 1000
    before = loads(cells, by_flops(cells, count), count, cost)
    after = loads(cells, assign(cells, count), count, cost)
    name = str(path.relative_to("specs"))[:-5]
    print(f"| {name} | {len(cells)} | {fams} | {sum(after):.0f} | {count} | {', '.join(f'{x:.0f}' for x in before)} | {ratio(before)} | {', '.join(f'{x:.0f}' for x in after)} | {ratio(after)} |")

# hopper-long by its measured warm durations of 2026-12-03
run = read_run(Path("docs/evidence/runs-20261203/hopper-long-warm-20261203-102524"))
spent = {c.key: c.duration_s for c in run.cells}
cells = expand(load_spec(Path("specs/hopper-long.yaml"), names))
print("hopper-long keys in run:", sum(c.key in spent for c in cells), "of", len(cells))
for count in (2, 3, 4):
    measured = lambda c: spent.get(c.key, 0.0)
    b = loads(cells, by_flops(cells, count), count, measured)
    a = loads(cells, assign(cells, count), count, measured)
    print(count, "measured before", [round(x, 1) for x in b], ratio(b), "after", [round(x, 1) for x in a], ratio(a))
