"""Other installed packages that register a JAX platform named "metal".

Two PJRT plugins cannot share a platform name: the second registration fails inside JAX, and which one
is second depends on the order JAX happens to import plugins in. So the plugin looks for the others
before registering and, when it finds one, steps aside with a message naming both packages and what to
do, whatever the order: the outcome never depends on which plugin loads last.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import pkgutil

# Distributions known to register "metal" (any case), and the plugin modules they install.
KNOWN = {
    "metaljax": "jax_plugins.metal",       # registers "metal"
    "jax-metal": "jax_plugins.metal_plugin",  # Apple's, registers "METAL"
}
OURS = "jax-metal-plugin"


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def others() -> list[tuple[str, str]]:
    """(package, description) of each other installed plugin for "metal", e.g.
    ("metaljax", "metaljax 0.11.9 (module jax_plugins.metal)")."""
    found: dict[str, tuple[str, str]] = {}
    for ep in importlib.metadata.entry_points(group="jax_plugins"):
        dist = getattr(ep, "dist", None)
        name = _normalise(dist.metadata["Name"]) if dist is not None else ""
        if name in KNOWN or (name != OURS and ep.value in KNOWN.values()):
            version = dist.version if dist is not None else "?"
            found[ep.value] = (name, f"{name} {version} (module {ep.value})")
    try:
        import jax_plugins  # the namespace package JAX scans too
        namespace = [m.name for m in pkgutil.iter_modules(jax_plugins.__path__, "jax_plugins.")]
    except ImportError:
        namespace = []
    for module in namespace:
        for dist_name, known_module in KNOWN.items():
            if module == known_module and module not in found:
                found[module] = (dist_name, f"{dist_name} (module {module})")
    return sorted(found.values())


def registered_elsewhere(backend_factories) -> list[tuple[str, str]]:
    """The "metal" platforms (any case) an unknown plugin registered earlier in this process."""
    return [("the package that registered it", f"a plugin registered as {name!r} earlier in this process")
            for name in sorted(backend_factories) if name.lower() == "metal"]


def message(clashes: list[tuple[str, str]]) -> str:
    packages = " ".join(dict.fromkeys(package for package, _ in clashes))
    return (f"jax-metal-plugin: another installed package also provides a JAX platform named \"metal\": "
            f"{'; '.join(d for _, d in clashes)}. Two plugins cannot share one platform name, so "
            f"jax-metal-plugin did not register \"metal\" in this process (the other package serves it, if it "
            f"can load). To use jax-metal-plugin: pip uninstall {packages}. To keep the other: "
            f"pip uninstall jax-metal-plugin.")
