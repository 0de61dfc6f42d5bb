"""Compile Kafka's message schemas into Python classes and per-version codecs.

For each message we build one plain class per struct (``__slots__``,
snake_case attributes, Kafka's defaults), and for each *version* a pair of
functions generated as Python source and ``exec``-ed once, on first use.
Generating straight-line code per version keeps the hot paths (Produce,
Fetch) free of per-field interpretation overhead: a decoded field costs one
``struct.unpack_from`` call.

Wire rules implemented here (Kafka's ``MessageGenerator``):
- flexible versions use compact strings/bytes/arrays (unsigned varint of
  length + 1, 0 meaning null) and end every struct with a tagged-field
  section; a field may override flexibility (``RequestHeader.ClientId``);
- unknown tagged fields are skipped on read, as Kafka does;
- tagged fields are written only when they differ from their default;
- nullable structs carry an int8 presence marker (-1 null, 1 present).
"""

from __future__ import annotations

import struct as _struct
from typing import Any, Callable

from .schema import FieldSpec, MessageSpec, StructSpec

_MISSING = object()

_I8 = _struct.Struct(">b")
_I16 = _struct.Struct(">h")
_U16 = _struct.Struct(">H")
_I32 = _struct.Struct(">i")
_U32 = _struct.Struct(">I")
_I64 = _struct.Struct(">q")
_F64 = _struct.Struct(">d")

_FIXED = {
    "int8": ("_I8", 1),
    "int16": ("_I16", 2),
    "uint16": ("_U16", 2),
    "int32": ("_I32", 4),
    "uint32": ("_U32", 4),
    "int64": ("_I64", 8),
    "float64": ("_F64", 8),
}


class ProtocolError(Exception):
    """A frame that does not follow the schema (truncated, bad length...)."""


def read_uvarint(buf, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    pos += 1
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 28:  # at most 5 bytes, as Kafka's ByteUtils.readUnsignedVarint
            raise ProtocolError("unsigned varint is too long")


def uvarint_bytes(n: int) -> bytes:
    if n < 0x80:
        return _UV_SMALL[n] if n < len(_UV_SMALL) else bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_UV_SMALL = tuple(bytes((i,)) for i in range(128))


class Struct:
    """Base of every generated message/struct class."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()
    _spec: StructSpec

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (bytes as hex) — for transcripts and tests."""
        def conv(v):
            if isinstance(v, Struct):
                return v.to_dict()
            if isinstance(v, list):
                return [conv(x) for x in v]
            if isinstance(v, (bytes, bytearray, memoryview)):
                return bytes(v).hex()
            return v
        return {f: conv(getattr(self, f)) for f in self._fields}


def _default_expr(fs: FieldSpec, ns: dict, cls_of: dict[str, type]) -> str:
    """Python expression producing a fresh default value for field ``fs``."""
    d = fs.default
    if fs.is_array:
        return "None" if d is None else "[]"
    if fs.struct is not None:
        if d is None:
            return "None"
        key = f"_C_{fs.struct.name}"
        ns[key] = cls_of[fs.struct.name]
        return f"{key}()"
    key = f"_D_{id(fs)}"
    ns[key] = d
    return key


def build_classes(msg: MessageSpec) -> dict[str, type]:
    """One class per struct of ``msg``; nested classes hang off the root."""
    classes: dict[str, type] = {}

    def visit(st: StructSpec) -> None:
        if st.name in classes:
            return
        for f in st.fields:
            if f.struct is not None:
                visit(f.struct)
        attrs = tuple(f.attr for f in st.fields)
        cls = type(st.name, (Struct,), {"__slots__": attrs, "_fields": attrs, "_spec": st})
        classes[st.name] = cls
        # __init__ with Kafka's defaults; mutable defaults are created fresh.
        ns: dict[str, Any] = {"_M": _MISSING}
        params, body = [], []
        for f in st.fields:
            params.append(f"{f.attr}=_M")
            body.append(f"    self.{f.attr} = ({_default_expr(f, ns, classes)}) if {f.attr} is _M else {f.attr}")
        src = "def __init__(self, *, " + ", ".join(params) + "):\n" + ("\n".join(body) or "    pass") + "\n"
        if not params:
            src = "def __init__(self):\n    pass\n"
        exec(src, ns)
        cls.__init__ = ns["__init__"]
        for f in st.fields:
            if f.struct is not None:
                setattr(cls, f.struct.name, classes[f.struct.name])

    visit(msg.root)
    return classes


class _Gen:
    """Emits the decode/encode source of every struct of one message version."""

    def __init__(self, msg: MessageSpec, version: int, classes: dict[str, type]):
        self.msg = msg
        self.v = version
        self.flex = version in msg.flexible
        self.classes = classes
        self.ns: dict[str, Any] = {
            "_I8": _I8, "_I16": _I16, "_U16": _U16, "_I32": _I32, "_U32": _U32,
            "_I64": _I64, "_F64": _F64, "_uv": read_uvarint, "_uvb": uvarint_bytes,
            "_new": object.__new__, "ProtocolError": ProtocolError,
        }
        self.src: list[str] = []
        self.done: set[str] = set()
        self._n = 0

    def tmp(self, p: str) -> str:
        self._n += 1
        return f"{p}{self._n}"

    # ------------------------------------------------------------------ decode
    def dec_struct(self, st: StructSpec) -> str:
        fn = f"_dec_{st.name}"
        if fn in self.done:
            return fn
        self.done.add(fn)
        cls_key = f"_C_{st.name}"
        self.ns[cls_key] = self.classes[st.name]
        lines = [f"def {fn}(buf, pos):", f"    o = _new({cls_key})"]
        tagged = []
        for f in st.fields:
            if self.v not in f.versions:
                lines.append(f"    o.{f.attr} = {_default_expr(f, self.ns, self.classes)}")
            elif self.flex and self.v in f.tagged:
                lines.append(f"    o.{f.attr} = {_default_expr(f, self.ns, self.classes)}")
                tagged.append(f)
            else:
                self.dec_field(f, f"o.{f.attr}", lines, "    ")
        if self.flex:
            lines.append("    nt, pos = _uv(buf, pos)")
            lines.append("    for _ in range(nt):")
            lines.append("        tag, pos = _uv(buf, pos)")
            lines.append("        sz, pos = _uv(buf, pos)")
            lines.append("        end = pos + sz")
            lines.append("        if end > len(buf): raise ProtocolError('tagged field overruns the frame')")
            kw = "if"
            for f in tagged:
                lines.append(f"        {kw} tag == {f.tag}:")
                self.dec_field(f, f"o.{f.attr}", lines, "            ")
                kw = "elif"
            lines.append("        pos = end")
        lines.append("    return o, pos")
        self.src.append("\n".join(lines))
        return fn

    def _flex_field(self, f: FieldSpec) -> bool:
        if f.flexible_override is not None:
            return self.v in f.flexible_override
        return self.flex

    def dec_field(self, f: FieldSpec, tgt: str, lines: list[str], ind: str) -> None:
        compact = self._flex_field(f)
        if f.is_array:
            n = self.tmp("n")
            if compact:
                lines.append(f"{ind}{n}, pos = _uv(buf, pos)")
                lines.append(f"{ind}{n} -= 1")
            else:
                lines.append(f"{ind}{n} = _I32.unpack_from(buf, pos)[0]; pos += 4")
            lst = self.tmp("l")
            lines.append(f"{ind}if {n} < 0:")
            self._null(f, tgt, lines, ind + "    ")
            lines.append(f"{ind}else:")
            lines.append(f"{ind}    if {n} > len(buf) - pos: raise ProtocolError("
                         f"f'Tried to allocate a collection of size {{{n}}}, but there are only {{len(buf) - pos}} "
                         f"bytes remaining.')")
            lines.append(f"{ind}    {lst} = []")
            lines.append(f"{ind}    for _ in range({n}):")
            e = self.tmp("e")
            self.dec_value(f.elem_type, f, e, lines, ind + "        ", compact, in_array=True)
            lines.append(f"{ind}        {lst}.append({e})")
            lines.append(f"{ind}    {tgt} = {lst}")
        else:
            self.dec_value(f.type, f, tgt, lines, ind, compact, in_array=False)

    def _null(self, f: FieldSpec, tgt: str, lines: list[str], ind: str, element: bool = False) -> None:
        """A null length: None where the schema allows null at this version, else the frame is
        malformed -- Kafka's generated readers throw, and the request is refused at parse time.
        An array's elements are never nullable, whatever the array is."""
        if self.v in f.nullable and not element:
            lines.append(f"{ind}{tgt} = None")
        else:
            what = f"{f.name} element" if element else f.name
            lines.append(f"{ind}raise ProtocolError('non-nullable field {what} was serialized as null')")

    def dec_value(self, t: str, f: FieldSpec, tgt: str, lines, ind, compact, in_array) -> None:
        if t in _FIXED:
            s, w = _FIXED[t]
            lines.append(f"{ind}{tgt} = {s}.unpack_from(buf, pos)[0]; pos += {w}")
        elif t == "bool":
            lines.append(f"{ind}{tgt} = buf[pos] != 0; pos += 1")
        elif t == "uuid":
            lines.append(f"{ind}{tgt} = buf[pos:pos + 16]; pos += 16")
        elif t in ("string", "bytes", "records"):
            n = self.tmp("n")
            if compact:
                lines.append(f"{ind}{n}, pos = _uv(buf, pos)")
                lines.append(f"{ind}{n} -= 1")
            elif t == "string":
                lines.append(f"{ind}{n} = _I16.unpack_from(buf, pos)[0]; pos += 2")
            else:
                lines.append(f"{ind}{n} = _I32.unpack_from(buf, pos)[0]; pos += 4")
            lines.append(f"{ind}if {n} < 0:")
            self._null(f, tgt, lines, ind + "    ", in_array)
            lines.append(f"{ind}else:")
            if t == "string":
                lines.append(f"{ind}    if {n} > 0x7fff: raise ProtocolError("
                             f"f'string field {f.name} had invalid length {{{n}}}')")
            lines.append(f"{ind}    if pos + {n} > len(buf): raise ProtocolError('field {f.name} overruns the frame')")
            if t == "string":
                lines.append(f"{ind}    {tgt} = str(buf[pos:pos + {n}], 'utf-8'); pos += {n}")
            else:
                lines.append(f"{ind}    {tgt} = buf[pos:pos + {n}]; pos += {n}")
        else:  # struct
            fn = self.dec_struct(f.struct)
            if not in_array and self.v in f.nullable:
                lines.append(f"{ind}if _I8.unpack_from(buf, pos)[0] < 0:")
                lines.append(f"{ind}    {tgt} = None; pos += 1")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    {tgt}, pos = {fn}(buf, pos + 1)")
            else:
                lines.append(f"{ind}{tgt}, pos = {fn}(buf, pos)")

    # ------------------------------------------------------------------ encode
    def enc_struct(self, st: StructSpec) -> str:
        fn = f"_enc_{st.name}"
        if fn in self.done:
            return fn
        self.done.add(fn)
        lines = [f"def {fn}(o, w):"]
        tagged = []
        for f in st.fields:
            if self.v not in f.versions:
                continue
            if self.flex and self.v in f.tagged:
                tagged.append(f)
                continue
            self.enc_field(f, f"o.{f.attr}", lines, "    ")
        if self.flex:
            if not tagged:
                lines.append("    w(b'\\x00')")
            else:
                lines.append("    tg = []")
                for f in sorted(tagged, key=lambda x: x.tag):
                    cond = self._nondefault(f, f"o.{f.attr}")
                    lines.append(f"    if {cond}:")
                    lines.append("        bl = []; _w = w; w = bl.append")
                    self.enc_field(f, f"o.{f.attr}", lines, "        ")
                    lines.append(f"        w = _w; tg.append(({f.tag}, b''.join(bl)))")
                lines.append("    w(_uvb(len(tg)))")
                lines.append("    for t, d in tg:")
                lines.append("        w(_uvb(t)); w(_uvb(len(d))); w(d)")
        if len(lines) == 1:
            lines.append("    pass")
        self.src.append("\n".join(lines))
        return fn

    def _nondefault(self, f: FieldSpec, expr: str) -> str:
        if f.is_array:
            return f"{expr}" if f.default is not None else f"{expr} is not None"
        if f.struct is not None:
            if f.default is None:
                return f"{expr} is not None"
            key = f"_DS_{f.struct.name}"
            self.ns[key] = self.classes[f.struct.name]()
            return f"{expr} != {key}"
        key = f"_D_{id(f)}"
        self.ns[key] = f.default
        return f"{expr} != {key}"

    def enc_field(self, f: FieldSpec, expr: str, lines: list[str], ind: str) -> None:
        compact = self._flex_field(f)
        if f.is_array:
            lst = self.tmp("l")
            lines.append(f"{ind}{lst} = {expr}")
            lines.append(f"{ind}if {lst} is None:")
            lines.append(f"{ind}    w(b'\\x00')" if compact else f"{ind}    w(b'\\xff\\xff\\xff\\xff')")
            lines.append(f"{ind}else:")
            if compact:
                lines.append(f"{ind}    w(_uvb(len({lst}) + 1))")
            else:
                lines.append(f"{ind}    w(_I32.pack(len({lst})))")
            e = self.tmp("e")
            lines.append(f"{ind}    for {e} in {lst}:")
            self.enc_value(f.elem_type, f, e, lines, ind + "        ", compact, in_array=True)
        else:
            self.enc_value(f.type, f, expr, lines, ind, compact, in_array=False)

    def enc_value(self, t: str, f: FieldSpec, expr: str, lines, ind, compact, in_array) -> None:
        if t in _FIXED:
            s, _ = _FIXED[t]
            lines.append(f"{ind}w({s}.pack({expr}))")
        elif t == "bool":
            lines.append(f"{ind}w(b'\\x01' if {expr} else b'\\x00')")
        elif t == "uuid":
            lines.append(f"{ind}w(bytes({expr}))")
        elif t in ("string", "bytes", "records"):
            v = self.tmp("v")
            lines.append(f"{ind}{v} = {expr}")
            lines.append(f"{ind}if {v} is None:")
            if compact:
                lines.append(f"{ind}    w(b'\\x00')")
            elif t == "string":
                lines.append(f"{ind}    w(b'\\xff\\xff')")
            else:
                lines.append(f"{ind}    w(b'\\xff\\xff\\xff\\xff')")
            lines.append(f"{ind}else:")
            if t == "string":
                lines.append(f"{ind}    {v} = {v}.encode('utf-8')")
            if compact:
                lines.append(f"{ind}    w(_uvb(len({v}) + 1)); w({v})")
            elif t == "string":
                lines.append(f"{ind}    w(_I16.pack(len({v}))); w({v})")
            else:
                lines.append(f"{ind}    w(_I32.pack(len({v}))); w({v})")
        else:
            fn = self.enc_struct(f.struct)
            if not in_array and self.v in f.nullable:
                lines.append(f"{ind}if {expr} is None:")
                lines.append(f"{ind}    w(b'\\xff')")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    w(b'\\x01'); {fn}({expr}, w)")
            else:
                lines.append(f"{ind}{fn}({expr}, w)")

    def compile(self) -> tuple[Callable, Callable]:
        d = self.dec_struct(self.msg.root)
        e = self.enc_struct(self.msg.root)
        code = "\n\n".join(self.src) + "\n"
        exec(compile(code, f"<kafka {self.msg.name} v{self.v}>", "exec"), self.ns)
        return self.ns[d], self.ns[e]


class Codec:
    """Decoder/encoder of one message, compiled lazily per version."""

    def __init__(self, spec: MessageSpec):
        self.spec = spec
        self.classes = build_classes(spec)
        self.cls = self.classes[spec.root.name]
        self._dec: dict[int, Callable] = {}
        self._enc: dict[int, Callable] = {}

    def _compile(self, version: int) -> None:
        if version not in self.spec.valid:
            raise ValueError(f"{self.spec.name} has no version {version} (valid {self.spec.valid.lo}-{self.spec.valid.hi})")
        d, e = _Gen(self.spec, version, self.classes).compile()
        self._dec[version] = d
        self._enc[version] = e

    def decode(self, version: int, buf: bytes, pos: int = 0):
        """Decode from ``buf`` at ``pos``; returns ``(obj, new_pos)``."""
        fn = self._dec.get(version)
        if fn is None:
            self._compile(version)
            fn = self._dec[version]
        try:
            return fn(buf, pos)
        except (IndexError, _struct.error, UnicodeDecodeError) as exc:
            raise ProtocolError(f"cannot read {self.spec.name} v{version}: {exc}") from exc

    def encode_into(self, version: int, obj, write: Callable[[bytes], None]) -> None:
        fn = self._enc.get(version)
        if fn is None:
            self._compile(version)
            fn = self._enc[version]
        fn(obj, write)

    def encode(self, version: int, obj) -> bytes:
        parts: list[bytes] = []
        self.encode_into(version, obj, parts.append)
        return b"".join(parts)
