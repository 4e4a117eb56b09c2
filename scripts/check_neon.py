#!/usr/bin/env python3
"""Checks that the host executor's hot loops were vectorised in an arm64 build: each function below, in
the object files of scripts/build-macos.sh (OUTDIR/obj), holds NEON vector instructions (128-bit
arrangements: .4s float32/int32, .2d float64/int64, .16b bytes), seen with llvm-objdump.

    python3 scripts/check_neon.py OUTDIR/obj

A loop the compiler left scalar (a helper not inlined, a select it would not if-convert) shows up here
as a function without them. Exits 1 naming each such function.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

# object file (the build names it after its source path) -> functions whose loops must be vectorised
HOT_LOOPS = {
    "cpp_exec_host_host_vector_loops.cc.o": [
        "AddF32", "SubF32", "MulF32", "DivF32", "MaxF32", "MinF32", "AddF64", "MulF64", "MaxF64",
        # (not MulU64: NEON has no 64-bit integer multiply, so that loop stays scalar by design)
        "AddU32", "XorU32", "ShlU32", "AddU64", "ShrI64", "LtF64", "GtF32", "LogF64", "SqrtF64", "Select32",
        "Select64", "OrOfShiftsU32", "OrOfShiftsU64"],
    "cpp_exec_host_host_elementwise.cc.o": ["ExpF32", "TanhF32", "SigmoidF32"],
    "cpp_exec_host_host_reduce.cc.o": ["RowSumsF32", "ColumnSumsF32"],
    "cpp_exec_host_host_multiply_add.cc.o": ["FmaF32", "FmaF64", "ChainFmaF32", "ChainFmaF64"],
}
# "fadd.4s v2, v1, v2" (Apple's syntax, what llvm-objdump prints for a Mach-O) or "fadd v2.4s, v1.4s, v2.4s"
VECTOR = re.compile(r"\.(4s|2d|16b|8h)\s+v\d+|\bv\d+\.(4s|2d|16b|8h)\b")


def objdump():
    for name in ("llvm-objdump-16", "llvm-objdump"):
        if shutil.which(name):
            return name
    return None


def functions(disassembly: str) -> dict[str, str]:
    """Demangled function name (without parameters) -> its instructions."""
    out, name, body = {}, None, []
    for line in disassembly.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            if name:
                out.setdefault(name, "")
                out[name] += "\n".join(body)
            full = m.group(1)
            called = re.findall(r"(\w+)\(", full)  # the name before the parameter list
            name = called[0] if called else full
            body = []
        elif name:
            body.append(line)
    if name:
        out[name] = out.get(name, "") + "\n".join(body)
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tool = objdump()
    if not tool:
        print("check_neon.py: no llvm-objdump", file=sys.stderr)
        return 2
    scalar = []
    for obj, names in HOT_LOOPS.items():
        path = os.path.join(argv[1], obj)
        text = subprocess.run([tool, "-d", "-C", "--no-show-raw-insn", path], capture_output=True, text=True,
                              check=True).stdout
        funcs = functions(text)
        for name in names:
            body = funcs.get(name)
            if body is None:
                scalar.append(f"{obj}: {name} not found")
            elif not VECTOR.search(body):
                scalar.append(f"{obj}: {name} has no NEON vector instruction")
            else:
                print(f"{name}: {len(VECTOR.findall(body))} NEON vector instructions")
    for line in scalar:
        print(line, file=sys.stderr)
    return 1 if scalar else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
