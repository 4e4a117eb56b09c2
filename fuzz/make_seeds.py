"""Writes seed artifacts (made by jaxlib at several StableHLO versions) into a corpus directory."""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from artifacts import PROGRAMS, VERSIONS, artifact  # noqa: E402


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in PROGRAMS:
        for version in VERSIONS:
            (out / f"{name}-{version}.mlirbc").write_bytes(artifact(name, version))
    print(f"wrote {len(PROGRAMS) * len(VERSIONS)} seeds to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "fuzz/corpus")
