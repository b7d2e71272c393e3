#!/usr/bin/env bash
# Sensitivity sweep of one tuning constant of spinbit:
#
#   benches/sweep.sh CONSTANT VALUE...
#   benches/sweep.sh SPIN_NS 1000 2000 4000
#
# CONSTANT is one of SPIN_NS, PING_PONG_MAX_NS, STARVING_NS, STARVING_FEW_NS,
# STARVED_AWAKE_NS, YIELD_BUSY_NS, WAKE_POLL_MAX_NS, HAND_OFF_AWAKE_NS (ns),
# ARRIVAL_YIELDS or BACKLOG_PER_CPU (counts), all in src/arch/mod.rs (the
# timings derived there follow the constant they are derived from). For each VALUE
# it runs the benchmark's `sweep` profile (the key cells, spinbit and its
# four portable peers; the fair-unlock cells, spinbit and both
# parking_lots; 3 reps of 200 ms windows, no criterion: about 75 s on 2
# cores) with the constant overridden through the `tuning` feature:
#
#   SPINBIT_<CONSTANT>=VALUE SPINBIT_BENCH_PROFILE=sweep \
#     SPINBIT_BENCH_OUT=target/spinbit-sweep/<CONSTANT>-<VALUE>.jsonl \
#     cargo bench -p spinbit-bench --bench mutex --features bench-ablations,tuning
#
# then prints one markdown table per cell, one row per value, with
# `cargo run --release -p spinbit-bench --bin sweep_report -- target/spinbit-sweep/<CONSTANT>-*.jsonl`
# (every value swept so far, not only this invocation's). Include the
# default value to see it next to the others. The runs are timings: keep the
# machine otherwise idle (`uptime` before and after). The default values
# are in src/arch/mod.rs, and what earlier sweeps showed in
# docs/benchmarks.md ("The constants: how each value was chosen"); a
# committed sweep was benches/results/sweep-x86_64-amd-epyc.md (in git at
# 2dde755, see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 2)); then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
constant=$1
shift
case $constant in
  SPIN_NS | PING_PONG_MAX_NS | STARVING_NS | STARVING_FEW_NS | STARVED_AWAKE_NS | YIELD_BUSY_NS | \
    WAKE_POLL_MAX_NS | HAND_OFF_AWAKE_NS | ARRIVAL_YIELDS | BACKLOG_PER_CPU) ;;
  *)
    echo "sweep.sh: unknown constant $constant (SPIN_NS, PING_PONG_MAX_NS, STARVING_NS, STARVING_FEW_NS, STARVED_AWAKE_NS, YIELD_BUSY_NS, WAKE_POLL_MAX_NS, HAND_OFF_AWAKE_NS, ARRIVAL_YIELDS, BACKLOG_PER_CPU)" >&2
    exit 2
    ;;
esac
for v in "$@"; do
  if ! [[ $v =~ ^[0-9]+$ ]]; then
    echo "sweep.sh: $constant=$v is not a non-negative integer" >&2
    exit 2
  fi
done

out=target/spinbit-sweep
mkdir -p "$out"
for v in "$@"; do
  echo "== $constant=$v ($(uptime | sed 's/.*load/load/'))" >&2
  env "SPINBIT_$constant=$v" SPINBIT_BENCH_PROFILE=sweep \
    SPINBIT_BENCH_OUT="$out/$constant-$v.jsonl" \
    cargo bench -p spinbit-bench --bench mutex --features bench-ablations,tuning
done
echo "== done ($(uptime | sed 's/.*load/load/'))" >&2
cargo run --release -p spinbit-bench --bin sweep_report -- "$out/$constant"-*.jsonl
