#!/usr/bin/env bash
# Installs the Colyseus peer's npm packages (bench/peers/colyseus/node_modules).
# Usage: bench/peers/colyseus/install.sh
# Colyseus 0.18 needs --legacy-peer-deps here: without it npm auto-installs a
# peer that fetches uWebSockets.js from GitHub (unreachable). The packages are
# named explicitly in package.json (@colyseus/core, @colyseus/schema,
# express); package-lock.json pins the versions measured in docs/benchmarks.md.
# Skips the install when node_modules already holds @colyseus/core.
set -euo pipefail
cd "$(dirname "$0")"
if [ -d node_modules/@colyseus/core ] && [ "${1:-}" != "--force" ]; then
  echo "colyseus peer: already installed ($(node -p 'require("@colyseus/core/package.json").version'))"
  exit 0
fi
command -v npm >/dev/null || { echo "error: npm not found (Node 20+ required)" >&2; exit 1; }
timeout 600 npm install --legacy-peer-deps --no-audit --no-fund
echo "colyseus peer: installed @colyseus/core $(node -p 'require("@colyseus/core/package.json").version')"
