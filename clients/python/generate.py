"""Writes src/switchboard_client/protocol.py, the session protocol's types as TypedDicts,
from the published JSON Schema (schema/protocol.schema.json at the repository root,
generated from the Rust types). `python3 generate.py --check` fails instead when the file
differs.

A small generator for the subset of JSON Schema that schemars writes for the protocol:
$ref to $defs, const, enum, oneOf/anyOf, nullable types, objects with properties and
required, arrays, additionalProperties, and schemas without a type (any JSON value).
"""

from __future__ import annotations

import json
import keyword
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA = HERE.parent.parent / "schema" / "protocol.schema.json"
OUT = HERE / "src" / "switchboard_client" / "protocol.py"
SHAPING = ("type", "$ref", "const", "enum", "anyOf", "oneOf", "properties", "items", "additionalProperties")


def pascal(name: str) -> str:
    return "".join(word[:1].upper() + word[1:] for word in name.split("_"))


def ref_name(ref: str) -> str:
    return ref.removeprefix("#/$defs/")


def union(types: list[str]) -> str:
    unique = list(dict.fromkeys(types))
    return " | ".join(unique)


def render(node: object) -> str:
    """The Python type of a schema node."""
    if node is True or not isinstance(node, dict) or not any(k in node for k in SHAPING):
        return "JsonValue"
    if "$ref" in node and "properties" not in node:
        return ref_name(node["$ref"])
    if "const" in node:
        return f"Literal[{json.dumps(node['const'])}]"
    if "enum" in node:
        return f"Literal[{', '.join(json.dumps(v) for v in node['enum'])}]"
    alternatives = node.get("anyOf") or (None if "properties" in node else node.get("oneOf"))
    if alternatives:
        consts = [a["const"] for a in alternatives if "const" in a]
        if consts and len(consts) == len(alternatives):
            return f"Literal[{', '.join(json.dumps(c) for c in consts)}]"
        if consts and all("const" in a or a.get("type") == "string" for a in alternatives):
            # A catalogue a newer peer may add to: the known names, or any other string.
            return f"Literal[{', '.join(json.dumps(c) for c in consts)}] | str"
        return union([render(a) for a in alternatives])
    kind = node.get("type")
    if isinstance(kind, list):
        return union([render({**node, "type": k}) for k in kind])
    if kind == "string":
        return "str"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "null":
        return "None"
    if kind == "array":
        return f"list[{render(node.get('items', True))}]"
    if kind == "object" and "properties" not in node:
        extra = node.get("additionalProperties")
        return f"dict[str, {render(extra) if isinstance(extra, dict) else 'JsonValue'}]"
    raise ValueError(f"unsupported schema node {node}")


def docstring(text: str | None, indent: str) -> str:
    if not text:
        return ""
    body = "\n\n".join(
        paragraph
        if paragraph.startswith("```")
        else "\n".join(textwrap.wrap(paragraph, 96, break_long_words=False, break_on_hyphens=False))
        for paragraph in text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').split("\n\n")
    )
    lines = [f"{indent}{line}" if line else "" for line in f'"""{body}\n"""'.splitlines()]
    return "\n".join(lines) + "\n"


def typed_dict(name: str, node: dict, base: str | None = None) -> str:
    """A TypedDict: class syntax, or the functional one where a field is a Python keyword."""
    required = set(node.get("required", []))
    exactly_one = node.get("oneOf") if all(set(a) == {"required"} for a in node.get("oneOf", [{}])) else None
    fields = []
    for field, prop in node.get("properties", {}).items():
        kind = render(prop)
        if field not in required or exactly_one:
            kind = f"NotRequired[{kind}]" if field not in required else kind
        fields.append((field, kind, prop.get("description")))
    description = node.get("description", "")
    if exactly_one:
        names = ", ".join(f"`{a['required'][0]}`" for a in exactly_one)
        description += f"\n\nExactly one of {names}."
    if node.get("additionalProperties") is True:
        description += "\n\nOther fields are allowed (a server refuses the ones it does not know)."
    if any(keyword.iskeyword(field) for field, _, _ in fields):
        entries = "\n".join(f"        {json.dumps(field)}: {kind}," for field, kind, _ in fields)
        out = f"{name} = TypedDict(\n    {json.dumps(name)},\n    {{\n{entries}\n    }},\n)\n"
        return comment(description) + out
    out = f"class {name}({base or 'TypedDict'}):\n{docstring(description, '    ')}"
    for field, kind, doc in fields:
        out += f"    {field}: {kind}\n{docstring(doc, '    ')}"
    if not fields and not description:
        out += "    pass\n"
    return out


def comment(text: str) -> str:
    if not text:
        return ""
    lines = []
    for paragraph in text.split("\n\n"):
        lines.extend(textwrap.wrap(paragraph, 96, break_long_words=False) or [""])
        lines.append("")
    return "".join(f"# {line}\n" if line else "#\n" for line in lines[:-1])


def messages(name: str, definition: dict) -> str:
    out = []
    names = []
    for variant in definition["oneOf"]:
        kind = variant["properties"]["type"]["const"]
        type_name = f"{pascal(kind)}Message"
        names.append((kind, type_name))
        if "$ref" in variant:
            out.append(typed_dict(type_name, variant, base=ref_name(variant["$ref"])))
        else:
            out.append(typed_dict(type_name, variant))
    members = "\n".join(f"    {type_name}," for _, type_name in names)
    text = "\n\n".join(out)
    text += f"\n\n{comment(definition.get('description'))}{name} = Union[\n{members}\n]\n"
    constant = "".join(f"_{c}" if c.isupper() and i else c for i, c in enumerate(name)).upper() + "_TYPES"
    listed = "\n".join(f"    {json.dumps(kind)}," for kind, _ in names)
    text += f"\n# The `type` of every {name}.\n{constant}: tuple[str, ...] = (\n{listed}\n)\n"
    return text


def generate() -> str:
    schema = json.loads(SCHEMA.read_text())
    version = schema["x-protocol-version"]
    parts = [
        f'"""The session protocol\'s types ({schema["title"]}): {schema["$id"]}\n\n'
        "Generated from schema/protocol.schema.json by generate.py. Do not edit.\n\"\"\"\n\n"
        "from __future__ import annotations\n\n"
        "from typing import Any, Literal, NotRequired, TypedDict, Union\n\n"
        "#: The version of the session protocol these types describe.\n"
        f"PROTOCOL_VERSION = {json.dumps(version)}\n\n"
        "#: Any JSON value.\n"
        "JsonValue = Any\n"
    ]
    definitions = schema["$defs"]
    # The messages last: their classes derive from the definitions they include.
    order = [n for n in definitions if n not in ("ClientMessage", "ServerMessage")] + ["ClientMessage", "ServerMessage"]
    for name in order:
        definition = definitions[name]
        if name in ("ClientMessage", "ServerMessage"):
            parts.append(messages(name, definition))
        elif "properties" in definition:
            parts.append(typed_dict(name, definition))
        else:
            parts.append(f"{comment(definition.get('description'))}{name} = {render(definition)}\n")
    return "\n\n".join(parts).rstrip() + "\n"


def main() -> int:
    text = generate()
    if "--check" in sys.argv[1:]:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(
                "src/switchboard_client/protocol.py differs from what schema/protocol.schema.json generates: "
                "run `python3 generate.py` in clients/python and commit the result",
                file=sys.stderr,
            )
            return 1
        print("src/switchboard_client/protocol.py matches the schema")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
