"""Two builds' step figures side by side: what a change costs the step.

    python3 tools/compare_step_ab.py OUT_DIR [--json OUT]

OUT_DIR holds `clbt bench --only step --json` reports of two builds run
alternately on one device, base_<i>.json and new_<i>.json (what
tools/gpu_race_ab.sh writes). Per row of the bench's step table it prints
each build's step over the empty kernel (the median over its runs; each run
already a median of --runs steps, each beside an empty kernel's call on the
same queue) and new over base; per row of step_device each build's device
work (a steady step's device time less an empty kernel's) and new over base;
then per table the median of the rows' ratios with their range, over all
rows and over the steady ones. A ratio above 1 is a slower step. Exits 1 when
the two builds' reports do not hold the same rows.
"""
import argparse
import glob
import json
import os
import statistics
import sys

# Each table: its key, the figure compared, and what the figure is.
TABLES = (
    ("step", "step_over_empty", "step / empty kernel's call"),
    ("step_device", "work_us", "device work us (step - empty kernel)"),
)


def load(out_dir, build):
    """The build's reports, in run order."""
    paths = sorted(glob.glob(os.path.join(out_dir, f"{build}_*.json")),
                   key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))
    reports = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            reports.append(json.load(f))
    return reports


def figures(reports, table, key):
    """Row name -> the median of the figure over the reports."""
    by_row = {}
    for report in reports:
        for row in report.get(table, []):
            if row.get(key) is not None:
                by_row.setdefault(row["name"], []).append(row[key])
    return {name: statistics.median(values) for name, values in by_row.items()}


def summary(ratios):
    if not ratios:
        return "no rows"
    return (f"{statistics.median(ratios):.3f} "
            f"({min(ratios):.3f} to {max(ratios):.3f}, {len(ratios)} rows)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args()
    base, new = load(args.out_dir, "base"), load(args.out_dir, "new")
    if not base or not new:
        print(f"compare_step_ab.py: no base_*.json or new_*.json in {args.out_dir}",
              file=sys.stderr)
        return 1
    print(f"{len(base)} base and {len(new)} new runs, alternating")
    result = {}
    failed = False
    for table, key, what in TABLES:
        a, b = figures(base, table, key), figures(new, table, key)
        if set(a) != set(b):
            print(f"{table}: rows differ: {sorted(set(a) ^ set(b))}", file=sys.stderr)
            failed = True
        rows = [name for name in a if name in b]
        print(f"\n{table}: {what}, medians over runs; new / base")
        print(f"  {'name':50} {'base':>9} {'new':>9} {'new/base':>9}")
        result[table] = []
        for name in rows:
            ratio = b[name] / a[name] if a[name] else None
            result[table].append({"name": name, "base": a[name], "new": b[name],
                                  "ratio": ratio})
            shown = f"{ratio:9.3f}" if ratio is not None else f"{'-':>9}"
            print(f"  {name:50} {a[name]:9.2f} {b[name]:9.2f} {shown}")
        ratios = [r["ratio"] for r in result[table] if r["ratio"] is not None]
        steady = [r["ratio"] for r in result[table]
                  if r["ratio"] is not None and "/churn" not in r["name"]]
        print(f"  median of the rows' ratios: {summary(ratios)}; "
              f"steady rows: {summary(steady)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
