"""How often metal's results equal XLA:CPU's bit for bit on random elementwise programs, and whether
they stay the same when every add's and multiply's operands swap (docs/multiply-add.md reports it).

    JAX_PLATFORMS=metal,cpu python scripts/measure_multiply_add.py --programs 10000

Each program (tests/arith_programs.py) runs forward and as its per-element gradient, in float32 and
float64, on both platforms and mirrored; programs are compiled in batches of independent programs
(their own inputs, their own results) to keep compile time down, which --check-batching compares with
one program at a time. Mismatches are written out (--mismatches) with the program, for classifying.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "metal,cpu")
os.environ.setdefault("JAX_ENABLE_X64", "1")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import arith_programs as ap  # noqa: E402

KINDS = ("forward", "gradient")
DTYPES = (np.float32, np.float64)


def build(program, kind, dtype):
    return ap.function(program, dtype) if kind == "forward" else ap.gradient(program, dtype)


def run_batch(platform, fns, args):
    dev = jax.devices(platform)[0]

    def together(all_args):
        return [f(*a) for f, a in zip(fns, all_args)]

    out = jax.jit(together)(jax.device_put(args, dev))
    return [jax.tree.map(np.asarray, o) for o in out]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--programs", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--batch", type=int, default=40)
    parser.add_argument("--mismatches", default="/tmp/multiply_add_mismatches.jsonl")
    parser.add_argument("--summary", default=None, help="write the counts as JSON here")
    parser.add_argument("--dtypes", default=",".join(np.dtype(d).name for d in DTYPES))
    parser.add_argument("--kinds", default=",".join(KINDS), help="forward, gradient or both")
    parser.add_argument("--check-batching", type=int, default=0, help="programs also run one at a time")
    args = parser.parse_args()

    programs = [ap.random_program(np.random.default_rng([args.seed, i])) for i in range(args.programs)]
    counts = collections.Counter()
    out = open(args.mismatches, "w")
    for kind in args.kinds.split(","):
        for dtype in [np.dtype(d).type for d in args.dtypes.split(",")]:
            name = f"{kind} {np.dtype(dtype).name}"
            for start in range(0, len(programs), args.batch):
                chunk = list(enumerate(programs[start:start + args.batch], start))
                ins = [ap.inputs(np.random.default_rng([args.seed, i, 1]), p, dtype) for i, p in chunk]
                fns = [build(p, kind, dtype) for _, p in chunk]
                mirrors = [build(p.mirror(), kind, dtype) for _, p in chunk]
                cpu, metal = run_batch("cpu", fns, ins), run_batch("metal", fns, ins)
                cpu_m, metal_m = run_batch("cpu", mirrors, ins), run_batch("metal", mirrors, ins)
                for (i, p), c, m, cm, mm in zip(chunk, cpu, metal, cpu_m, metal_m):
                    counts[name, "programs"] += 1
                    match = ap.same(c, m)
                    counts[name, "match"] += match
                    counts[name, "metal mirror same"] += ap.same(m, mm)
                    counts[name, "cpu mirror same"] += ap.same(c, cm)
                    counts[name, "match mirrored"] += ap.same(cm, mm)
                    if not match or not ap.same(m, mm):
                        out.write(json.dumps({"i": i, "kind": kind, "dtype": np.dtype(dtype).name, "match": match,
                                              "mirror_same": ap.same(m, mm), "cpu_mirror_same": ap.same(c, cm),
                                              "program": p.describe(), "nodes": p.nodes, "outputs": p.outputs,
                                              "n_inputs": p.n_inputs}) + "\n")
                print(f"{name}: {start + len(chunk)} programs, {counts[name, 'match']} match", file=sys.stderr,
                      flush=True)
            if args.check_batching:  # the first batch again, one program at a time, on cpu
                chunk = list(enumerate(programs[:min(args.check_batching, args.batch)]))
                ins = [ap.inputs(np.random.default_rng([args.seed, i, 1]), p, dtype) for i, p in chunk]
                batched = run_batch("cpu", [build(p, kind, dtype) for _, p in chunk], ins)
                counts[name, "batched differs from alone (cpu)"] = sum(
                    not ap.same(run_batch("cpu", [build(p, kind, dtype)], [x])[0], b)
                    for (_, p), x, b in zip(chunk, ins, batched))
    out.close()
    table = {f"{k[0]}: {k[1]}": v for k, v in sorted(counts.items())}
    print(json.dumps(table, indent=1))
    print(f"jax {jax.__version__}", file=sys.stderr)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"jax": jax.__version__, "counts": table}, f, indent=1)


if __name__ == "__main__":
    main()
