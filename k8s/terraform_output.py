"""Print one output of terraform/ for the Makefile: `terraform output -json | python3 k8s/terraform_output.py NAME`.

Prints the output's value where terraform has it and it is one plain word (letters, digits and . _ : / @ -), which a
make recipe may pass to a shell as it is; prints nothing otherwise, and the Makefile says what to give instead. Where
terraform has not applied, `terraform output -raw NAME` exits 0 with a warning box on stdout, whose backticked
`terraform console` a shell then ran (and, under a terminal, waited on); `terraform output -json` prints {} there.
"""

from __future__ import annotations

import json
import re
import sys

PLAIN = re.compile(r"[A-Za-z0-9._:/@-]+")


def value(outputs_json: str, name: str) -> str:
    """Output `name`'s value in `terraform output -json`'s text, or '' where it is absent or not one plain word."""
    try:
        outputs = json.loads(outputs_json or "{}")
    except json.JSONDecodeError:
        return ""
    found = outputs.get(name, {}).get("value") if isinstance(outputs, dict) else None
    return found if isinstance(found, str) and PLAIN.fullmatch(found) else ""


if __name__ == "__main__":
    print(value(sys.stdin.read(), sys.argv[1]))
