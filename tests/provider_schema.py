"""The google provider's schema, as @cdktf/provider-google ships it: its jsii assembly (.jsii, JSON) is generated from
the provider's own schema and names, for every resource and data source, each argument's Terraform name and each
nested block's type. scripts/install-test-tools.sh installs it from npm under .venv-tools/npm."""

from __future__ import annotations

import json
import re
from functools import cached_property

import pytest

from helpers import REPO

PACKAGE = REPO / ".venv-tools" / "npm" / "node_modules" / "@cdktf" / "provider-google"
PROVIDER = "@cdktf/provider-google."
# A class's summary: "Represents a {@link …/docs/resources/container_cluster google_container_cluster}."
TYPE_LINK = re.compile(r"/docs/(resources|data-sources)/\w+ (google_\w+)\}")
# An argument's remark: "Docs at Terraform Registry: {@link …#node_locations ContainerCluster#node_locations}".
NAME_LINK = re.compile(r"#(\w+)\}$")
KINDS = {"resources": "resource", "data-sources": "data"}
META_ARGUMENTS = {"count", "for_each", "depends_on", "lifecycle", "provider"}  # Terraform's own, on every resource


class Schema:
    """Argument names and nested block types of every google resource and data source."""

    def __init__(self, assembly: dict, provider_version: str):
        self.types = assembly["types"]
        self.provider_version = provider_version

    @cached_property
    def bodies(self) -> dict[tuple[str, str], str]:
        """("resource" | "data", "google_x") -> the fqn of its configuration struct."""
        found = {}
        for entry in self.types.values():
            link = TYPE_LINK.search(entry.get("docs", {}).get("summary", ""))
            if entry["kind"] == "class" and link and "initializer" in entry:
                config = next(p for p in entry["initializer"]["parameters"] if p["name"] == "config")
                found[(KINDS[link.group(1)], link.group(2))] = config["type"]["fqn"]
        return found

    def arguments(self, fqn: str) -> dict[str, str | None]:
        """A struct's arguments by Terraform name -> the nested block's struct fqn, or None for a plain attribute."""
        return {_terraform_name(p): _block_type(p["type"]) for p in self.types[fqn].get("properties", [])}


def _terraform_name(prop: dict) -> str:
    """The argument's Terraform name: from its docs link, else (id, project, timeouts' fields have none) snake_case."""
    link = NAME_LINK.search(prop.get("docs", {}).get("remarks", ""))
    return link.group(1) if link else re.sub(r"(?<!^)(?=[A-Z])", "_", prop["name"]).lower()


def _block_type(type_ref) -> str | None:
    """The provider struct inside a property's type (a block, alone or in a list), or None (an attribute)."""
    if isinstance(type_ref, dict):
        if str(type_ref.get("fqn", "")).startswith(PROVIDER):
            return type_ref["fqn"]
        for value in type_ref.values():
            if found := _block_type(value):
                return found
    if isinstance(type_ref, list):
        return next(filter(None, map(_block_type, type_ref)), None)
    return None


def load() -> Schema:
    assembly = PACKAGE / ".jsii"
    if not assembly.exists():
        pytest.fail(f"{assembly} is missing: run `make test-tools` (scripts/install-test-tools.sh) first")
    package = json.loads((PACKAGE / "package.json").read_text())
    return Schema(json.loads(assembly.read_text()), package["cdktf"]["provider"]["version"])


def unquote(label: str) -> str:
    return label[1:-1] if label.startswith('"') else label


def is_block(value) -> bool:
    """python-hcl2 marks each nested block; a map or list attribute has no mark."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) and v.get("__is_block__") for v in value)


def problems(schema: Schema, fqn: str, body: dict, where: str, extra: frozenset[str] = frozenset()) -> list[str]:
    """Each argument of `body` (a python-hcl2 block) that the struct `fqn` does not have, or has with other nesting."""
    allowed = schema.arguments(fqn)
    found = []
    for key, value in body.items():
        if key.startswith("__") or key in extra:
            continue
        if key == "dynamic":
            found += [problem for item in value for label, block in item.items()
                      for problem in _nested(schema, allowed, unquote(label), block["content"], where)]
        elif key not in allowed:
            found.append(f"{where}: no argument {key!r} in the google provider {schema.provider_version}")
        elif is_block(value):
            found += _nested(schema, allowed, key, value, where)
    return found


def _nested(schema: Schema, allowed: dict, name: str, blocks: list[dict], where: str) -> list[str]:
    if name not in allowed:
        return [f"{where}: no block {name!r} in the google provider {schema.provider_version}"]
    if allowed[name] is None:
        return [f"{where}.{name}: an attribute (name = value), not a block"]
    return [problem for block in blocks for problem in problems(schema, allowed[name], block, f"{where}.{name}")]
