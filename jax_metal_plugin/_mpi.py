"""Where the plugin finds MPI for programs over several processes (jax.distributed under mpiexec).

The plugin loads MPI only when a client spans several processes. It prefers the library this process
has already loaded (mpi4py's, MPICH or Open MPI), then JAX_METAL_LIBMPI; this module points
JAX_METAL_LIBMPI at the `mpich` wheel's library in this environment (`pip install "jax-metal-plugin[mpi]"`)
when the user set nothing.
"""

from __future__ import annotations

import os
import sys

_NAME = "libmpi.12.dylib" if sys.platform == "darwin" else "libmpi.so.12"


def wheel_library() -> str | None:
    """The MPICH library the `mpich` wheel installed into this environment, if any."""
    for prefix in dict.fromkeys((sys.prefix, sys.exec_prefix)):
        path = os.path.join(prefix, "lib", _NAME)
        if os.path.exists(path):
            return path
    return None


def point_at_wheel() -> None:
    if os.environ.get("JAX_METAL_LIBMPI"):
        return
    path = wheel_library()
    if path:
        os.environ["JAX_METAL_LIBMPI"] = path
