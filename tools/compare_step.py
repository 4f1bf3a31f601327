"""clbt's whole step beside the seed's, case by case (tools/gpu_bench.sh runs it).

    python3 tools/compare_step.py SEED_JSON BENCH_JSON

SEED_JSON is what shared/anchors/seed_step.py --json writes (per case: step_us,
host_us, ...); BENCH_JSON is what `clbt bench --json` writes (its "step"
section: records named CASE/v1, CASE/persistent and CASE/persistent-export,
the persistent step with the export in it, with step_us and host_us).
Prints, per case and model, the two steps, clbt's over the seed's against the
goal (1/20 or less), and the host's share of a step on each side. Exits 1 when
a case is missing from either file.
"""
import json
import sys

GOAL = 1 / 20
MODELS = ("v1", "persistent", "persistent-export")


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: compare_step.py SEED_JSON BENCH_JSON")
    with open(argv[1], encoding="utf-8") as f:
        seed = json.load(f)
    with open(argv[2], encoding="utf-8") as f:
        bench = json.load(f)
    clbt = {record["name"]: record for record in bench.get("step", [])}
    rows, missing = [], []
    for case, theirs in seed.items():
        for model in MODELS:
            ours = clbt.get(f"{case}/{model}")
            if ours is None:
                missing.append(f"{case}/{model}")
                continue
            ratio = ours["step_us"] / theirs["step_us"]
            verdict = "met" if ratio <= GOAL else f"missed by {(ratio / GOAL - 1) * 100:.0f}%"
            rows.append((case, model, theirs["step_us"], ours["step_us"], ratio, verdict,
                         theirs["host_us"], ours["host_us"]))
    print(f"{'case':22} {'model':17} {'seed step':>10} {'clbt step':>10} {'clbt/seed':>10} "
          f"{'goal 1/20':>14} {'seed host':>10} {'clbt host':>10}")
    for case, model, seed_us, clbt_us, ratio, verdict, seed_host, clbt_host in rows:
        print(f"{case:22} {model:17} {seed_us:10.1f} {clbt_us:10.1f} {ratio:10.3f} "
              f"{verdict:>14} {seed_host:10.1f} {clbt_host:10.1f}")
    print("microseconds; step (medians) = row updates + commit + slot mapping (+ gather, "
          "+ export) to completion; host = the same, not waited for (the seed's a mean, clbt's a median)")
    if missing:
        print("not in " + argv[2] + ": " + ", ".join(missing), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
