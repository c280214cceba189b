#!/usr/bin/env bash
# Installs the non-Python tools the test suite drives for real. Run by `make test`; idempotent.
set -euo pipefail
