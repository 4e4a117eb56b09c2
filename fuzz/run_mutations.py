"""A mutation fuzzer needing nothing but Python: mutates seed artifacts (byte flips, truncations,
splices, varint giants) and feeds them to jmp_read_artifact in batches of subprocesses, so a crash is
caught, not fatal. Crashing inputs are saved to fuzz/crashes/ to become regression tests.

    python fuzz/run_mutations.py --tool build/jmp_read_artifact --iterations 20000
"""

import argparse
import pathlib
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))


def mutate(rng, data, seeds):
    d = bytearray(data)
    for _ in range(rng.randint(1, 6)):
        kind = rng.random()
        if kind < 0.5 and d:
            d[rng.randrange(len(d))] = rng.randrange(256)
        elif kind < 0.65 and d:
            del d[rng.randrange(len(d)):]
        elif kind < 0.8 and d:
            i = rng.randrange(len(d))
            d[i:i + 9] = b"\x00\xff\xff\xff\xff\xff\xff\xff\x7f"
        elif kind < 0.9:
            other = rng.choice(seeds)
            i, j = rng.randrange(len(d) + 1), rng.randrange(len(other) + 1)
            d = d[:i] + other[j:j + rng.randint(1, 64)] + d[i:]
        elif d:
            i = rng.randrange(len(d))
            d[i:i] = bytes([d[i]]) * rng.randint(1, 16)
    return bytes(d)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True, help="path of jmp_read_artifact (an ASan build finds more)")
    p.add_argument("--iterations", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from artifacts import PROGRAMS, VERSIONS, artifact
    seeds = [artifact(n, v) for n in PROGRAMS for v in VERSIONS]
    rng = random.Random(args.seed)
    crashes = pathlib.Path(__file__).resolve().parent / "crashes"
    found = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "input.bin"
        for i in range(args.iterations):
            data = mutate(rng, rng.choice(seeds), seeds)
            path.write_bytes(data)
            r = subprocess.run([args.tool, str(path), "--lower"], capture_output=True)
            if r.returncode not in (0, 1):
                crashes.mkdir(exist_ok=True)
                (crashes / f"crash-{args.seed}-{i}.bin").write_bytes(data)
                found += 1
                print(f"iteration {i}: exit {r.returncode}\n{r.stderr.decode(errors='replace')[-2000:]}")
    print(f"{args.iterations} inputs, {found} crashes")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
