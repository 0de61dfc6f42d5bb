"""Load Kafka's official JSON message schemas.

Kafka describes every request, response and header in JSON files
(``clients/src/main/resources/common/message/*.json``).  kafka-python's wheel
ships an up-to-date copy of them, so we read them from the installed package
instead of vendoring them: the codec is *generated* from Kafka's own
definitions, never written per message by hand.

The files are JSON with ``//`` comments; :func:`strip_comments` removes those
without touching ``//`` inside string literals (e.g. URLs in "about" texts).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache
import importlib.util
import sysconfig
from pathlib import Path

#: Kafka's primitive field types, as spelled in the schemas.
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
     "string", "bytes", "records", "uuid"}
)

_SNAKE_1 = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SNAKE_2 = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def snake(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``; ``TopicIDs`` -> ``topic_ids``."""
    return _SNAKE_2.sub("_", _SNAKE_1.sub("_", name)).lower()


def strip_comments(text: str) -> str:
    """Remove ``//`` comments that are outside string literals."""
    out = []
    for line in text.splitlines():
        in_str = False
        esc = False
        cut = len(line)
        for i, ch in enumerate(line):
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = not in_str
            elif ch == "/" and not in_str and line.startswith("//", i):
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


@dataclass(frozen=True)
class Versions:
    """A version range as Kafka writes it: ``"0+"``, ``"1-3"``, ``"5"`` or ``"none"``."""

    lo: int
    hi: int  # inclusive; a large number for "N+"

    @classmethod
    def parse(cls, text: str | None) -> "Versions":
        if text is None or text == "none":
            return cls(1, 0)  # empty
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), 1 << 15)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, v: int) -> bool:
        return self.lo <= v <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


@dataclass
class FieldSpec:
    name: str            # Kafka's name, e.g. "ProducerId"
    attr: str            # snake_case attribute name
    type: str            # "int32", "[]TopicData", "TopicData", ...
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    flexible_override: Versions | None
    default: object
    ignorable: bool
    struct: "StructSpec | None" = None  # for struct and []struct types
    about: str = ""

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def elem_type(self) -> str:
        return self.type[2:] if self.is_array else self.type


@dataclass
class StructSpec:
    name: str
    fields: list[FieldSpec] = field(default_factory=list)


@dataclass
class MessageSpec:
    name: str                 # "ProduceRequest"
    type: str                 # "request" | "response" | "header" | "data"
    api_key: int | None
    valid: Versions
    flexible: Versions
    root: StructSpec
    latest_unstable: bool = False


def _parse_default(ftype: str, raw, nullable: Versions):
    if ftype.startswith("[]"):
        return None if raw == "null" else ()
    if raw is None:
        if ftype in ("string",):
            return ""
        if ftype in ("bytes",):
            return b""
        if ftype == "records":
            return None
        if ftype == "bool":
            return False
        if ftype == "float64":
            return 0.0
        if ftype == "uuid":
            return b"\x00" * 16
        if ftype in PRIMITIVES:
            return 0
        return "struct"
    if raw == "null":
        return None
    if ftype == "bool":
        return str(raw).lower() == "true"
    if ftype in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
        return int(str(raw), 0)
    if ftype == "float64":
        return float(raw)
    return raw


def _build_struct(name: str, fields_json: list, common: dict[str, list]) -> StructSpec:
    st = StructSpec(name)
    for fj in fields_json:
        ftype = fj["type"]
        nullable = Versions.parse(fj.get("nullableVersions"))
        fs = FieldSpec(
            name=fj["name"],
            attr=snake(fj["name"]),
            type=ftype,
            # Kafka's generator: a tagged field without "versions" exists in its taggedVersions
            versions=Versions.parse(fj.get("versions", fj.get("taggedVersions"))),
            nullable=nullable,
            tagged=Versions.parse(fj.get("taggedVersions")),
            tag=fj.get("tag"),
            flexible_override=(Versions.parse(fj["flexibleVersions"]) if "flexibleVersions" in fj else None),
            default=_parse_default(ftype, fj.get("default"), nullable),
            ignorable=bool(fj.get("ignorable", False)),
            about=fj.get("about", ""),
        )
        elem = fs.elem_type
        if elem not in PRIMITIVES:
            sub = fj.get("fields")
            if sub is None:
                sub = common[elem]
            fs.struct = _build_struct(elem, sub, common)
        st.fields.append(fs)
    return st


def parse_message(text: str) -> MessageSpec:
    d = json.loads(strip_comments(text))
    common = {c["name"]: c["fields"] for c in d.get("commonStructs", [])}
    root = _build_struct(d["name"], d["fields"], common)
    return MessageSpec(
        name=d["name"],
        type=d["type"],
        api_key=d.get("apiKey"),
        valid=Versions.parse(d["validVersions"]),
        flexible=Versions.parse(d.get("flexibleVersions", "none")),
        root=root,
        latest_unstable=bool(d.get("latestVersionUnstable", False)),
    )


def schema_dirs() -> list[Path]:
    """Where the JSON schemas live: kafka-python's copy of Kafka's, then the
    project's own directory of internal-topic schemas (``schemas/``).

    The wheel's directory is found without importing kafka-python: its package
    imports its whole client (docs/measurements.md), which every broker start
    would pay. The interpreter's own install comes first: a client driver may run an older
    kafka-python release first on its PYTHONPATH (``kafka-python@2.2.15``), with fewer schemas
    or none."""
    found = [Path(p) / "kafka" for p in dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
    spec = importlib.util.find_spec("kafka")
    if spec is not None and spec.submodule_search_locations:
        found.append(Path(spec.submodule_search_locations[0]))
    resources = [d / "protocol" / "schemas" / "resources" for d in found]
    resources = [d for d in resources if (d / "RequestHeader.json").is_file()]
    if not resources:
        raise ImportError("kafka-python is not installed: its wheel carries Kafka's JSON message schemas")
    dirs = [resources[0]]
    own = Path(__file__).with_name("schemas")
    if own.is_dir():
        dirs.append(own)
    return dirs


@cache
def load_all() -> dict[str, MessageSpec]:
    """Every message spec by name (``"ProduceRequest"``, ``"RequestHeader"``...)."""
    out: dict[str, MessageSpec] = {}
    for d in schema_dirs():
        for p in sorted(d.glob("*.json")):
            spec = parse_message(p.read_text(encoding="utf-8"))
            out[spec.name] = spec
    return out
