#!/usr/bin/env bash
# Semver check for the next 0.1.x release: every public path and signature
# of the baseline must still be there (additions are fine). The crate is not
# published, so the baseline is a git revision:
#   SPINBIT_SEMVER_BASELINE=<rev> bash .ci/semver.sh     (default 49c71e6)
#
# 1. Always: the public API from nightly rustdoc JSON of the baseline and of
#    the work tree, compared by .ci/semver_api.py (nothing to install; the
#    nightly toolchain is the one Miri uses).
# 2. If cargo-semver-checks is installed: its check-release too (about 200
#    lints, e.g. a struct gaining a private field), against the same rev.
# Each is followed by its negative control: a scratch copy of the work tree
# whose `spinbit::RawFairMutex` (public since the first commit) is renamed,
# which the check must report as removed.
#
# Features checked: those of the user API (USER_FEATURES) that each side's
# Cargo.toml declares; the benchmark-only `bench-ablations` and `tuning` are
# not promised. A user feature the baseline has and the work tree lacks
# fails the check.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
base_rev=${SPINBIT_SEMVER_BASELINE:-49c71e6}
USER_FEATURES=(arc_lock serde lock_api_04 stats)
target=${CARGO_TARGET_DIR:-$root/target}/semver
scratch=$target/scratch
rm -rf "$scratch"
mkdir -p "$scratch"

if ! git rev-parse -q --verify "$base_rev^{commit}" >/dev/null; then
  echo "FAIL: baseline revision $base_rev is not in this clone (shallow?)" >&2
  exit 1
fi

# The user features a Cargo.toml (on stdin) declares, one per line: those
# of [features] and the implicit ones of optional dependencies.
features_of() {
  python3 -c '
import sys, tomllib
m = tomllib.load(sys.stdin.buffer)
declared = set(m.get("features", {}))
tables = [m] + list(m.get("target", {}).values())
for t in tables:
    for name, dep in t.get("dependencies", {}).items():
        if isinstance(dep, dict) and dep.get("optional"):
            declared.add(name)
print("\n".join(f for f in sys.argv[1:] if f in declared))' "${USER_FEATURES[@]}"
}
mapfile -t base_features < <(git show "$base_rev:Cargo.toml" | features_of)
mapfile -t cur_features < <(features_of <Cargo.toml)
for f in "${base_features[@]}"; do
  if [[ " ${cur_features[*]} " != *" $f "* ]]; then
    echo "FAIL: feature $f of $base_rev is gone from Cargo.toml" >&2
    exit 1
  fi
done
join() { local IFS=,; echo "$*"; }
echo "baseline $base_rev, features: $(join "${base_features[@]}")"
echo "work tree, features: $(join "${cur_features[@]}")"

# The baseline's tree, the work tree's copy for the negative control (its
# own target/ and .git left out), and the control's one change.
mkdir "$scratch/base" "$scratch/control"
git archive "$base_rev" | tar -x -C "$scratch/base"
# The scratch copies sit inside this repository's workspace: a copy whose
# manifest has no `[workspace]` of its own gets an empty one, so that cargo
# does not take it for a member of ours.
for d in "$scratch/base"; do
  grep -q '^\[workspace\]' "$d/Cargo.toml" || printf '\n[workspace]\n' >>"$d/Cargo.toml"
done
tar -C "$root" --exclude=./target --exclude=./.git -cf - . | tar -C "$scratch/control" -xf -
sed -i 's/^pub use raw::{RawFairMutex, RawMutex};$/pub use raw::{RawFairMutex as RenamedRawFairMutex, RawMutex};\nuse raw::RawFairMutex;/' \
  "$scratch/control/src/lib.rs"
if ! grep -q RenamedRawFairMutex "$scratch/control/src/lib.rs"; then
  echo "FAIL: the negative control's edit found no 'pub use raw::{RawFairMutex, RawMutex};' in src/lib.rs" >&2
  exit 1
fi

# rustdoc JSON of the crate in directory $1 with features $2, copied to $3.
api_json() {
  CARGO_TARGET_DIR=$target/doc-target cargo +nightly rustdoc -q --lib \
    --manifest-path "$1/Cargo.toml" --features "$2" \
    -- -Zunstable-options --output-format json
  cp "$target/doc-target/doc/spinbit.json" "$3"
}
api_json "$scratch/base" "$(join "${base_features[@]}")" "$target/base.json"
api_json "$root" "$(join "${cur_features[@]}")" "$target/current.json"
api_json "$scratch/control" "$(join "${cur_features[@]}")" "$target/control.json"

echo "== public API: $base_rev -> work tree"
python3 .ci/semver_api.py diff "$target/base.json" "$target/current.json"
echo "== negative control: work tree with RawFairMutex renamed (must fail)"
if python3 .ci/semver_api.py diff "$target/base.json" "$target/control.json" >"$target/control.txt"; then
  cat "$target/control.txt"
  echo "FAIL: the public-API check passed a tree without spinbit::RawFairMutex" >&2
  exit 1
fi
cat "$target/control.txt"
grep -q '^removed: spinbit::RawFairMutex struct' "$target/control.txt" || {
  echo "FAIL: the public-API check failed the control without naming RawFairMutex" >&2
  exit 1
}
echo "ok: the control's break was reported"

if ! command -v cargo-semver-checks >/dev/null; then
  echo "cargo-semver-checks not installed: its check skipped"
  exit 0
fi
# --only-explicit-features: its default takes every feature but a few
# names, the benchmark-only ones included.
csc_features=(--only-explicit-features)
for f in "${cur_features[@]}"; do
  if [[ " ${base_features[*]} " == *" $f "* ]]; then
    csc_features+=(--features "$f")
  else
    csc_features+=(--current-features "$f")
  fi
done
echo "== $(cargo-semver-checks --version): $base_rev -> work tree"
CARGO_TARGET_DIR=$target/csc-target cargo semver-checks check-release \
  --baseline-rev "$base_rev" "${csc_features[@]}"
echo "== cargo-semver-checks negative control (must fail)"
if CARGO_TARGET_DIR=$target/csc-target cargo semver-checks check-release \
  --manifest-path "$scratch/control/Cargo.toml" --baseline-root "$scratch/base" \
  "${csc_features[@]}" >"$target/csc-control.txt" 2>&1; then
  cat "$target/csc-control.txt"
  echo "FAIL: cargo-semver-checks passed a tree without spinbit::RawFairMutex" >&2
  exit 1
fi
cat "$target/csc-control.txt"
grep -q 'struct spinbit::RawFairMutex, previously in' "$target/csc-control.txt" || {
  echo "FAIL: cargo-semver-checks failed the control without naming RawFairMutex" >&2
  exit 1
}
echo "ok: cargo-semver-checks reported the control's break"
