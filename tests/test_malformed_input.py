"""Malformed, truncated and corrupted artifacts: a ValueError with a message, never a crash."""

import random
import zlib

import pytest

from artifacts import PROGRAMS, VERSIONS, artifact
from jax_metal_plugin import _native


def parse_or_value_error(data):
    try:
        _native.parse_artifact(data)
        _native.place_artifact(data)
    except ValueError as e:
        assert str(e), "errors must say what is wrong"


def test_garbage_and_empty():
    for data in [b"", b"ML", b"ML\xefR", b"ML\xefR\x06", b"not bytecode at all", bytes(1000), b"\xff" * 64]:
        with pytest.raises(ValueError):
            _native.parse_artifact(data)


@pytest.mark.parametrize("version", [VERSIONS[0], VERSIONS[-1]])
@pytest.mark.parametrize("name", ["dot_argmax", "while", "gather_scatter"])
def test_truncation_at_every_point(name, version):
    data = artifact(name, version)
    step = max(1, len(data) // 400)
    for cut in list(range(0, len(data), step)) + [len(data) - 1]:
        with pytest.raises(ValueError):
            _native.parse_artifact(data[:cut])


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_random_byte_flips(name):
    rng = random.Random(zlib.crc32(name.encode()))
    data = artifact(name, VERSIONS[-1])
    for _ in range(300):
        corrupt = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            corrupt[rng.randrange(len(corrupt))] = rng.randrange(256)
        parse_or_value_error(bytes(corrupt))


def test_huge_counts_do_not_allocate():
    data = bytearray(artifact("elementwise", VERSIONS[-1]))
    # Every byte after the header set to 0x00 makes varints read as 8-byte giants.
    for start in range(20, min(len(data), 200), 7):
        corrupt = bytearray(data)
        corrupt[start:start + 9] = b"\x00\xff\xff\xff\xff\xff\xff\xff\x7f"
        parse_or_value_error(bytes(corrupt))
