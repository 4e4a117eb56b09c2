"""What the plugin installed in this process: the platform, each patch of JAX and each lowering for metal.

Every piece records itself here when initialize() installs it: active, or switched off with the reason
(most often a JAX internal this release lacks). ``jax_metal_plugin.status()`` returns the record; printed
(or shown in a REPL) it is a table, and ``as_dict()`` gives it for reports.
"""

from __future__ import annotations

import dataclasses
import threading

KINDS = ("platform", "patch", "lowering")


@dataclasses.dataclass(frozen=True)
class Feature:
    """One thing the plugin installs. `detail` says what it does when active, why it is off otherwise."""

    name: str
    kind: str  # one of KINDS
    active: bool
    detail: str


class Status(tuple):
    """The features the plugin installed, in the order it installed them."""

    def __new__(cls, features=()):
        return super().__new__(cls, features)

    def feature(self, name: str) -> Feature:
        for f in self:
            if f.name == name:
                return f
        raise KeyError(f"jax_metal_plugin.status(): no feature named {name!r}; "
                       f"known: {', '.join(f.name for f in self)}")

    @property
    def off(self) -> tuple[Feature, ...]:
        return tuple(f for f in self if not f.active)

    def as_dict(self) -> dict:
        return {"features": [dataclasses.asdict(f) for f in self]}

    def __str__(self) -> str:
        if not self:
            return ("jax-metal-plugin: not initialised in this process (JAX did not load the plugin: is it "
                    "installed in this environment? jax.devices() says why a backend failed)")
        width = max(len(f.name) for f in self)
        lines = [f"jax-metal-plugin: {len(self) - len(self.off)} of {len(self)} active"]
        for kind in KINDS:
            for f in (f for f in self if f.kind == kind):
                lines.append(f"  {f.kind:<8} {f.name:<{width}}  {'on ' if f.active else 'OFF'}  {f.detail}")
        return "\n".join(lines)

    __repr__ = __str__


_lock = threading.Lock()
_features: dict[str, Feature] = {}


def record(name: str, kind: str, active: bool, detail: str) -> None:
    """Records (or replaces) what happened to one feature."""
    if kind not in KINDS:
        raise ValueError(f"feature kind {kind!r} is not one of {KINDS}")
    with _lock:
        _features[name] = Feature(name, kind, active, detail)


def snapshot() -> Status:
    with _lock:
        return Status(_features.values())
