#!/usr/bin/env bash
# Rebuild the console's static files into src/pier/console/static and record which sources they came from
# (tests/console/test_stamp.py fails when the sources changed and nobody ran this). Needs Node 20 and npm.
set -euo pipefail
cd "$(dirname "$0")"
npm install --no-audit --no-fund  # honours package-lock.json (npm ci trips on this machine's omit-lockfile-registry-resolved)
npx vite build
PYTHONPATH=../src python3 -m pier.console.stamp . ../src/pier/console/static
