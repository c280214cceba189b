"""terraform/'s outputs for the Makefile, read once: `python3 k8s/terraform_output.py` prints one NAME=VALUE word per
output of `terraform -chdir=terraform output -json`, and the word terraform:ran, failed (it exited non-zero: a
backend "gcs" not yet `terraform init`-ed, say; its error is not shown) or missing (not on PATH). No output is taken
for that word: terraform's output names are identifiers, which hold no colon (as terraform=ran, an output named
terraform shadowed it).

A value is printed where it is one plain word (letters, digits and . _ : / @ -), which a make recipe may pass to a
shell as it is; any other value is left out, and the Makefile says what to give instead. Where terraform has not
applied, `terraform output -raw NAME` exits 0 with a warning box on stdout, whose backticked `terraform console` a
shell then ran (and, under a terminal, waited on); `terraform output -json` prints {} there.
"""

from __future__ import annotations

import json
import re
import subprocess

PLAIN = re.compile(r"[A-Za-z0-9._:/@-]+")
COMMAND = ["terraform", "-chdir=terraform", "output", "-json"]


def values(outputs_json: str) -> dict[str, str]:
    """Each output in `terraform output -json`'s text whose value is one plain word, by name."""
    try:
        outputs = json.loads(outputs_json or "{}")
    except json.JSONDecodeError:
        return {}
    if not isinstance(outputs, dict):
        return {}
    found = {name: output.get("value") if isinstance(output, dict) else None for name, output in outputs.items()}
    return {name: value for name, value in found.items() if isinstance(value, str) and PLAIN.fullmatch(value)}


def read() -> tuple[str, dict[str, str]]:
    """How terraform answered (ran, failed, missing) and its plain outputs."""
    try:
        done = subprocess.run(COMMAND, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    except FileNotFoundError:
        return "missing", {}
    except OSError:  # a terraform on PATH that cannot run (not executable), as a shell's exit 126
        return "failed", {}
    return ("ran", values(done.stdout)) if done.returncode == 0 else ("failed", {})


if __name__ == "__main__":
    answer, outputs = read()
    print(*(f"{name}={value}" for name, value in outputs.items()), f"terraform:{answer}")
