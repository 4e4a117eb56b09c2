"""Another package that registers a JAX platform named "metal" beside ours: a clear message naming both
packages and what to do, the same outcome whichever plugin JAX imports first, and no crash."""

import os
import subprocess
import sys
import textwrap

import pytest

import jax_metal_plugin

# The stand-in registers "metal" (or "METAL") with our own library, so that JAX can run on it: the
# process works, and a second registration by us would show as JAX's plugin configuration error.
FAKE_PLUGIN = textwrap.dedent("""
    import os
    from jax_metal_plugin._jax_internals import xla_bridge  # as any plugin does, through JAX's internals

    def initialize():
        print("FAKE-INITIALIZED", flush=True)
        xla_bridge.register_plugin({name!r}, priority=500, library_path=os.environ["FAKE_LIBRARY"])
""")

PROGRAM = textwrap.dedent("""
    import jax, jax.numpy as jnp
    print("DEVICES", jax.devices())
    print("RESULT", float(jax.jit(lambda x: (x * 2).sum())(jnp.arange(4.0))))
""")


def make_site(root, *, dist, module, platform):
    """A site directory holding a namespace-package plugin and, if dist is given, its distribution."""
    pkg = root / "jax_plugins" / module.split(".")[-1]
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_PLUGIN.format(name=platform))
    if dist:
        info = root / f"{dist}-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.0.1\n")
        (info / "entry_points.txt").write_text(f"[jax_plugins]\nmetal = {module}\n")
    return root


def run_with(site, platforms):
    env = dict(os.environ, PYTHONPATH=str(site), FAKE_LIBRARY=jax_metal_plugin.library_path(),
               JAX_PLATFORMS=platforms)
    # cwd: "python -c" puts it on sys.path, and the checkout's own jax_metal_plugin has no library.
    return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300,
                          cwd=site)


@pytest.mark.parametrize("dist,module,platform", [
    ("metaljax", "jax_plugins.metal", "metal"),          # installed with its distribution metadata
    (None, "jax_plugins.metal_plugin", "METAL"),         # Apple's layout, found as a namespace module
], ids=["metaljax", "apple-jax-metal"])
def test_another_metal_plugin_gets_a_clear_message_and_nothing_breaks(tmp_path, dist, module, platform):
    site = make_site(tmp_path, dist=dist, module=module, platform=platform)
    r = run_with(site, platform + ",cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "FAKE-INITIALIZED" in r.stdout
    assert "RESULT 12.0" in r.stdout
    message = " ".join(r.stderr.split())
    assert "PlatformClashWarning" in message
    assert module in message and "jax-metal-plugin" in message
    assert f"pip uninstall {dist or 'jax-metal'}" in message and "pip uninstall jax-metal-plugin" in message
    # We stepped aside, so JAX never saw a second registration of the name.
    assert "Jax plugin configuration error" not in r.stderr, r.stderr[-3000:]


def test_without_another_plugin_there_is_no_message(tmp_path):
    r = run_with(tmp_path, "metal,cpu")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RESULT 12.0" in r.stdout
    devices = next(line for line in r.stdout.splitlines() if line.startswith("DEVICES"))
    assert "metal" in devices.lower(), devices
    assert "PlatformClashWarning" not in r.stderr


def test_a_platform_registered_earlier_by_an_unknown_plugin_is_a_clash():
    from jax_metal_plugin import _platform_clash

    clashes = _platform_clash.registered_elsewhere({"cpu": None, "METAL": None})
    assert len(clashes) == 1 and "'METAL'" in clashes[0][1]
    assert _platform_clash.registered_elsewhere({"cpu": None, "tpu": None}) == []
    assert "'METAL'" in _platform_clash.message(clashes)
