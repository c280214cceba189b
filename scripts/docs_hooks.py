"""mkdocs hooks (mkdocs.yml): the references that are generated, never written, so the docs cannot drift from the
code. A page holds a marker; the build puts the reference there:

    <!-- attnbench: spec reference -->      every field of a spec, from runner.spec's JSON schema (`attnbench schema`)
    <!-- attnbench: variant reference -->   every variant in the registry: what it needs, takes and declines
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's runner, installed or not

SPEC_MARKER = "<!-- attnbench: spec reference -->"
VARIANT_MARKER = "<!-- attnbench: variant reference -->"
LIMITS = {"minimum": "≥ {}", "exclusiveMinimum": "> {}", "maximum": "≤ {}", "exclusiveMaximum": "< {}",
          "minLength": "length ≥ {}", "maxLength": "length ≤ {}", "minItems": "at least {} items",
          "pattern": "matches `{}`"}


def on_page_markdown(markdown: str, page, config, files) -> str:
    if SPEC_MARKER in markdown:
        markdown = markdown.replace(SPEC_MARKER, spec_reference())
    if VARIANT_MARKER in markdown:
        markdown = markdown.replace(VARIANT_MARKER, variant_reference())
    return markdown


# --- the spec ------------------------------------------------------------------------------------------------------

def spec_reference(schema: dict | None = None) -> str:
    """A table per model of the spec's JSON schema (the spec itself first), a row per field."""
    if schema is None:
        from runner.spec import Spec

        schema = Spec.model_json_schema(by_alias=True)
    models = {"Spec": schema, **schema.get("$defs", {})}
    return "\n\n".join(model_table(name, model) for name, model in models.items())


def model_table(name: str, model: dict) -> str:
    rows = [[f"`{field}`", type_of(prop), default_of(prop), limits_of(prop), _cell(prop.get("description", ""))]
            for field, prop in model.get("properties", {}).items()]
    body = "\n".join("| " + " | ".join(row) + " |" for row in rows)
    header = "| field | type | default | limits | description |\n|---|---|---|---|---|"
    return f"### {name}\n\n{_cell(model.get('description', ''))}\n\n{header}\n{body}"


def type_of(prop: dict) -> str:
    if "$ref" in prop:
        target = prop["$ref"].rpartition("/")[2]
        return f"[{target}](#{target.lower()})"
    if "anyOf" in prop:
        return " or ".join(type_of(option) for option in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{value}`" for value in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if prop.get("type") == "array":
        return f"list of {type_of(prop.get('items', {}))}"
    return prop.get("type", "any")


def default_of(prop: dict) -> str:
    if "default" not in prop:
        return "required" if "$ref" not in prop else ""
    value = prop["default"]
    if value == "":
        return '`""`'
    return "null" if value is None else f"`{str(value).lower() if isinstance(value, bool) else value}`"


def limits_of(prop: dict) -> str:
    found = [text.format(prop[key]) for key, text in LIMITS.items() if key in prop]
    for option in prop.get("anyOf", []):
        found += [text.format(option[key]) for key, text in LIMITS.items() if key in option]
    return _cell(", ".join(found))


# --- the variants --------------------------------------------------------------------------------------------------

def variant_reference(variants: dict | None = None) -> str:
    """A table of every registered variant: what runs, its backend and worker, what it needs, the model options it
    takes and what it declines (its rules, then the options it does not implement)."""
    from runner.registry import NO_OPTIONS, OPTIONS, load_all

    variants = load_all() if variants is None else variants
    rows = []
    for name, v in sorted(variants.items()):
        takes = v.requires.takes() or [NO_OPTIONS]
        declines = [*v.rules, *(f"{OPTIONS[o]}: {v.requires.why(o)}" for o in OPTIONS if o not in v.requires.options)]
        needs = v.requires.needs() or ["—"]
        rows.append([f"`{name}`", v.doc, v.backend or "decided when compiled", v.worker, "; ".join(needs),
                     "; ".join(takes), "; ".join(declines) or "—"])
    body = "\n".join("| " + " | ".join(map(_cell, row)) + " |" for row in rows)
    return ("| variant | what runs | backend | worker | needs | takes | declines |\n|---|---|---|---|---|---|---|\n"
            + body)


def _cell(text: str) -> str:
    """Text for one table cell: one line, its `|` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")
