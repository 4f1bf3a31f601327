"""clbt's whole step beside the seed's and vLLM Model Runner V2's, case by case.

    python3 tools/bench/compare_step.py SEED_JSON BENCH_JSON [--mrv2 MRV2_JSON] [--json OUT]

SEED_JSON is what shared/anchors/seed_step.py --json writes (per case: step_us,
host_us, ...), run in the same device call as the bench (tools/gpu/bench.sh
does both). BENCH_JSON is what `clbt bench --json` writes: its "step" section
holds a record per case and model (CASE/v1, CASE/persistent,
CASE/persistent-export, CASE/persistent-export-all, and each of them churning,
CASE/MODEL/churn and CASE/MODEL/churn16) with step_us and host_us. MRV2_JSON,
where MRV2's own BlockTables step was measured in the same call, has the seed's
form ({case: {"step_us": ...}}); without it, MRV2's figures are those of
shared/notes/mrv2.md (issue 18's H200 runs, another device call: the fastest
of each measured range), and the output says so.

Prints a row per clbt step record: clbt's step over the seed's against issue
25's goal (at most 1/20: 20x faster) and over MRV2's (at most 1/10), with a
verdict each, and the host's share of a step on each side; a case that the
seed (or MRV2's figures) lacks, such as decode-1024-4groups, gets its row with
"-" there and no verdict. Then how many rows meet each goal. --json writes the
same rows. The seed and MRV2 figures are their steady decode steps: a churning
row sets clbt's churning step (more rows written) beside them. Exits 1 when a
case of the seed's lacks one of clbt's models or kinds of step.
"""
import argparse
import json
import sys

SEED_GOAL = 1 / 20
MRV2_GOAL = 1 / 10
MODELS = ("v1", "persistent", "persistent-export", "persistent-export-all")
KINDS = ("", "/churn", "/churn16")
# shared/notes/mrv2.md: MRV2's step on an H200 (issue 18), NVIDIA driver
# 580.159, torch 2.11, Triton 3.6; append for 1 row in 16, apply_staged_writes,
# gather_block_tables, compute_slot_mappings, synchronise. The fastest of each
# measured range, so that a ratio against it is the strictest.
MRV2_NOTES = {
    "decode-256-1group": (248.0, 264.0),
    "decode-1024-1group": (315.0, 368.0),
    "decode-256-4groups": (338.0, 355.0),
}


def verdict(ratio, goal):
    if ratio is None:
        return "no figure"
    return "met" if ratio <= goal else f"missed by {(ratio / goal - 1) * 100:.0f}%"


def mrv2_figures(path):
    """MRV2's step per case, and where the figures come from."""
    if path is None:
        ranges = ", ".join(f"{low:.0f}-{high:.0f}" for low, high in MRV2_NOTES.values())
        return ({case: low for case, (low, _) in MRV2_NOTES.items()},
                f"shared/notes/mrv2.md (H200, another device call; the fastest of {ranges} us)")
    with open(path, encoding="utf-8") as f:
        measured = json.load(f)
    return {case: record["step_us"] for case, record in measured.items()}, path


def split_name(name):
    """CASE/MODEL[/KIND] -> (CASE, MODEL + KIND)."""
    case, _, model = name.partition("/")
    return case, model


def row(case, model, ours, theirs, mrv2_us):
    seed_us = theirs["step_us"] if theirs else None
    over_seed = ours["step_us"] / seed_us if seed_us else None
    over_mrv2 = ours["step_us"] / mrv2_us if mrv2_us else None
    return {
        "case": case, "model": model,
        "seed_step_us": seed_us, "mrv2_step_us": mrv2_us, "clbt_step_us": ours["step_us"],
        "clbt_over_seed": over_seed, "seed_verdict": verdict(over_seed, SEED_GOAL),
        "clbt_over_mrv2": over_mrv2, "mrv2_verdict": verdict(over_mrv2, MRV2_GOAL),
        "seed_host_us": theirs["host_us"] if theirs else None, "clbt_host_us": ours["host_us"],
    }


def cell(value, width, digits):
    return f"{'-':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def print_rows(rows, mrv2_source):
    print(f"{'case':20} {'model':30} {'seed':>7} {'MRV2':>7} {'clbt':>7} {'clbt/seed':>9} "
          f"{'goal 1/20':>15} {'clbt/MRV2':>9} {'goal 1/10':>15} {'seed host':>9} {'clbt host':>9}")
    for r in rows:
        print(f"{r['case']:20} {r['model']:30} {cell(r['seed_step_us'], 7, 1)} "
              f"{cell(r['mrv2_step_us'], 7, 1)} {cell(r['clbt_step_us'], 7, 1)} "
              f"{cell(r['clbt_over_seed'], 9, 3)} {r['seed_verdict']:>15} "
              f"{cell(r['clbt_over_mrv2'], 9, 3)} {r['mrv2_verdict']:>15} "
              f"{cell(r['seed_host_us'], 9, 1)} {cell(r['clbt_host_us'], 9, 1)}")
    for goal, key in (("1/20 of the seed's", "seed_verdict"), ("1/10 of MRV2's", "mrv2_verdict")):
        judged = [r for r in rows if r[key] != "no figure"]
        met = sum(r[key] == "met" for r in judged)
        print(f"{goal} step: met in {met} of {len(judged)} rows")
    print("microseconds; step (medians) = row updates + commit + slot mapping (+ gather, "
          "+ export) to completion; host = the same, not waited for (the seed's a mean, "
          "clbt's a median); the seed's and MRV2's are steady steps, /churn rows clbt's "
          f"churning ones; MRV2: {mrv2_source}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seed_json")
    parser.add_argument("bench_json")
    parser.add_argument("--mrv2", help="MRV2's step per case, measured in the same call")
    parser.add_argument("--json", help="also write the rows as JSON")
    args = parser.parse_args(argv[1:])
    with open(args.seed_json, encoding="utf-8") as f:
        seed = json.load(f)
    with open(args.bench_json, encoding="utf-8") as f:
        bench = json.load(f)
    mrv2, mrv2_source = mrv2_figures(args.mrv2)
    clbt = {record["name"]: record for record in bench.get("step", [])}

    rows = []
    for name, ours in clbt.items():
        case, model = split_name(name)
        rows.append(row(case, model, ours, seed.get(case), mrv2.get(case)))
    missing = [f"{case}/{model}{kind}" for case in seed for model in MODELS for kind in KINDS
               if f"{case}/{model}{kind}" not in clbt]
    print_rows(rows, mrv2_source)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"mrv2_source": mrv2_source, "rows": rows}, f, indent=1)
    if missing:
        print(f"not in {args.bench_json}: " + ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
