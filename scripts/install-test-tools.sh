#!/usr/bin/env bash
# Installs the non-Python tools the test suite drives for real. Run by `make test`; idempotent.
set -euo pipefail

# Dashboard browser test: Debian's chromium, driven headless by playwright (which never downloads a browser).
if [ ! -x /usr/bin/chromium ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
fi
