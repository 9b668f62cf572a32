"""JSON Schema (draft 2020-12) of the documents specdec.json_documents types, generated from
its TypedDicts: what scripts/json_schema.py writes to docs/schema/ and checks there.

A TypedDict becomes an object of its keys under ``$defs`` (named by its class, its docstring
the description): ``required`` the keys not ``NotRequired``, no keys beyond them (the producers
write none). ``X | None`` adds null; ``float`` is a number or null (NaN and ±inf are written
as null: acceptance.json_safe); ``list[X]`` an array of X, ``Length(n)`` exactly n of them;
``dict[str, X]`` an object of X values (``Any``: any JSON value); ``Literal[...]`` an enum.
The document itself is the root object, with ``schema_version`` first as ``json_document``
prints it.
"""

import inspect
import json
import types
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, Union, get_args, get_origin, get_type_hints, is_typeddict

from .json_documents import DeploymentDocument, Length, TuneGamma
from .report import JSON_SCHEMA_VERSION

DIALECT = "https://json-schema.org/draft/2020-12/schema"
Schema = dict[str, Any]

# the committed files, relative to the repository root: (the document's type, its title)
SCHEMA_FILES: dict[str, tuple[type, str]] = {
    "docs/schema/tune-gamma.schema.json": (TuneGamma, "tune-gamma --json"),
    "docs/schema/deployment.schema.json": (DeploymentDocument, "tune-gamma --deployment NAME --json"),
}
_SCALARS = {str: "string", int: "integer", bool: "boolean", type(None): "null"}


def document_schema(document: type, title: str) -> Schema:
    """The schema of ``document`` as printed: schema_version first, the TypedDicts it names in $defs."""
    defs: dict[str, Schema] = {}
    root = _object(document, defs)
    root["properties"] = {"schema_version": {"const": JSON_SCHEMA_VERSION}, **root["properties"]}
    root["required"] = ["schema_version", *root["required"]]
    root["description"] = (f"{root.get('description', '')} Generated from specdec/json_documents.py by "
                           f"scripts/json_schema.py (do not edit). A number is null where it is not finite "
                           f"(NaN, ±inf). Keys may be added in later versions, never renamed.").strip()
    return {"$schema": DIALECT, "title": title, **root, "$defs": dict(sorted(defs.items()))}


def schema_texts() -> dict[str, str]:
    """{path relative to the repository root: the file's text} of every committed schema."""
    return {path: _dumps(document_schema(doc, title)) + "\n" for path, (doc, title) in SCHEMA_FILES.items()}


def stale_files(root: Path) -> list[str]:
    """The committed schema files under ``root`` that are missing or differ from the code's."""
    return [path for path, text in schema_texts().items()
            if not (root / path).is_file() or (root / path).read_text(encoding="utf-8") != text]


def _dumps(value: Any, indent: str = "") -> str:
    """Indented JSON with each value that fits in 100 columns on one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(indent) + len(flat) <= 100 or not isinstance(value, (dict, list)) or not value:
        return flat
    inner = indent + "  "
    items = ([f"{inner}{json.dumps(k, ensure_ascii=False)}: {_dumps(v, inner)}" for k, v in value.items()]
             if isinstance(value, dict) else [inner + _dumps(v, inner) for v in value])
    brackets = "{}" if isinstance(value, dict) else "[]"
    return brackets[0] + "\n" + ",\n".join(items) + "\n" + indent + brackets[1]


def _object(td: Any, defs: dict[str, Schema]) -> Schema:
    properties, required = {}, []
    for key, hint in get_type_hints(td, include_extras=True).items():
        if get_origin(hint) is NotRequired:
            hint = get_args(hint)[0]
        else:
            required.append(key)
        properties[key] = _schema(hint, defs)
    out: Schema = {"type": "object"}
    if td.__doc__:
        out["description"] = inspect.cleandoc(td.__doc__)
    return out | {"properties": properties, "required": required, "additionalProperties": False}


def _schema(tp: Any, defs: dict[str, Schema]) -> Schema:
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        out = _schema(args[0], defs)
        for meta in args[1:]:
            if isinstance(meta, Length):
                out |= {"minItems": meta.n, "maxItems": meta.n}
        return out
    if is_typeddict(tp):
        if tp.__name__ not in defs:
            defs[tp.__name__] = {}  # taken before its keys are walked
            defs[tp.__name__] = _object(tp, defs)
        return {"$ref": f"#/$defs/{tp.__name__}"}
    if origin in (Union, types.UnionType):
        return _union([_schema(a, defs) for a in args if a is not type(None)], type(None) in args)
    if origin is Literal:
        return {"enum": list(args)}
    if origin is list:
        return {"type": "array", "items": _schema(args[0], defs)}
    if origin is dict and args[0] is str:
        return {"type": "object", "additionalProperties": _schema(args[1], defs)}
    if tp is Any:
        return {}  # any JSON value
    if tp is float:
        return {"type": ["number", "null"]}
    if tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    raise TypeError(f"no JSON Schema for {tp!r}")


def _union(parts: list[Schema], nullable: bool) -> Schema:
    """One type list where every part is a bare type (or there is one part with a type); else anyOf."""
    def types_of(s: Schema) -> list[str]:
        t = s["type"]
        return list(t) if isinstance(t, list) else [t]

    def add(names: list[str], more: list[str]) -> list[str]:
        return names + [n for n in more if n not in names]

    if all(set(p) == {"type"} for p in parts) or (len(parts) == 1 and "type" in parts[0]):
        names: list[str] = []
        for p in parts:
            names = add(names, types_of(p))
        names = add(names, ["null"] if nullable else [])
        return {**parts[0], "type": names if len(names) > 1 else names[0]}
    if len(parts) == 1 and "enum" in parts[0]:
        return {"enum": parts[0]["enum"] + ([None] if nullable else [])}
    return {"anyOf": parts + ([{"type": "null"}] if nullable else [])}
