#!/usr/bin/env bash
# What spinbit's unlock pays for its thread-local in a cdylib:
#
#   benches/cdylib/run.sh [ROUNDS [PAIRS]]
#
# Builds this crate (release) as a cdylib, called from driver.c (cc), and
# as an rlib linked into src/bin/direct.rs, and prints how `unlock` reaches
# its thread-local in each (the TLS instruction of the non-inlined spinbit
# lock + unlock and the one after it, from objdump). Then it runs the two
# ROUNDS times (default 6), alternating, each timing PAIRS (default 10^8)
# uncontended lock + unlock pairs of spinbit, parking_lot 0.12 and std,
# one non-inlined call per pair, the three in an order that rotates from
# round to round (each lock first, second and third once in any three
# rounds in a row). It prints each lock's median ns per pair in each build
# with its range over the rounds, and the median over the rounds of its
# time / std's time in the same process. Keep the machine otherwise idle.
# Needs a C compiler (cc) and objdump.
set -euo pipefail
# A relative target directory is the caller's, not this directory's.
target=${CARGO_TARGET_DIR:-$(dirname "$0")/../../target/cdylib-bench}
mkdir -p "$target"
CARGO_TARGET_DIR=$(cd "$target" && pwd)
export CARGO_TARGET_DIR
cd "$(dirname "$0")"
rounds=${1:-6}
pairs=${2:-100000000}
if ! [[ $rounds =~ ^[1-9][0-9]*$ && $pairs =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: ROUNDS and PAIRS must be positive integers" >&2
  exit 2
fi
cargo build --release --locked -q
out=$CARGO_TARGET_DIR/release
cc -O2 driver.c -L "$out" -lspinbit_cdylib_bench -o "$out/driver"
echo "# $(sed -n '/^model name/{s/^model name[[:space:]]*: //p;q;}' /proc/cpuinfo), $(nproc) CPUs, $(uname -sr)"
for bin in libspinbit_cdylib_bench.so direct; do
  echo "# $bin: the thread-local accesses in spinbit's lock + unlock:"
  objdump -d -C --no-show-raw-insn "$out/$bin" |
    awk '/<spinbit_cdylib_bench::bump_spinbit>:/ { on = 1; next } /^$/ { on = 0 } on' |
    { grep -E -A1 --no-group-separator '__tls_get_addr|%fs' || echo '#   (none found)'; } |
    sed 's/^ *[0-9a-f]*:[[:space:]]*/#   /'
done
for ((r = 1; r <= rounds; r++)); do
  LD_LIBRARY_PATH=$out "$out/driver" "$pairs" "$r"
  "$out/direct" "$pairs" "$r"
done | awk '
  { for (i = 2; i < NF; i += 2) { k = $1 " " $i; v[k] = v[k] " " $(i + 1); q[k] = q[k] " " $(i + 1) / $7 } }
  function sorted(s, a,   n, i, j, t) {
    n = split(s, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n
  }
  function median(s,   a, n) { n = sorted(s, a); return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function range(s,   a, n) { n = sorted(s, a); return sprintf("%.2f-%.2f", a[1], a[n]) }
  END {
    printf "%-7s %-12s %8s %12s %12s\n", "build", "lock", "ns/pair", "range", "time / std"
    split("cdylib rlib", b, " "); split("spinbit parking_lot std", l, " ")
    for (i = 1; i <= 2; i++) for (j = 1; j <= 3; j++) {
      k = b[i] " " l[j]
      printf "%-7s %-12s %8.2f %12s %12.3f\n", b[i], l[j], median(v[k]), range(v[k]), median(q[k])
    }
  }'
