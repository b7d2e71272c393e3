#!/usr/bin/env bash
# Checks that the measurement variants still build:
#
#   benches/patches/check.sh [NAME...]
#
# For each patch benches/patches/NAME.patch (default: all of them), makes
# the variant's tree with benches/patches/tree.sh (a copy of the working
# tree in target/ab-NAME/tree with the patch applied, no fuzz) and runs
#
#   cargo clippy --workspace --all-targets --features bench-ablations -- -D warnings
#
# in it, and the same with `--features bench-ablations,stats` (the counters
# match the events a variant may remove), all patches in one target
# directory (target/ab-patches: the dependencies are built once). Checks
# every patch, then exits non-zero if any did not apply or did not pass,
# naming them. A patch that fails needs remaking against the current
# tree (see docs/benchmarks.md, "Measuring a build variant").
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

names=("$@")
if ((${#names[@]} == 0)); then
  for p in benches/patches/*.patch; do
    names+=("$(basename "$p" .patch)")
  done
fi
if ((${#names[@]} == 0)); then
  echo "check.sh: no patches in benches/patches" >&2
  exit 2
fi

failed=()
for name in "${names[@]}"; do
  echo "== $name" >&2
  if ! tree=$(benches/patches/tree.sh "$name"); then
    failed+=("$name (does not apply)")
    continue
  fi
  for features in bench-ablations bench-ablations,stats; do
    if ! (cd "$tree" && CARGO_TARGET_DIR="$root/target/ab-patches" \
      cargo clippy --workspace --all-targets --features "$features" -- -D warnings); then
      failed+=("$name (clippy --features $features)")
    fi
  done
done
if ((${#failed[@]})); then
  printf 'check.sh: failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "check.sh: ${#names[@]} patches apply and pass clippy: ${names[*]}" >&2
