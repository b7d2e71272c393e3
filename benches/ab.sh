#!/usr/bin/env bash
# A/B measurement of a build variant of spinbit against the default build:
#
#   benches/ab.sh NAME [ROUNDS [CELL...]]
#   benches/ab.sh release-then-wake 3
#
# NAME is a patch in benches/patches/ (NAME.patch): look-first, release-then-wake,
# timed-looks or untimed-resleep, or one made as docs/benchmarks.md
# ("Measuring a build variant") tells. The script builds the benchmark
# twice: as the working tree is, in target/ as usual, and from a copy of
# the working tree (without target/ and .git) with the patch applied, in
# target/ab-NAME/tree, with its own target directory target/ab-NAME/target
# (benches/patches/tree.sh makes the copy; it stops here if the patch no
# longer applies). Then,
# ROUNDS times (default 3), it runs each CELL (a benchmark group such as
# `contended-inline/t8/cs0/think0`; default: the key cells below) for
# spinbit alone with the full profile (5 interleaved 400 ms windows), once
# per build, the build that goes first alternating from round to round, so
# that a slow drift of the machine does not always favour the same one.
# Each run writes target/spinbit-ab/NAME/{base,variant}-ROUND-CELL.jsonl
# (the benchmark's own output goes to run.log there).
# About 7 s per run on 2 cores: 3 rounds of the 12 default cells take 10
# minutes. Keep the machine otherwise idle. Finally it prints the
# comparison:
#
#   cargo run --release -p spinbit-bench --bin ab_report -- target/spinbit-ab/NAME
#
# Only spinbit runs, so the comparison is of the two builds with each
# other, not with the peers; a build that wins here is re-measured with the
# full benchmark before it becomes the default.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1)); then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
name=$1
rounds=${2:-3}
shift $(($# < 2 ? $# : 2))
if ! [[ $name =~ ^[a-z0-9][a-z0-9-]*$ && -f benches/patches/$name.patch ]]; then
  echo "ab.sh: no patch benches/patches/$name.patch (have: $(cd benches/patches && ls -- *.patch | sed 's/\.patch$//' | tr '\n' ' '))" >&2
  exit 2
fi
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "ab.sh: ROUNDS must be a positive integer, not $rounds" >&2
  exit 2
fi
cells=("$@")
if ((${#cells[@]} == 0)); then
  cells=(
    contended-inline/t2/cs0/think0
    contended-inline/t8/cs0/think0
    contended-inline/t32/cs0/think0
    contended-inline/t2/cs0/think100
    contended-inline/t8/cs0/think100
    contended-inline/t64/cs0/think100
    contended-inline/t4/cs100/think0
    contended-inline/t32/cs100/think0
    contended-inline/t8/cs1000/think0
    contended-inline/t64/cs1000/think0
    handoff-inline/cs1000
    queue-inline/t2
  )
fi

# The benchmark executable that `cargo bench --no-run` reports.
build() {
  cargo bench -p spinbit-bench --bench mutex --features bench-ablations --no-run 2>&1 |
    sed -n 's/.*Executable mutex\.rs (\(.*\))$/\1/p' | tail -1
}
tree=$(benches/patches/tree.sh "$name")
base=$(build)
variant=$(cd "$tree" && CARGO_TARGET_DIR="$(dirname "$tree")/target" build)
if [[ -z $base || -z $variant ]]; then
  echo "ab.sh: a build failed (run cargo bench -p spinbit-bench --bench mutex --no-run, in $tree for the variant, to see why)" >&2
  exit 1
fi

out=target/spinbit-ab/$name
rm -rf "$out"
mkdir -p "$out"
run() { # build-name executable round cell
  SPINBIT_BENCH_PROFILE=full SPINBIT_BENCH_OUT="$out/$1-$3-${4//\//_}.jsonl" \
    "$2" --bench --exact "$4/spinbit" >>"$out/run.log" 2>&1
}
for ((r = 1; r <= rounds; r++)); do
  echo "== round $r of $rounds ($(uptime | sed 's/.*load/load/'))" >&2
  for cell in "${cells[@]}"; do
    if ((r % 2)); then
      run base "$base" "$r" "$cell"
      run variant "$variant" "$r" "$cell"
    else
      run variant "$variant" "$r" "$cell"
      run base "$base" "$r" "$cell"
    fi
  done
done
echo "== done ($(uptime | sed 's/.*load/load/'))" >&2
cargo run --release -p spinbit-bench --bin ab_report -- "$out"
