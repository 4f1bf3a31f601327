#!/usr/bin/env python3
"""Two builds' `clbt bench --only step,arguments --json` reports side by side.

    tools/bench/compare_ab.py --a A1.json [A2.json ...] --b B1.json [B2.json ...]
                        [--names A B]

Each build ran the same sections in interleaved rounds (tools/gpu/step_ab.sh);
a figure is the median over its rounds. Per step record: the whole step, a
step with no row change and enqueue_step's host time, each over the empty
kernel's figure measured beside it, and the row updates' host time; per
arguments row: the enqueue and the call over the empty kernel's. Ratios are
taken within one report (a run's step against that run's empty kernel), so
that the two builds compare although the machine's floor moves between them.
"""
import argparse
import json
import statistics


def load(paths):
    return [json.load(open(path)) for path in paths]


def records(reports, section):
    """name -> list of records, one per report, in the reports' order."""
    rows = {}
    for report in reports:
        for record in report.get(section, []):
            rows.setdefault(record["name"], []).append(record)
    return rows


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(record, top, bottom):
    if top not in record or bottom not in record or not record[bottom]:
        return None
    return record[top] / record[bottom]


def figure(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def step_table(a, b, names):
    columns = [("step/empty", lambda r: ratio(r, "step_us", "empty_us"), 2),
               ("no change/empty",
                lambda r: ratio(r, "no_changes_us", "empty_us"), 2),
               ("enqueue/empty",
                lambda r: ratio(r, "enqueue_us", "empty_enqueue_us"), 2),
               ("updates us", lambda r: r.get("updates_us"), 2)]
    rows_a, rows_b = records(a, "step"), records(b, "step")
    header = ["step record"]
    for title, _, _ in columns:
        header += [f"{title} {names[0]}", f"{title} {names[1]}"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for name in rows_b:
        cells = [name]
        for _, take, digits in columns:
            for rows in (rows_a, rows_b):
                cells.append(figure(median(take(r) for r in rows.get(name, [])),
                                    digits))
        print("| " + " | ".join(cells) + " |")


def calls_table(a, b, names):
    rows_a, rows_b = records(a, "step_calls"), records(b, "step_calls")
    if not rows_b:
        return
    print()
    print(f"| step record | calls besides clSetKernelArg {names[0]} | "
          f"{names[1]} | clSetKernelArg {names[0]} | {names[1]} |")
    print("| --- | --- | --- | --- | --- |")
    for name in rows_b:
        cells = [name]
        for key in ("besides_set_kernel_arg", "clSetKernelArg"):
            for rows in (rows_a, rows_b):
                cells.append(figure(median(r.get(key, 0)
                                           for r in rows.get(name, [])), 0))
        print("| " + " | ".join(cells) + " |")


def arguments_table(a, b, names):
    rows_a, rows_b = records(a, "arguments"), records(b, "arguments")
    print()
    print(f"| arguments row | arguments {names[0]} | {names[1]} | "
          f"enqueue over {names[0]} | {names[1]} | call over {names[0]} | "
          f"{names[1]} |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in dict.fromkeys(list(rows_a) + list(rows_b)):
        cells = [name]
        for key, digits in (("arguments", 0), ("enqueue_over", 2),
                            ("call_over", 2)):
            for rows in (rows_a, rows_b):
                cells.append(figure(median(r.get(key)
                                           for r in rows.get(name, [])),
                                    digits))
        print("| " + " | ".join(cells) + " |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a", nargs="+", required=True)
    parser.add_argument("--b", nargs="+", required=True)
    parser.add_argument("--names", nargs=2, default=["A", "B"])
    args = parser.parse_args()
    a, b = load(args.a), load(args.b)
    device = b[0].get("device", {})
    print(f"device: {device.get('name', '?')}, driver "
          f"{device.get('driver', '?')}; {len(a)} and {len(b)} rounds, "
          f"{device.get('runs', '?')} runs each")
    print()
    step_table(a, b, args.names)
    calls_table(a, b, args.names)
    arguments_table(a, b, args.names)


if __name__ == "__main__":
    main()
