"""python -m jax_metal_plugin COMMAND: `check` compares every op the Metal side runs with the host
executor (docs/self-check.md)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv[0] == "check":
        from . import _check

        return _check.main(argv[1:])
    print(f"python -m jax_metal_plugin: unknown command {argv[0]!r} (try: check)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
