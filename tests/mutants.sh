#!/usr/bin/env bash
# Ordering mutation check of src/lock/ against the loom models:
#
#   tests/mutants.sh [JOBS [NAME...]]
#   tests/mutants.sh 2
#   tests/mutants.sh 1 push-release unlock-release
#   tests/mutants.sh --check      # only checks that every mutant still applies
#
# Each mutant below weakens one atomic ordering of src/lock/ (one
# occurrence of one piece of text in one file, replaced). For each, the script copies
# the crate to target/mutants/work-J (J: the job), applies the change, and
# runs the models as `cargo test` does (`cargo test --lib model::`, default
# bounds, one model at a time), stopping at the first model that fails. A
# mutant is *caught* when a model fails (a causality violation, a failed
# assertion, a deadlock) and *survives* when every model passes: then no
# model checks what that ordering is for. The negative controls (deliberately
# broken protocols that must fail in a given way) do not count: one that
# fails in another way is reported, and the run goes on. JOBS (default 1) mutants run at
# once, each in its own copy and target directory (loom explorations in
# separate processes do not slow each other down; two in one process do);
# a run takes 1-5 minutes per mutant and job on 2 cores, the first one of
# each job longer (it builds the dependencies). NAME... runs only those
# mutants. The results go to target/mutants/results.txt, one line per
# mutant: its name, `caught` and the first failing model with its message,
# or `survived`.
#
# The orderings that already have a negative control in the models (the
# `Fault` variants of src/platform/loom.rs, e.g. the pop's retry and
# unlink, the self-unlink's (leave, move) and the give-back's retries, the
# census's CASes, the retake, `release_after_leave`'s give-back,
# the release of an unlock that found starvation mode ended, the failure
# of the starving mark's CAS)
# are not repeated here, nor those that only the broken protocols of the
# controls execute. A piece of text that no longer occurs as often as its
# mutant says (the code changed) stops the script before anything runs.
# One mutant survives every model, for the reason the summary gives (`known`
# below, and the comment at that ordering).
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=false
if [ "${1:-}" = --check ]; then
  check_only=true
  shift
fi
jobs=${1:-1}
shift $(($# < 1 ? $# : 1))
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi

# One mutant per line: name, file (in src/lock/), occurrence in that file
# (1-based), text, replacement, separated by " ## ".
mutants=(
  'try-lock-acquire ## mod.rs ## 1 ## self.state.fetch_or(LOCKED, Acquire) ## self.state.fetch_or(LOCKED, Relaxed)'
  'guess-release ## mod.rs ## 1 ## g.map_addr(|a| a - LOCKED), UNLOCK_ORDER, Relaxed) ## g.map_addr(|a| a - LOCKED), Relaxed, Relaxed)'
  'unlock-release ## mod.rs ## 1 ## s.map_addr(|a| a - LOCKED), UNLOCK_ORDER, Relaxed) ## s.map_addr(|a| a - LOCKED), Relaxed, Relaxed)'
  'slow-release ## wake.rs ## 1 ## (s.map_addr(|a| a - LOCKED), UNLOCK_ORDER) ## (s.map_addr(|a| a - LOCKED), Relaxed)'
  'wake-release-release ## wake.rs ## 1 ## { Acquire } else { AcqRel } ## { Acquire } else { Acquire }'
  'wake-release-acquire ## wake.rs ## 1 ## { Acquire } else { AcqRel } ## { Acquire } else { Release }'
  'push-release ## wait.rs ## 1 ## compare_exchange(s, with_flags(me, f), Release, Relaxed) ## compare_exchange(s, with_flags(me, f), Relaxed, Relaxed)'
  'take-stack-acquire ## stack.rs ## 1 ## match self.take_stack_from(s, Acquire) { ## match self.take_stack_from(s, Relaxed) {'
  'spin-acquire ## wait.rs ## 1 ## self.state.compare_exchange(s, new, Acquire, Relaxed)?; ## self.state.compare_exchange(s, new, Relaxed, Relaxed)?;'
  'serve-release ## wake.rs ## 1 ## match self.state.compare_exchange(s, new, Release, Relaxed) { ## match self.state.compare_exchange(s, new, Relaxed, Relaxed) {'
  'pop-empty-release ## wake.rs ## 1 ## compare_exchange(s, empty, Release, retry_order ## compare_exchange(s, empty, Relaxed, retry_order'
  'nudge-release ## wake.rs ## 2 ## match self.state.compare_exchange(s, new, Release, Relaxed) { ## match self.state.compare_exchange(s, new, Relaxed, Relaxed) {'
)

# Mutants that no model can catch, and why (the comment at the ordering
# says so too).
declare -A known=(
  [pop-empty-release]="the stack is empty after it: no later stack owner reads a node it wrote; the popped thread reads its node after its parker's Acquire"
)

out=target/mutants
dir=src/lock
mkdir -p "$out"

# Splits mutant $1 into the globals name, src (its file), occ, text, rep.
parse() {
  local rest=$1
  name=${rest%% ## *}
  rest=${rest#* ## }
  src=$dir/${rest%% ## *}
  rest=${rest#* ## }
  occ=${rest%% ## *}
  rest=${rest#* ## }
  text=${rest%% ## *}
  rep=${rest#* ## }
}

# Checks every selected mutant's text before anything runs.
selected=()
for m in "${mutants[@]}"; do
  parse "$m"
  if (($#)); then
    # A loop, not `printf ... | grep -q`: under pipefail, grep -q exiting at
    # its first match can SIGPIPE printf and fail the pipeline at random.
    wanted=
    for want in "$@"; do [ "$want" = "$name" ] && wanted=1; done
    [ -n "$wanted" ] || continue
  fi
  n=$( { grep -oF -- "$text" "$src" || true; } | wc -l)
  if ((n < occ)); then
    echo "mutants.sh: $name: '$text' occurs $n times in $src, not at least $occ" >&2
    exit 1
  fi
  selected+=("$m")
done
if ((${#selected[@]} == 0)); then
  echo "mutants.sh: no mutant named $*" >&2
  exit 2
fi
if $check_only; then
  echo "mutants.sh: all ${#selected[@]} mutants apply to $dir"
  exit 0
fi

# Runs mutant $2 in work directory $1 and prints its result line.
run_one() {
  local work=$1 log pid failed why
  parse "$2"
  log=$out/$name.log
  mkdir -p "$work"
  # The crate's sources as they were when the script started; the work
  # directory keeps its own target/, so only the crate is rebuilt from the
  # second mutant on.
  tar -xf "$out/snapshot.tar" -C "$work"
  OCC=$occ TEXT=$text REP=$rep perl -0pi -e '
    my ($t, $r, $k, $i) = ($ENV{TEXT}, $ENV{REP}, $ENV{OCC}, 0);
    s/\Q$t\E/++$i == $k ? $r : $&/ge;
  ' "$work/$src"
  if cmp -s "$src" "$work/$src"; then
    echo "$name: not applied"
    return
  fi
  (cd "$work" && exec cargo test --lib model:: -- --test-threads=1) >"$log" 2>&1 &
  pid=$!
  # The first failing model is enough: stop the run there. A negative
  # control (a `should panic` test, a deliberately broken protocol) that
  # fails differently is not: it is noted, and the run goes on.
  while kill -0 "$pid" 2>/dev/null; do
    if grep -qE '^test model::[a-z0-9_:]+ \.\.\. FAILED' "$log" 2>/dev/null; then
      pkill -f "$PWD/$work/target/debug/deps/spinbit-" || true
      break
    fi
    sleep 2
  done
  wait "$pid" || true
  failed=$(grep -m1 -oE '^test model::[a-z0-9_:]+ \.\.\. FAILED' "$log" | sed 's/^test //; s/ \.\.\. FAILED$//' || true)
  controls=$(grep -oE '^test model::[a-z0-9_:]+ - should panic \.\.\. FAILED' "$log" |
    sed 's/^test //; s/ - should panic \.\.\. FAILED$//' | paste -sd, - || true)
  if [ -n "$failed" ]; then
    # Its message: that model alone, once more.
    why=$(cd "$work" && cargo test --lib "$failed" -- --exact 2>&1 |
      grep -m1 -A1 'panicked at' | tail -1 | cut -c1-200 || true)
    echo "$name: caught by $failed ($why)"
  elif [ -n "$controls" ] && grep -qE '^test result: FAILED\.' "$log"; then
    echo "$name: survived the models; only negative controls failed otherwise than expected ($controls)"
  elif grep -qE '^test result: ok\.' "$log"; then
    echo "$name: survived"
  else
    echo "$name: no verdict (the build failed?), see $log"
  fi
}

# One copy of the crate's sources for every mutant of this run, taken now:
# edits made while it runs do not leak into it.
tar --exclude=./target --exclude=./.git -cf "$out/snapshot.tar" .

# Job J runs mutants J, J+JOBS, J+2*JOBS, ... one after another in its own
# work directory.
: >"$out/results.txt"
for ((j = 0; j < jobs; j++)); do
  (
    for ((i = j; i < ${#selected[@]}; i += jobs)); do
      run_one "$out/work-$j" "${selected[i]}" | tee -a "$out/results.txt"
    done
  ) &
done
wait
echo
echo "== $(grep -c ': caught' "$out/results.txt" || true) of ${#selected[@]} mutants caught by a model"
while IFS= read -r line; do
  case $line in
    *': caught '*) ;;
    *) echo "$line${known[${line%%:*}]:+ (known: ${known[${line%%:*}]})}" ;;
  esac
done <"$out/results.txt"
