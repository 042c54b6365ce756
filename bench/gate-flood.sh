#!/usr/bin/env bash
# One client's connection flood against the gate's rank 0 and a node agent's ring listener, on
# loopback with the stand-in fabric (bench/gate_flood.rs): per listener and kind of flood, how
# many of 20 clients that connect once (20 joins, each from an address of its own; 20 hellos)
# are read while 127.0.0.2 floods the port, and how many lines the listener says on stderr.
#
#   bash bench/gate-flood.sh [SECONDS]            # default 10: each flood's length
#   GATE_FLOOD_BIN=path/to/gate_flood ...          # a prebuilt example (no cargo there)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
if [ -n "${GATE_FLOOD_BIN:-}" ]; then
  bin=$(realpath "$GATE_FLOOD_BIN")
else
  cargo build -q --example gate_flood
  bin=$PWD/target/x86_64-unknown-linux-gnu/debug/examples/gate_flood
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for what in joins ring; do
  for how in none connect reconnect garbage; do
    "$bin" "$what" "$how" "$secs" > "$tmp/out" 2> "$tmp/err"
    printf '%s; %s stderr line(s)\n' "$(cat "$tmp/out")" "$(wc -l < "$tmp/err")"
  done
done
echo "machine: $(nproc) cores, $(uname -r)"
