"""A small reader of 64-bit Mach-O files: what scripts/check_wheel.py needs to know about the plugin library
(architecture, file type, minimum macOS, the libraries it links, the symbols it exports, whether its code
signature matches its bytes). Our own, from Apple's published file format (mach-o/loader.h, the dyld
export trie, the code-signing blob layout); no third-party tools.

MachOError says what is malformed; a reader that guessed would let a broken library pass the checks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct

MH_MAGIC_64 = 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
CPU_TYPE_ARM64 = 0x0100000C
CPU_TYPE_X86_64 = 0x01000007
MH_DYLIB = 6
PLATFORM_MACOS = 1

LC_SYMTAB = 0x2
LC_LOAD_DYLIB = 0xC
LC_ID_DYLIB = 0xD
LC_CODE_SIGNATURE = 0x1D
LC_LAZY_LOAD_DYLIB = 0x20
LC_DYLD_INFO = 0x22
LC_VERSION_MIN_MACOSX = 0x24
LC_BUILD_VERSION = 0x32
LC_LOAD_WEAK_DYLIB = 0x80000018
LC_RPATH = 0x8000001C
LC_REEXPORT_DYLIB = 0x8000001F
LC_DYLD_INFO_ONLY = 0x80000022
LC_LOAD_UPWARD_DYLIB = 0x80000023
LC_DYLD_EXPORTS_TRIE = 0x80000033
LINKED_DYLIB_COMMANDS = (LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LAZY_LOAD_DYLIB, LC_LOAD_UPWARD_DYLIB)

CSMAGIC_EMBEDDED_SIGNATURE = 0xFADE0CC0
CSMAGIC_CODEDIRECTORY = 0xFADE0C02
CS_HASHES = {1: ("sha1", 20), 2: ("sha256", 32), 3: ("sha256", 32)}  # 3: sha256 truncated to 20 bytes

N_EXT, N_TYPE, N_SECT = 0x01, 0x0E, 0x0E

CPU_NAMES = {CPU_TYPE_ARM64: "arm64", CPU_TYPE_X86_64: "x86_64"}


class MachOError(ValueError):
    pass


@dataclasses.dataclass
class MachO:
    cputype: int
    filetype: int
    platform: int | None = None  # from LC_BUILD_VERSION; PLATFORM_MACOS for LC_VERSION_MIN_MACOSX
    minos: tuple[int, int, int] | None = None
    install_name: str | None = None
    linked: list[str] = dataclasses.field(default_factory=list)
    rpaths: list[str] = dataclasses.field(default_factory=list)
    exports: set[str] = dataclasses.field(default_factory=set)
    signature: str | None = None  # None: unsigned; "ok"; otherwise what does not match

    @property
    def arch(self) -> str:
        return CPU_NAMES.get(self.cputype, hex(self.cputype))


def decode_version(value: int) -> tuple[int, int, int]:
    """Mach-O's packed xxxx.yy.zz version."""
    return value >> 16, (value >> 8) & 0xFF, value & 0xFF


def encode_version(major: int, minor: int = 0, patch: int = 0) -> int:
    return (major << 16) | (minor << 8) | patch


def _cstring(data: bytes, start: int, end: int | None = None) -> str:
    stop = data.find(b"\0", start, end if end is not None else len(data))
    if stop < 0:
        raise MachOError(f"unterminated string at offset {start}")
    return data[start:stop].decode("utf-8", errors="replace")


def _uleb(data: bytes, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end:
            raise MachOError("export trie: truncated number")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos
        if shift > 63:
            raise MachOError("export trie: number too long")


def _export_trie(data: bytes, start: int, size: int) -> set[str]:
    end = start + size
    if end > len(data):
        raise MachOError("export trie past the end of the file")
    names, stack, seen = set(), [(start, "")], set()
    while stack:
        node, prefix = stack.pop()
        if node in seen or not start <= node < end:
            raise MachOError(f"export trie: bad node offset {node - start}")
        seen.add(node)
        terminal, pos = _uleb(data, node, end)
        if terminal:
            names.add(prefix)
        pos += terminal
        if pos >= end:
            raise MachOError("export trie: truncated node")
        children = data[pos]
        pos += 1
        for _ in range(children):
            edge = _cstring(data, pos, end)
            pos += len(edge.encode()) + 1
            child, pos = _uleb(data, pos, end)
            stack.append((start + child, prefix + edge))
    return names


def _symtab_exports(data: bytes, symoff: int, nsyms: int, stroff: int, strsize: int) -> set[str]:
    if symoff + 16 * nsyms > len(data) or stroff + strsize > len(data):
        raise MachOError("symbol table past the end of the file")
    names = set()
    for i in range(nsyms):
        strx, ntype, _sect, _desc, _value = struct.unpack_from("<IBBHQ", data, symoff + 16 * i)
        if ntype & N_EXT and ntype & N_TYPE == N_SECT and strx < strsize:
            names.add(_cstring(data, stroff + strx, stroff + strsize))
    return names


def _verify_signature(data: bytes, offset: int, size: int) -> str:
    """Checks every page hash of every code directory against the file's bytes: "ok" or what differs.
    arm64 macOS refuses to load a library without a valid signature (ad-hoc is enough)."""
    if offset + size > len(data) or size < 12:
        return "the code signature lies past the end of the file"
    magic, _length, count = struct.unpack_from(">III", data, offset)
    if magic != CSMAGIC_EMBEDDED_SIGNATURE:
        return f"the code signature has magic {magic:#x}, not an embedded signature"
    directories = 0
    for i in range(count):
        _slot, blob = struct.unpack_from(">II", data, offset + 12 + 8 * i)
        base = offset + blob
        if struct.unpack_from(">I", data, base)[0] != CSMAGIC_CODEDIRECTORY:
            continue
        directories += 1
        (_m, _len, _ver, _flags, hash_offset, _ident, _special, n_code, code_limit, hash_size, hash_type, _platform,
         page_log2) = struct.unpack_from(">IIIIIIIIIBBBB", data, base)
        if hash_type not in CS_HASHES:
            return f"code directory with unknown hash type {hash_type}"
        algorithm, _ = CS_HASHES[hash_type]
        page = 1 << page_log2 if page_log2 else code_limit
        if code_limit > offset or n_code != -(-code_limit // page):
            return "the code directory does not cover the code up to the signature"
        for slot in range(n_code):
            chunk = data[slot * page:min((slot + 1) * page, code_limit)]
            want = data[base + hash_offset + slot * hash_size:base + hash_offset + (slot + 1) * hash_size]
            if hashlib.new(algorithm, chunk).digest()[:hash_size] != want:
                return f"page {slot} of the code does not match its signed hash (modified after signing?)"
    return "ok" if directories else "the code signature holds no code directory"


def parse(data: bytes, arch: int = CPU_TYPE_ARM64) -> MachO:
    """Reads a thin 64-bit Mach-O, or the `arch` slice of a universal one."""
    if len(data) < 8:
        raise MachOError("too short for a Mach-O header")
    if struct.unpack_from(">I", data)[0] in (FAT_MAGIC, FAT_MAGIC_64):
        wide = struct.unpack_from(">I", data)[0] == FAT_MAGIC_64
        (count,) = struct.unpack_from(">I", data, 4)
        for i in range(count):
            if wide:
                cpu, _sub, off, size, _align, _res = struct.unpack_from(">iiQQII", data, 8 + 32 * i)
            else:
                cpu, _sub, off, size, _align = struct.unpack_from(">iiIII", data, 8 + 20 * i)
            if cpu == arch:
                return parse(data[off:off + size], arch)
        raise MachOError(f"universal binary without a {CPU_NAMES.get(arch, hex(arch))} slice")
    if len(data) < 32:
        raise MachOError("too short for a Mach-O header")
    magic, cputype, _sub, filetype, ncmds, sizeofcmds, _flags, _res = struct.unpack_from("<IiiIIIII", data)
    if magic != MH_MAGIC_64:
        raise MachOError(f"not a 64-bit little-endian Mach-O (magic {magic:#x})")
    if 32 + sizeofcmds > len(data):
        raise MachOError("load commands past the end of the file")
    macho = MachO(cputype=cputype, filetype=filetype)
    pos, end = 32, 32 + sizeofcmds
    for _ in range(ncmds):
        if pos + 8 > end:
            raise MachOError("load commands overrun sizeofcmds")
        cmd, size = struct.unpack_from("<II", data, pos)
        if size < 8 or pos + size > end:
            raise MachOError(f"load command {cmd:#x} has a bad size {size}")
        if cmd == LC_BUILD_VERSION:
            platform, minos = struct.unpack_from("<II", data, pos + 8)
            macho.platform, macho.minos = platform, decode_version(minos)
        elif cmd == LC_VERSION_MIN_MACOSX and macho.minos is None:
            macho.platform, macho.minos = PLATFORM_MACOS, decode_version(struct.unpack_from("<I", data, pos + 8)[0])
        elif cmd in LINKED_DYLIB_COMMANDS or cmd == LC_ID_DYLIB:
            name = _cstring(data, pos + struct.unpack_from("<I", data, pos + 8)[0], pos + size)
            if cmd == LC_ID_DYLIB:
                macho.install_name = name
            else:
                macho.linked.append(name)
        elif cmd == LC_RPATH:
            macho.rpaths.append(_cstring(data, pos + struct.unpack_from("<I", data, pos + 8)[0], pos + size))
        elif cmd in (LC_DYLD_INFO, LC_DYLD_INFO_ONLY):
            export_off, export_size = struct.unpack_from("<II", data, pos + 40)
            if export_size:
                macho.exports |= _export_trie(data, export_off, export_size)
        elif cmd == LC_DYLD_EXPORTS_TRIE:
            macho.exports |= _export_trie(data, *struct.unpack_from("<II", data, pos + 8))
        elif cmd == LC_SYMTAB:
            macho.exports |= _symtab_exports(data, *struct.unpack_from("<IIII", data, pos + 8))
        elif cmd == LC_CODE_SIGNATURE:
            macho.signature = _verify_signature(data, *struct.unpack_from("<II", data, pos + 8))
        pos += size
    return macho
