"""Median and spread of bench_runner's JSON rows, by spec, label and cold/warm."""
import json, sys, statistics, glob, re
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/bench-runner-*.json")):
    if len(sys.argv) > 2 and not re.search(sys.argv[2], f):
        continue
    for r in json.load(open(f)):
        m = re.match(r"(.+)-(before|after\w*)-(cold|warm)", r["run_id"])
        key = (m.group(1), m.group(2), m.group(3))
        rows.setdefault(key, []).append(r)
def fmt(vals):
    return f"{statistics.median(vals):.1f} ({min(vals):.1f}-{max(vals):.1f})"
print("| spec | runner | cache | n | process s | idle before first cell s | outside cells s | in cells s | idle between cells s | after last s |")
print("|---|---|---|---|---|---|---|---|---|---|")
for key in sorted(rows):
    rs = rows[key]
    g = lambda k: [r["gpu"][k] for r in rs]
    print(f"| {key[0]} | {key[1]} | {key[2]} | {len(rs)} | {fmt([r['process_s'] for r in rs])} | {fmt(g('before_s'))} | "
          f"{fmt([r['process_s'] - r['in_cells_s'] for r in rs])} | {fmt([r['in_cells_s'] for r in rs])} | {fmt(g('between_s'))} | {fmt(g('after_s'))} |")
