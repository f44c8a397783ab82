#!/usr/bin/env bash
# Runs one scenario against Citadel, Colyseus and the raw relay back to back
# with identical settings, then prints one table with the ratios
# Citadel/Colyseus and Citadel/raw.
#
# Usage: bench/compare.sh SCENARIO [--set KEY=VALUE ...]
#   SCENARIO  a name in bench/scenarios (relay-fanout) or a path to a .toml
#   --set     scenario overrides passed to every run, e.g.
#             --set 'clients=[400,800,1200,1600]' --set measure_seconds=10
# Environment:
#   OUTDIR       where the reports go (default: target/bench/<scenario>-<time>)
#   SERVER_CPUS  taskset list for the server (default 0)
#   LOAD_CPUS    taskset list for citadel-load (default 1)
#   TARGETS      which targets to run (default "citadel colyseus raw")
#   NO_BUILD=1   skip `cargo build --release`
#
# It builds the release binaries, installs the Colyseus peer's npm packages
# (bench/peers/colyseus/install.sh, skipped when present), raises `ulimit -n`
# to the hard limit, pins the server and the load generator to different
# cores, and runs the targets one after the other. rpc-echo has no Colyseus
# equivalent and is run against citadel and raw only. Every run is bounded
# by the scenario's own sizes plus a `timeout` of 30 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

scenario_arg="${1:?usage: bench/compare.sh SCENARIO [--set KEY=VALUE ...]}"
shift
overrides=("$@")
if [ -f "$scenario_arg" ]; then
  scenario="$scenario_arg"
else
  scenario="bench/scenarios/${scenario_arg%.toml}.toml"
fi
[ -f "$scenario" ] || { echo "error: no scenario $scenario" >&2; exit 2; }
name="$(basename "$scenario" .toml)"
out="${OUTDIR:-target/bench/$name-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
server_cpus="${SERVER_CPUS:-0}"
load_cpus="${LOAD_CPUS:-1}"
targets="${TARGETS:-citadel colyseus raw}"
if grep -q '^kind *= *"rpc-echo"' "$scenario"; then
  targets="${targets//colyseus/}"
fi

if [ "${NO_BUILD:-}" != 1 ]; then
  echo "== cargo build --release (citadel-server, citadel-load, raw-relay)"
  cargo build --release -p citadel-server -p citadel-load -p raw-relay
fi
case " $targets " in *" colyseus "*)
  echo "== colyseus peer"
  bench/peers/colyseus/install.sh ;;
esac

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "== ulimit -n $(ulimit -n); server on CPU $server_cpus, citadel-load on CPU $load_cpus"

args=()
for t in $targets; do
  echo "== $name against $t"
  timeout 1800 taskset -c "$load_cpus" target/release/citadel-load run "$scenario" \
    --target "$t" --server-cpus "$server_cpus" --json "$out/$t.json" "${overrides[@]}" \
    | tee "$out/$t.txt"
  args+=("--$t" "$out/$t.json")
done

echo
target/release/citadel-load compare "${args[@]}" | tee "$out/compare.txt"
echo "reports in $out"
