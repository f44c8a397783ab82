#!/usr/bin/env bash
# Installs the Node cross-check client's packages (ws, pinned by
# package-lock.json) with `npm ci`. Skips when node_modules/ws is present.
set -euo pipefail
cd "$(dirname "$0")"
if [ -d node_modules/ws ] && [ "${1:-}" != "--force" ]; then
  echo "node client: already installed (ws $(node -p 'require("ws/package.json").version'))"
  exit 0
fi
command -v npm >/dev/null || { echo "error: npm not found (Node 18+ required)" >&2; exit 1; }
timeout 300 npm ci --no-audit --no-fund
echo "node client: installed ws $(node -p 'require("ws/package.json").version')"
