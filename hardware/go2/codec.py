"""Byte layouts of the fixed-size IDL structs of `messages`, read from their dataclass fields.

- `zero(cls)`: a sample with every number 0 (arrays full length, strings empty).
- `c_layout(cls)`, `c_bytes(sample)`: the C struct of the same IDL on a little-endian machine
  (natural alignment, padding bytes zero), what the CRC (`crc`) is computed over: LowCmd_ 812
  bytes, LowState_ 1180.
- `fast_cdr`: a class decorator giving a fixed-size type an encoder and a decoder of one
  `struct` call each (XCDR1 little endian, the body laid out by `cdr_layout`) in place of
  Cyclone's per-field Python machinery; any other encoding goes to Cyclone's.

Needs `cyclonedds==0.10.2` (the `go2` extra). No `from __future__ import annotations` here:
the field types are read at run time.
"""

import functools
import struct
import typing
from dataclasses import fields

from cyclonedds.idl import IdlStruct, types


def fast_cdr(cls):
    """Give a fixed-size IdlStruct an encoder and decoder of one `struct` call each instead of
    Cyclone's per-field Python machinery (LowState_: about 10x faster): XCDR1 little-endian,
    what Cyclone writes by default for these final types. `cdr_layout` gives the body layout;
    the tests compare the bytes with Cyclone's own encoder. Anything else (XCDR2, big endian, a
    buffer) goes to Cyclone's. Methods are set on the class, not inherited: Cyclone reads a
    base class as IDL inheritance."""

    def serialize(self, buffer=None, endianness=None, use_version_2=None) -> bytes:
        if buffer is not None or endianness is not None or use_version_2:
            return IdlStruct.serialize(self, buffer, endianness, use_version_2)
        packer, flatten, _ = _cdr_codec(type(self))
        return CDR_LE_HEADER + packer.pack(*flatten(self))

    def deserialize(klass, data, has_header=True, use_version_2=None):
        data = bytes(data)
        if not has_header or use_version_2 or data[:2] != CDR_LE_HEADER[:2]:
            return IdlStruct.deserialize.__func__(klass, data, has_header, use_version_2)
        packer, _, build = _cdr_codec(klass)
        return build(packer.unpack_from(data, 4))

    cls.serialize = serialize
    cls.deserialize = classmethod(deserialize)
    return cls


CDR_LE_HEADER = b"\x00\x01\x00\x00"  # encapsulation: plain CDR (XCDR1), little endian


# --------------------------------------------------------------------------- zero samples
_PRIMITIVES = {  # IDL name -> struct format character (size = alignment)
    "uint8": "B", "int8": "b", "uint16": "H", "int16": "h", "uint32": "I", "int32": "i",
    "uint64": "Q", "int64": "q", "float32": "f", "float64": "d",
}  # fmt: skip


@functools.cache
def _field_types(cls) -> list:
    """`[(name, annotated type)]` of an IdlStruct dataclass, in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f.name, hints[f.name]) for f in fields(cls)]


def _describe(t):
    """`("prim", char)`, `("struct", cls)`, `("array", inner, n)`, `("other", t)`."""
    meta = getattr(t, "__metadata__", None)
    if meta:
        m = meta[0]
        if isinstance(m, str) and m in _PRIMITIVES:
            return ("prim", _PRIMITIVES[m])
        if isinstance(m, types.array):
            return ("array", m.subtype, m.length)
    if isinstance(t, type) and issubclass(t, IdlStruct):
        return ("struct", t)
    return ("other", t)


def zero(cls):
    """A sample of `cls` with every number 0 (arrays full length, strings empty)."""
    values = {}
    for name, t in _field_types(cls):
        values[name] = _zero_value(t)
    return cls(**values)


def _zero_value(t):
    d = _describe(t)
    if d[0] == "prim":
        return 0.0 if d[1] in "fd" else 0
    if d[0] == "struct":
        return zero(d[1])
    if d[0] == "array":
        return [_zero_value(d[1]) for _ in range(d[2])]
    if t is bool:
        return False
    if t is str:
        return ""
    return []  # sequences


# --------------------------------------------------------------------------- C layout
def c_layout(cls) -> tuple[str, int, int]:
    """`(struct format, size, alignment)` of the C struct of an IdlStruct of fixed size on a
    little-endian machine: each member at a multiple of its alignment (a primitive's size, a
    struct's largest member alignment), the size rounded up to the alignment; padding as `x`."""
    out, offset, align = [], 0, 1
    for _, t in _field_types(cls):
        fmt, size, a = _c_member(t)
        pad = -offset % a
        if pad:
            out.append(f"{pad}x")
        out.append(fmt)
        offset += pad + size
        align = max(align, a)
    tail = -offset % align
    if tail:
        out.append(f"{tail}x")
    return "".join(out), offset + tail, align


def _c_member(t) -> tuple[str, int, int]:
    d = _describe(t)
    if d[0] == "prim":
        size = struct.calcsize("<" + d[1])
        return d[1], size, size
    if d[0] == "struct":
        return c_layout(d[1])
    if d[0] == "array":
        fmt, size, a = _c_member(d[1])
        if _describe(d[1])[0] == "prim":
            return f"{d[2]}{fmt}", d[2] * size, a
        return fmt * d[2], d[2] * size, a
    raise TypeError(f"{t} has no fixed C layout")


def _flattener(cls):
    """A function `sample -> tuple` of the numbers of a `cls` sample in declaration order (the
    order of `c_layout`'s format), generated once per class: a generic walk costs ~10x more,
    and the LowCmd CRC is computed 500 times a second."""

    def expression(name: str, t, depth: int) -> str:
        d = _describe(t)
        if d[0] == "prim":
            return f"{name},"
        if d[0] == "struct":
            return "".join(expression(f"{name}.{f}", ft, depth) for f, ft in _field_types(d[1]))
        if d[0] == "array":
            if _describe(d[1])[0] == "prim":
                return f"*{name},"
            item = f"m{depth}"
            inner = expression(item, d[1], depth + 1)
            return f"*(v for {item} in {name} for v in ({inner})),"
        raise TypeError(f"{t} has no fixed C layout")

    body = "".join(expression(f"s.{f}", t, 0) for f, t in _field_types(cls))
    return eval(f"lambda s: ({body})")  # noqa: S307 (generated from the type's own fields)


_STRUCTS: dict = {}


def c_bytes(sample) -> bytes:
    """`sample` packed as its C struct (`c_layout`), little-endian, padding zero."""
    cls = type(sample)
    if cls not in _STRUCTS:
        _STRUCTS[cls] = (struct.Struct("<" + c_layout(cls)[0]), _flattener(cls))
    packer, flatten = _STRUCTS[cls]
    return packer.pack(*flatten(sample))


# --------------------------------------------------------------------------- leaf offsets
def leaf_offsets(cls, layout: str) -> list[tuple[str, str, int]]:
    """`[(path, struct char, byte offset)]` of every number of a fixed-size IdlStruct, in
    declaration order (the order of `_flattener`): offsets in its C struct (`layout="c"`, as
    `c_layout`) or in its XCDR1 body (`"cdr"`, as `cdr_layout`; the body follows the 4-byte
    encapsulation header). Paths read `motor_cmd[3].q`, `imu_state.quaternion[0]`."""
    if layout not in ("c", "cdr"):
        raise ValueError(f"layout must be 'c' or 'cdr', got {layout!r}")
    out: list = []

    def walk(path: str, t, offset: int) -> int:
        d = _describe(t)
        if d[0] == "prim":
            size = struct.calcsize("<" + d[1])
            offset += -offset % (size if layout == "c" else min(size, 8))
            out.append((path, d[1], offset))
            return offset + size
        if d[0] == "struct":
            start = offset
            if layout == "c":
                _, size, align = c_layout(d[1])
                start = offset = offset + -offset % align
            for name, ft in _field_types(d[1]):
                offset = walk(f"{path}.{name}", ft, offset)
            return start + size if layout == "c" else offset
        if d[0] == "array":
            for k in range(d[2]):
                offset = walk(f"{path}[{k}]", d[1], offset)
            return offset
        raise TypeError(f"{t} has no fixed {layout} layout")

    offset = 0
    for name, t in _field_types(cls):
        offset = walk(name, t, offset)
    return out


# --------------------------------------------------------------------------- fast CDR codec
def cdr_layout(cls) -> str:
    """`struct` format of the XCDR1 body of a fixed-size IdlStruct: every primitive aligned to
    its size (at most 8) from the start of the body, nested structs inline (not aligned as a
    unit, no trailing padding, unlike the C layout)."""
    out, offset = [], 0

    def member(t) -> None:
        nonlocal offset
        d = _describe(t)
        if d[0] == "struct":
            for _, ft in _field_types(d[1]):
                member(ft)
            return
        if d[0] == "array":
            inner = _describe(d[1])
            if inner[0] == "prim":
                align(inner[1])
                out.append(f"{d[2]}{inner[1]}")
                offset += d[2] * struct.calcsize("<" + inner[1])
            else:
                for _ in range(d[2]):
                    member(d[1])
            return
        if d[0] == "prim":
            align(d[1])
            out.append(d[1])
            offset += struct.calcsize("<" + d[1])
            return
        if t is bool:
            out.append("?")
            offset += 1
            return
        raise TypeError(f"{t} has no fixed CDR layout")

    def align(char: str) -> None:
        nonlocal offset
        pad = -offset % min(struct.calcsize("<" + char), 8)
        if pad:
            out.append(f"{pad}x")
            offset += pad

    for _, t in _field_types(cls):
        member(t)
    return "".join(out)


def _builder(cls):
    """A function `values (tuple) -> cls sample`, the inverse of `_flattener(cls)`."""
    lines, counter = [], iter(range(10**6))

    def build(t, depth: int) -> str:
        d = _describe(t)
        if d[0] == "prim":
            return f"v[{next(counter)}]"
        if d[0] == "struct":
            args = ", ".join(build(ft, depth) for _, ft in _field_types(d[1]))
            name = f"C{len(lines)}"
            lines.append((name, d[1]))
            return f"{name}({args})"
        if d[0] == "array":
            inner = _describe(d[1])
            if inner[0] == "prim":
                start = next(counter)
                for _ in range(d[2] - 1):
                    next(counter)
                kind = "bytes" if inner[1] == "B" else "list"  # as Cyclone decodes them
                return f"{kind}(v[{start}:{start + d[2]}])"
            return "[" + ", ".join(build(d[1], depth + 1) for _ in range(d[2])) + "]"
        raise TypeError(f"{t} has no fixed CDR layout")

    args = ", ".join(build(t, 0) for _, t in _field_types(cls))
    namespace = {name: c for name, c in lines}
    namespace["C"] = cls
    return eval(f"lambda v: C({args})", namespace)  # noqa: S307 (from the type's own fields)


_CODECS: dict = {}


def _cdr_codec(cls):
    if cls not in _CODECS:
        packer = struct.Struct("<" + cdr_layout(cls))
        _CODECS[cls] = (packer, _flattener(cls), _builder(cls))
    return _CODECS[cls]
