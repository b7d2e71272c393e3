#!/usr/bin/env bash
# What spinbit's unlock pays for its thread-local in a cdylib:
#
#   benches/cdylib/run.sh [ROUNDS [PAIRS]]
#
# Builds this crate (release) as a cdylib, called from driver.c (cc), and
# as an rlib linked into src/bin/direct.rs, then runs the two ROUNDS times
# (default 5), alternating, each timing PAIRS (default 10^8) uncontended
# lock + unlock pairs of spinbit, parking_lot 0.12 and std, one
# non-inlined call per pair, and prints each lock's median ns per pair in
# each build and its ratio to std's in the same build. Keep the machine
# otherwise idle. Needs a C compiler (cc).
set -euo pipefail
cd "$(dirname "$0")"
rounds=${1:-5}
pairs=${2:-100000000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/../../target/cdylib-bench}
cargo build --release -q
out=$CARGO_TARGET_DIR/release
cc -O2 driver.c -L "$out" -lspinbit_cdylib_bench -o "$out/driver"
echo "# $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) CPUs, $(uname -sr)"
for ((r = 1; r <= rounds; r++)); do
  LD_LIBRARY_PATH=$out "$out/driver" "$pairs"
  "$out/direct" "$pairs"
done | awk '
  { for (i = 2; i < NF; i += 2) { k = $1 " " $i; v[k] = v[k] " " $(i + 1) } }
  function median(s,   a, n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    printf "%-7s %-12s %8s %12s\n", "build", "lock", "ns/pair", "time / std"
    split("cdylib rlib", b, " "); split("spinbit parking_lot std", l, " ")
    for (i = 1; i <= 2; i++) for (j = 1; j <= 3; j++) {
      m = median(v[b[i] " " l[j]]); s = median(v[b[i] " std"])
      printf "%-7s %-12s %8.2f %12.3f\n", b[i], l[j], m, m / s
    }
  }'
