//! Per-architecture spin-wait hint, tick counter and timed spinning.
//!
//! Each architecture module provides the same three things:
//!
//! * `spin_hint()`: the CPU's "I am busy-waiting" instruction;
//! * `ticks()`: a cheap, monotonic, constant-rate counter;
//! * `ticks_per_us()`: that counter's rate, so that a budget given in
//!   nanoseconds can be turned into ticks.
//!
//! Spin budgets are expressed in time, never in iterations: the cost of one
//! `PAUSE` ranges from ~10 to ~140 cycles across x86_64 cores and the cost of
//! aarch64's `ISB` varies as much, so an iteration count means a different
//! time on every machine.

#[cfg(all(target_arch = "aarch64", not(miri)))]
mod aarch64;
#[cfg(all(target_arch = "aarch64", not(miri)))]
pub(crate) use aarch64::{spin_hint, ticks, ticks_per_us};

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod x86_64;
#[cfg(all(target_arch = "x86_64", not(miri)))]
pub(crate) use x86_64::{spin_hint, ticks, ticks_per_us};

#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
mod portable;
#[cfg(any(miri, not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
pub(crate) use portable::{spin_hint, ticks, ticks_per_us};

/// How long the one spinning waiter busy-waits for the lock before it yields
/// once and then sleeps, in nanoseconds.
///
/// A futex sleep and wake costs the sleeper several microseconds before it
/// runs again (two system calls and a trip through the scheduler), so
/// spinning only pays while the expected wait is shorter than that: 2 µs is
/// below that cost and above the 1 µs critical sections of the benchmark
/// matrix, so a spinner catches their release. A sweep of 1, 2 and 4 µs
/// (full profile, cells `contended/t2/cs1000/think0`, `t8/cs1000/think0`,
/// `t2/cs100/think0`, `t8/cs1000/think10000` and `handoff/cs1000`) found no
/// difference beyond run-to-run noise: 0.74/0.75/0.78, 0.85/0.86/0.87,
/// 6.6/6.5/7.3, 0.174/0.170/0.171 and 0.68/0.71/0.70 Mops/s (Intel Xeon VM).
/// Swept again over 1, 2 and 4 µs on the 2-core AMD EPYC VM (`benches/sweep.sh`,
/// the seven key inline cells, `benches/results/sweep-x86_64-amd-epyc.md`): flat, spinbit's
/// throughput within 5 % in six cells and within noise in the seventh; 2 µs
/// best or tied in all seven. Swept over 1, 2 and 4 µs on a 2-core Intel
/// Xeon VM (family 6, model 207; the mutex of 63d9f64, one run per value,
/// `benches/results/sweep-x86_64-intel-xeon.md`; the spread is that of the
/// seven runs at the defaults there): a trade, no value best everywhere.
/// 4 µs cost `t4/cs0` (1.42 → 1.15 of the fastest peer's throughput),
/// `t8/cs0` (1.26 → 1.06), `t32/cs0` (1.05 → 0.97, fairness 0.64 → 0.11)
/// and `t8/cs1000` (0.97 against 1.04-1.12), and lifted `t2/cs0` (30.7
/// Mops/s against 27.2-30.4); 1 µs lifted `t16/cs0` (1.13 against
/// 1.01-1.06) and `t64/cs0` (34.2 Mops/s against 31.4-32.9) and cost
/// `t64/cs10000` (0.86 → 0.77) and `handoff-inline/cs0` (0.89).
///
/// With critical sections and no think time, nearly every episode runs
/// out: the holder takes the lock back right after its unlock, before the
/// spinner's next look. Counted on a 2-core Intel Xeon VM (family 6,
/// model 167; commit 5811445, whose mutex is 38aebd2's) with the test build's events `Spun` and `SpinRanOut`
/// (`SPINBIT_DIAG_MACHINE_BACKLOG=1 SPINBIT_DIAG_THREADS=T
/// SPINBIT_DIAG_CS_NS=C SPINBIT_DIAG_UNTIMED=1 cargo test --release --lib
/// hand_off_wait_profile -- --ignored --nocapture`, with
/// `SPINBIT_DIAG_THINK_NS=100` for the think-time cell; three 500 ms
/// windows):
/// 83-85 % of the episodes ran out at `t2/cs100`, 99-100 % at `t2/cs1000`,
/// `t2/cs10000` and `t4/cs1000`, 94-99 % at `t8/cs1000`, `t32/cs1000` and
/// `t64/cs10000`; 27-41 % without critical section (`t2/cs0`, `t8/cs0`)
/// and 3-5 % with 100 ns of think time (`t2/cs0/think100`). They are not
/// what makes those cells cost more CPU per operation than the peers: a
/// budget that each thread halved after an episode that ran out (down to
/// 250 ns) and doubled after one that took the lock moved that cost by
/// under 2 % in the same diagnostic (`t2/cs1000` 2.10 → 2.07 µs,
/// `t32/cs1000` 2.54 → 2.50 µs; a temporary build, not kept).
pub(crate) const SPIN_NS: u64 = 2_000;

/// A thread that took a lock by spinning less than its ping-pong window
/// ago and finds it held again is in a ping-pong: it spins lazily (see
/// [`PING_PONG_PAUSE_NS`]). Until the change described there it slept at
/// once instead. This is the narrowest window, and each thread's first: the
/// window adapts per thread, up to [`PING_PONG_MAX_NS`]; the measurements
/// below are of a fixed window.
///
/// With two threads that re-take the lock as soon as they release it, a
/// spinner catches every release, and the lock then changes hands on every
/// acquisition, each hand-over a cross-core transfer of the lock and the
/// data (~80 ns here, against ~16 ns for an uncontended lock+unlock): the
/// 1-2 thread regression of Go's spin-bit mutex. A thread that lost the lock
/// so soon after spinning for it sleeps instead, the other one runs its
/// acquisitions back to back, and the pair alternates in batches, one wake
/// per batch. Threads whose acquisitions are further apart than the window
/// (long think times, long critical sections) are not affected; 100 ns of
/// think time is not that far apart, and there the pair batches too, though
/// turning the rule off did not raise throughput (docs/benchmarks.md, "Why the cells
/// with 100 ns of think time trail"). 500 ns: with 2 µs (the spin
/// budget) the rule also caught legitimate hand-overs, e.g. two threads that
/// pass the lock back and forth around a 1 µs critical section
/// (`handoff/cs1000`: 0.11 Mops/s at 2 µs, 0.74 at 500 ns, parking_lot 0.69),
/// while `contended/t2/cs0/think0` keeps its gain (32.4 Mops/s at 500 ns).
/// Intel Xeon VM. Swept over 0, 250, 500 and 1000 ns on the 2-core AMD EPYC
/// VM (`benches/sweep.sh`, `benches/results/sweep-x86_64-amd-epyc.md`): flat within noise;
/// 500 best at t8/cs0, t8/cs1000 and t32/cs1000, 0 (the rule off) at the
/// others, and at `t2/cs0` 0 led in two runs (79 and 69 Mops/s against 59
/// and 63), inside that cell's run-to-run spread (52-70): the rule does not
/// measurably help on that CPU. Those measurements are of the rule that
/// slept. With the lazy spin, on a slower AMD EPYC VM (twentieth section
/// of that report): 10 µs lifts `t2/cs0` from 0.84-0.89 to 1.08-1.13 of
/// the fastest peer (its runs no longer fall into a lower band, where
/// batches outlast the window and the pair trades the lock) and drops
/// `handoff-inline/cs1000` from 0.97-1.00 to 0.64; no constant serves both,
/// hence the adaptive window. Swept over 250, 500 and 1000 ns on a 2-core
/// Intel Xeon VM (one run each, `benches/results/sweep-x86_64-intel-xeon-2.md`):
/// flat, every key cell within 5 % of its spread in the six runs at the
/// defaults (`handoff-inline/cs10000` 0.039 Mops/s at 1000 ns against
/// 0.041-0.043).
pub(crate) const PING_PONG_NS: u64 = 500;

/// The widest a thread's ping-pong window grows; [`PING_PONG_NS`] is its
/// narrowest, and a thread's first. Each thread adapts its own window to
/// what its ping-pong pauses find when they end: a pause that ends with
/// the lock held usually ran beside a holder running its acquisitions back
/// to back (a ping-pong, where looking at once would have traded the lock;
/// else a critical section longer than the pause, where the pause cost
/// nothing), and doubles the window; a pause that ends with the lock free,
/// and free for one look gap ([`MAX_LOOK_GAP_NS`], a look per spin hint: a
/// holder in a batch re-takes it within that), delayed a hand-over (two
/// threads that pass the lock back and forth), and halves it. No constant window served
/// both (twentieth section of `benches/results/sweep-x86_64-amd-epyc.md`).
///
/// Measured on a 2-core AMD EPYC VM (twenty-first section of that report).
/// The hand-off diagnostic with 2 threads and no critical section, untimed,
/// three 500 ms windows: 124-128 Mops/s, 97 % of the pauses ending with the
/// lock held, against 71-131 (two bands) with the fixed 500 ns window and
/// 121-147 with a fixed 10 µs one; judging by the first look alone, without
/// the look gap, 60 % did and it reached 89-101. The bench, the cell
/// filtered, three runs each: `contended-inline/t2/cs0/think0` 91-96 Mops/s
/// (fixed 10 µs: 92-96) and `handoff-inline/cs1000` 0.72-0.81 (fixed 10 µs:
/// 0.47-0.52). The sweep profile over 500 (no adaptation), 3000 and 10000,
/// two runs each: spinbit's throughput ratio at `t2/cs0` 0.97 and 0.97,
/// 1.00 and 0.83, 0.98 and 1.13; the other cells, the hand-offs included,
/// within their run-to-run spread. On a 2-core Intel Xeon VM (the sweep
/// profile over 3000, 10000 and 30000, one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): flat, `t2/cs0` 26.3, 29.1
/// and 29.4 Mops/s (27.2-30.4 in the seven runs at the defaults),
/// `handoff-inline/cs1000` 0.79, 0.74 and 0.79 (0.74-0.86), the other key
/// cells within their spread but `handoff-inline/cs0` at 30 µs (4.10
/// Mops/s against 4.23-5.77).
pub(crate) const PING_PONG_MAX_NS: u64 = 10_000;

/// How long a spinner in a ping-pong (see [`PING_PONG_NS`]) waits before its
/// first look at the lock word. The pause falls inside the spin budget
/// ([`SPIN_NS`]), so the episode ends at the same time as any other.
///
/// Two threads that re-take the lock as soon as they release it trade it on
/// nearly every acquisition when the waiting one looks at once: a spinner
/// catches the release on its first or second look, and each trade is a
/// cross-core transfer of the line. Sleeping instead (the rule's first
/// form) makes the pair alternate in batches, but each batch costs a push,
/// a futex wait and a wake, and the batches were short: on the 2-core AMD
/// EPYC VM, `contended-inline/t2/cs0/think0` 44-62 Mops/s against
/// parking_lot 0.13's 86-110 (4 runs of the sweep profile).
/// Pausing first lets the holder run its acquisitions back to back from its
/// own cache, and the pair alternates in batches without sleeping: 116-117
/// against 107-118, and `t32/cs0/think0` 117-133 against 81-110 before
/// (2 runs). Swept on that VM (`benches/sweep.sh`, sweep profile, 2 runs
/// per value): 1000 ns 103-109, 1500 ns 116-117, 2000 ns 116-119 Mops/s at
/// `t2/cs0`, the other six key cells within noise of each other; in an
/// earlier build, 500 ns was too short (88, one run). 1.5 µs: inside the
/// flat range, leaving a quarter of the budget for looks. On a 2-core Intel
/// Xeon VM (1000, 1500 and 2500 ns, one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): `t2/cs0` 25.8, 29.1 and
/// 30.3 Mops/s (27.2-30.4 in the seven runs at the defaults), the same
/// direction as on the EPYC; `handoff-inline/cs1000` 0.79, 0.74 and 0.74
/// (0.74-0.86); the other key cells within their spread.
pub(crate) const PING_PONG_PAUSE_NS: u64 = 1_500;

/// The longest a spinner goes between two looks at the lock word: the
/// spin hints between looks double from one up to this long, measured in
/// hints with the hint's cost calibrated once per process
/// ([`hints_in_ns`]), since that cost varies tenfold between x86 cores.
///
/// Each look pulls the lock's cache line away from the holder, which then
/// pays a transfer to re-take it; a long gap lets a release go unnoticed.
/// This replaced a cap of 16 hints, whose optimum moved with the CPU: on an
/// Intel Xeon VM, 4 against 16 hints gave `handoff/cs1000` 0.72 and 0.85
/// Mops/s (64: 0.63); on the 2-core AMD EPYC VM (PAUSE ~27 ns), 4 won
/// `handoff/cs1000` (0.97 and 0.89 against 0.76 and 0.77) and lost `t2/cs0`
/// before the lazy ping-pong spin existed
/// (`benches/results/sweep-x86_64-amd-epyc.md`). Swept in time on the EPYC
/// VM with the lazy spin (`benches/sweep.sh`, 2 runs per value):
/// `handoff-inline/cs1000` 0.84-0.92 Mops/s at 100 ns, 0.78-0.89 at 200,
/// 0.73-0.76 at 400 (usync 0.83-0.90 in the same runs; 0.71-0.74 with the
/// 16-hint cap); `t2/cs0` 110-117 at all three; the other key cells within
/// noise. 200 ns (7 hints there): in the flat range, and the longer side of
/// it, where the Xeon measurement points. Swept over 100, 200 and 400 ns on
/// a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): flat,
/// `handoff-inline/cs1000` 0.78, 0.83 and 0.77 Mops/s (0.74-0.86 in the
/// seven runs at the defaults), `t2/cs0` 27.5-30.4; `t32/cs0` 30.7 at
/// 100 ns against 31.1-33.4; the other key cells within their spread.
pub(crate) const MAX_LOOK_GAP_NS: u64 = 200;

/// A sleeper that has waited this long (since its starvation clock started
/// in its `lock` call: its first yield, or its first push if it did not
/// yield or if that push found sleepers backed up; [`STARVING_FEW_NS`] if
/// its latest push found few sleepers) is
/// starving: its sleep times out, it marks itself and sets
/// STARVING, and from then on unlocks hand the lock directly to the bottom
/// sleeper while it has marked itself. Stack owners and spin-acquisition
/// looks treat a sleeper that has waited twice this long as starving too.
///
/// Every sleeper that waits this long is served by a hand-off, and a
/// hand-off keeps the lock held while the recipient gets a CPU, so the
/// threshold sets how often the lock pays for one: a threshold near the
/// time a futex wake takes (a few µs) would turn every contended unlock
/// into a hand-off; a much longer one lets waiters wait that much longer.
/// See the `algorithm` docs for the bound it gives. When only other threads
/// judged (before the sleepers' own timeout), 1 ms, as Go's `sync.Mutex`;
/// swept then over 250 µs, 1 ms and 4 ms on the 2-core AMD EPYC VM: 250 µs
/// collapsed the 32-thread cells (t32/cs0 15 against 127 Mops/s). With the
/// sleepers' own timeout, swept over 1, 2 and 4 ms on that VM
/// (`benches/sweep.sh`, 2 runs each, third section of
/// `benches/results/sweep-x86_64-amd-epyc.md`): not flat; throughput ratio
/// to the best peer and fairness at `t32/cs1000` 0.77 and 0.47 (1 ms), 0.87
/// and 0.29 (2 ms), 0.98 and 0.11 (4 ms); `t32/cs0` 0.91, 1.00, 1.08.
/// 2 ms: the no-think-time cells stay at or near the best peer. Swept again
/// over the same values after marked sleepers stopped waiting awake for
/// their hand-off (fourth section there): the same trade-off (`t32/cs1000`
/// 0.67, 0.82, 0.93 and fairness 0.54, 0.32, 0.14; `t64/cs100` 0.58, 0.75,
/// 0.85). Swept once more over 0.5, 1 and 2 ms once they spin for it
/// ([`STARVED_AWAKE_NS`]; sixth section there): 500 µs never leaves
/// starvation mode at 64 threads (`t64/cs100` 0.04 of the best peer, every
/// acquisition a hand-off to a sleeping thread), 1 ms costs `t32/cs1000`
/// 0.89 → 0.70 and `t64/cs1000` 0.53 → 0.24 for fairness at `t8/cs0`
/// 0.42 → 0.57. Swept over 1, 1.5 and 2 ms again with the yield rule
/// ([`ARRIVAL_YIELDS`]; ninth section there, three runs each): the same
/// trade-off, 1 ms raising fairness at `t32/cs100` 0.27 → 0.45 of the
/// fairest peer's and costing `t64/cs10000` 0.74 → 0.57 and `t64/cs1000`
/// 0.85 → 0.65 of the fastest peer's throughput. Swept over 1 and 2 ms
/// once pushes beside a spinner counted the stack (thirteenth section,
/// three runs each): the same trade-off, 1 ms raising fairness at 4-16
/// threads (`t4/cs0` 0.70 → 0.96) and costing `t32/cs10000/think100000`
/// 0.94 → 0.73 and `t64/cs10000` 0.92 → 0.85 of the fastest peer's.
/// Swept over 1, 2 and 4 ms on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon-2.md`; the spread is that of the six runs at the
/// defaults there): flat, no key cell's throughput more than 4 % beyond
/// its spread (the most: `fair-inline/t8/cs0` 30.3 Mops/s at 1 ms against
/// 27.0-29.2). Swept over 2, 4 and 8 ms on a 2-core Intel Xeon VM of
/// family 6, model 167 (one run each,
/// `benches/results/sweep-x86_64-intel-xeon-f6m167.md`): no cell moved in
/// one direction (`t32/cs1000` 0.95, 0.93, 0.94 of the fastest peer,
/// `t64/cs1000` 0.90, 0.91, 0.90).
pub(crate) const STARVING_NS: u64 = 2_000_000;

/// The starvation threshold (see [`STARVING_NS`]) of a sleeper whose latest
/// push found sleepers not backed up ([`crate::lock::BACKLOG`] clear, so at
/// most [`BACKLOG_PER_CPU`] per CPU): [`STARVING_NS`] applies only while
/// they are.
///
/// The sweeps of [`STARVING_NS`] found one trade-off every time: a shorter
/// threshold raises fairness at 4-16 threads and costs throughput at 32-64,
/// where hand-offs to sleeping threads set the pace. The flag tells the two
/// apart at no cost: the pushing thread reads it in the word its push
/// replaced. Swept over 0.5, 1 and 2 ms (fifteenth section of
/// `benches/results/sweep-x86_64-amd-epyc.md`, three interleaved runs each,
/// 2-core AMD EPYC VM; medians of spinbit's ratio to the best peer): 1 ms
/// raised fairness at `t4/cs0` 0.70 → 1.10, `t8/cs0` 0.73 → 0.91,
/// `t8/cs100` 0.66 → 0.84, `t16/cs1000` 0.43 → 0.55 and its geomean over
/// the 19 cells 0.80 → 0.96, for throughput 0.95 → 0.97 (geomean),
/// `t8/cs0` 1.12 → 1.01 and medians 0.01-0.05 lower in five of the seven
/// cells at 32-64 threads without think time; 0.5 ms raised fairness at
/// 8-16 threads with critical sections further (`t16/cs1000` 0.76) and
/// shortened the longest waits (geomean 1.62 → 1.33 of the shortest peer's; 1.66 at 1 ms), but
/// cost those cells' CPU per operation (`t16/cs1000` 0.66 → 0.79 of the
/// cheapest peer's) and fairness at `t32/cs10000/think100000` (0.38,
/// against 0.78 at 1 ms). In the full profile (`benches/results/history-x86_64-amd-epyc.md`)
/// 1 ms also cost throughput at 4-16 threads with 100 ns critical
/// sections (`t8/cs100` 1.09 → 0.97) and, in that single run, at 32-64
/// threads without think time. Three more interleaved runs of 2 and 1 ms
/// (medians over six runs each): fairness geomean 0.82 → 0.90, longest
/// wait 1.87 → 1.60, throughput 0.99 → 0.98, `t8/cs0` 1.11 → 1.00.
/// Swept over 0.5, 1 and 2 ms on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): the same trade-off;
/// 2 ms lifted `t32/cs1000` to 0.99 of the fastest peer (0.89-0.92 in the
/// seven runs at the defaults) at fairness 0.71 (0.73 at 1 ms) and
/// `t16/cs1000` to 1.00 (0.95-1.03) at 0.41 (0.48), and cost `t8/cs1000`
/// (1.12 → 1.00; 1.04-1.12 at the defaults) and the longest wait at
/// `t16/cs1000` (1.97 → 2.98 of the shortest peer's); 0.5 ms raised
/// fairness at `t16/cs1000` (0.69) but not at `t8/cs100` (0.75 → 0.64),
/// and cost `t64/cs10000` (0.88 → 0.81). One run per value on one CPU: a lead
/// for a threshold that adapts, not grounds for another constant.
pub(crate) const STARVING_FEW_NS: u64 = 1_000_000;

/// How long a sleeper that has just marked itself starving spins (spin
/// hints, no yield) for its hand-off before it sleeps again. The holder's
/// unlock hands it the lock, often within a critical section or two, and a
/// recipient that is running spares the lock the wake latency.
///
/// Until commit e48c7d6 the wait yielded for up to 50 µs; under
/// oversubscription a yield sends the thread to the back of the run queue
/// for milliseconds, and the lock handed to it waited there too
/// (`t32/cs10000/think100000` 0.58 of the best peer). Without any wait,
/// every hand-off paid a wake (`t64/cs10000` 0.43). Spinning, swept on the
/// 2-core AMD EPYC VM over 0, 5, 10, 20 and 50 µs (sweep profile, 2 runs
/// each, fifth section of `benches/results/sweep-x86_64-amd-epyc.md`):
/// 5-20 µs are near each other, 50 µs loses the 64-thread cells (0.50-0.56
/// against 0.67-0.81 at 10 µs), and 10 µs was best or within noise of the
/// best in nine of the eleven cells (`t32/cs1000` 0.81 without the wait,
/// 0.96 at 10 µs; `t64/cs1000` 0.53, 0.81; `t32/cs10000/think100000` 0.81,
/// 0.88). 20 µs against 10 µs with the yield rule (ninth section there,
/// three runs each): throughput within the spread but `t64/cs10000` (0.67
/// against 0.74), fairness lower in most cells with critical sections.
/// Swept over 5, 10 and 20 µs on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): flat, every key cell's
/// throughput within its spread in the seven runs at the defaults but two
/// at 20 µs (`t16/cs0` 32.4 Mops/s against 30.0-31.8, `t64/cs100` 7.41
/// against 7.00-7.26). There
/// this wait takes 6 % of the CPU time at `t64/cs1000` (`perf record`;
/// docs/benchmarks.md). On a 2-core Intel Xeon VM (family 6, model 167) it
/// took 3.8 % at `t32/cs100/think1000`, where four waits in five ran out
/// (the test build's events `HandedWhileAwake` and `AwakeWaitRanOut`); a
/// wait that each thread adapted to what its waits found (halved after a
/// run-out, doubled after a hand-off, 1-10 µs) gave no steady gain and cost
/// `t64/cs10000` 4-7 %
/// (`benches/results/ab-x86_64-intel-xeon-f6m167-adaptive-awake.md`).
pub(crate) const STARVED_AWAKE_NS: u64 = 10_000;

/// The most times a waiter that finds another thread spinning (or the lock
/// in starvation mode) yields the CPU before it sleeps, on arrival and
/// again after each wake past the spinner that handed it nothing (see
/// `Lock::wait`). It yields once in
/// any case, and again only while
/// its yields run other threads (see [`YIELD_BUSY_NS`]) and, while
/// sleepers are not backed up, its starvation threshold
/// ([`STARVING_FEW_NS`]) has not passed since its first yield (after that
/// it sleeps and marks itself starving at once; see `lock::start_clock`): on a CPU that
/// others want, a yielding waiter stays runnable and the scheduler shares
/// the CPU between it and them, so it gets its turn at the lock when it
/// next runs; a sleeping one waits for a wake, which under
/// oversubscription comes late (the one woken thread holds SPINNING until
/// it gets a CPU, and unlocks skip their wakes meanwhile), and every
/// sleeper that waits past [`STARVING_NS`] costs the lock a hand-off. On a
/// CPU that nobody else wants, a yield returns at once and the waiter
/// sleeps after the first, as Go's passive spin does.
///
/// Measured on the 2-core AMD EPYC VM (sweep profile with the cs0 cells
/// added, 2-3 runs each; ratios to the best peer): with at most one
/// yield, `t64/cs0` throughput 0.86, fairness 0.15 and max wait 2.4;
/// with up to 8 while they run others, 1.05, 1.10 and 0.8; `t32/cs0`
/// fairness 0.14 → 1.30, `t16/cs0` 0.27 → 1.05, `t64/cs10000` throughput
/// 0.46 → 0.55. The cost: `t8/cs0` throughput 1.17 → 1.03, its CPU per
/// operation 0.48 → 0.87 of the cheapest peer's. Yielding up to 3 or 4
/// times regardless of what the yields did gained less at 64 threads
/// (`t64/cs10000` 0.47-0.51) and lost as much at 4-8 threads. Swept over
/// 1, 4, 8 and 16 (`benches/sweep.sh`, seventh section of
/// `benches/results/sweep-x86_64-amd-epyc.md`): the fairness gains at
/// 16-64 threads are there from 4 on, 16 costs the 8-thread cells more
/// (`t8/cs0` CPU per operation 1.00 of the cheapest peer's). Swept over
/// 2, 8 and 16 on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon.md`): 2 costs the 64-thread
/// cells (`t64/cs10000` 0.87 → 0.57 of the fastest peer's throughput,
/// `t64/cs0` 1.05 → 0.92) and lifted `t16/cs0` (1.05 → 1.25; 1.01-1.06 in
/// the seven runs at the defaults); 16 lifted `t64/cs1000` (0.90 → 0.97;
/// 0.86-0.90) and `t64/cs100` (1.06; 0.93-0.95) and cost `t64/cs0` (0.99;
/// 1.03-1.08).
/// Single runs: no value is best in every cell on that CPU either.
pub(crate) const ARRIVAL_YIELDS: u64 = 8;

/// The longest a waiter polls its own node for its wake before it sleeps
/// in the OS (the poll lasts as long as its measured wake latency, see
/// `Platform::wait_for_wake`): a bound on the CPU one wait can burn when
/// that latency is long because the CPUs are oversubscribed (the woken
/// thread waited for a CPU), where a poll only takes a CPU from others.
pub(crate) const WAKE_POLL_MAX_NS: u64 = 50_000;

/// How many times a thread that waits for another thread to give the
/// waiter stack back yields before it sleeps instead (1 µs, doubling up to
/// 1 ms). Stack owners hold the stack for a few steps, so the yields end
/// the wait unless the owner lost its CPU to a thread that does not yield
/// to it: one of higher real-time priority, such as the waiter itself under
/// `SCHED_FIFO`, for which only a sleep lets the owner run. Not tuned: any
/// count that ends ordinary waits within the yields serves, and waits that
/// reach the sleeps are too rare to measure in the benchmarks.
pub(crate) const STACK_WAIT_YIELDS: u32 = 16;

/// A waiter's yield that took at least this long ran other threads, so the
/// waiter may yield again (see [`ARRIVAL_YIELDS`]). A yield that finds
/// nobody else runnable is one system call, 0.5-0.7 µs on the 2-core AMD
/// EPYC VM; one that runs another thread costs two context switches and
/// that thread's time on the CPU. Compared with 2 µs (same runs as
/// [`ARRIVAL_YIELDS`]): 2 µs yielded more often, for the same results at
/// 16-64 threads and a lower `t8/cs0` (0.99 against 1.03). Swept over 2,
/// 5 and 10 µs (seventh section of the sweep): flat within noise; 10 µs
/// yields less often (`t32/cs0` fairness 0.70 of the fairest peer's,
/// against 1.61 at 5 µs). Swept again over 5, 10 and 20 µs with three runs
/// each (eighth section, same VM): the higher values save CPU at 8-16
/// threads (`t8/cs0` 0.56-0.59 of the cheapest peer's against 0.88) by
/// letting those threads sleep, and lose the fairness and the short
/// longest wait that the yields bought there (`t8/cs0` fairness 0.49-0.65
/// of the fairest peer's against 0.82; `t16/cs0` 0.42 at 20 µs). Swept
/// over 2, 5 and 10 µs on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon-2.md`): 2 µs cost `t8/cs0` (31.7 Mops/s, 0.99
/// of the fastest peer, against 39.1-39.7 in the six runs at the
/// defaults), as on the EPYC; 10 µs cost it less (37.8) and lost fairness
/// at `t16/cs0` (0.48 against 0.81 at 5 µs).
pub(crate) const YIELD_BUSY_NS: u64 = 5_000;

/// How often one thread that takes locks by spinning looks at the oldest
/// sleeper (the look takes the stack while the thread holds the lock; two
/// CASes on a line the holder owns, plus a read of the tail node). A
/// quarter of [`STARVING_NS`], so a starving sleeper is noticed within
/// about a quarter of its threshold by any thread that keeps spinning.
/// Swept over 62.5 µs, 250 µs and 1 ms on the 2-core AMD EPYC VM
/// (`benches/sweep.sh`, `benches/results/sweep-x86_64-amd-epyc.md`): flat within noise
/// (1 ms 10 % lower at t32/cs1000 in one run); 250 µs best in five of the
/// seven key cells. Swept over the same values on a 2-core Intel Xeon VM
/// (two runs per value, `benches/results/sweep-x86_64-intel-xeon-3.md`):
/// flat, every key cell's throughput spread within the peers' run-to-run
/// spread but `t64/cs10000` (0.070-0.078 Mops/s at 62.5 µs, 0.071-0.073 at
/// 250 µs, 0.069-0.070 at 1 ms), whose two runs at 62.5 µs bracket the
/// others.
pub(crate) const LOOK_NS: u64 = 250_000;

/// Sleepers are backed up ([`crate::lock::BACKLOG`]: unlocks wake past the
/// spinner) while a stack owner leaves more than this many per CPU on the
/// stack (the CPUs of the process's affinity mask on Linux, counted once
/// per process without allocating);
/// pops, holders' looks and pushes beside a spinner count the stack.
///
/// With more sleepers than CPUs, the thread a wake handed SPINNING waits
/// for a CPU, and the wakes skipped for it leave the sleepers to the
/// starvation hand-offs. With few, skipping the wake is what keeps the
/// few-thread cells cheap. Measured on the 2-core AMD EPYC VM (sweep
/// profile, 3 runs each, interleaved with the build before pushes counted;
/// ratios to the best peer; twelfth section of
/// `benches/results/sweep-x86_64-amd-epyc.md`), once pushes count: 1 per
/// CPU raised fairness at 16-64 threads with critical sections to
/// 0.75-0.99 (from 0.26-0.42) but cost `t8/cs1000` (throughput 1.09 →
/// 0.80, CPU per operation 0.71 → 1.53) and `t8/cs100` (0.99 → 0.77); 2
/// per CPU kept the 8-thread cells but cost `t16/cs1000` (1.01 → 0.91);
/// 4 per CPU keeps every cell up to 16 threads and raises fairness at
/// `t32/cs1000` 0.26 → 0.93, `t64/cs1000` 0.35 → 0.82, `t64/cs100` 0.39 →
/// 0.79, for 3-6 % of throughput there (`t32/cs100` 0.96 → 0.92,
/// `t64/cs1000` 0.99 → 0.94) and CPU per operation (`t32/cs100` 0.80 →
/// 1.07); 8 per CPU loses the fairness at 32 threads again (0.48-0.51).
/// Before pushes counted (eleventh section), 1 per CPU was best, as the
/// flag was seldom set at all. Swept over 2, 4 and 8 on a 2-core Intel
/// Xeon VM (one run each, `benches/results/sweep-x86_64-intel-xeon-2.md`; the spread
/// is that of the six runs at the defaults there): 2 per CPU lifted the
/// 32-64-thread cells with 100 ns-1 µs critical sections (`t32/cs100`
/// 8.04 Mops/s against 7.42-7.67, `t64/cs100` 7.50 against 6.91-7.35,
/// `t64/cs1000` 0.77 against 0.71-0.76) and cost `t16/cs1000` (0.78
/// against 0.80-0.84), the cell it cost on the EPYC too; 8 per CPU cost
/// `t64/cs1000` (0.70) and `t32/cs100` (7.17). Only 2-CPU machines have
/// been measured: how the rule scales with the number of CPUs is untested.
pub(crate) const BACKLOG_PER_CPU: u64 = 4;

/// How long after its `unlock_fair` handed the lock to a sleeper a thread
/// that waits for the lock again yields instead of sleeping (its next
/// `lock`, or the one in `bump`).
///
/// A fair unlock leaves the lock with a thread that is not running yet: it
/// stays held for that thread's wake and its critical section. A waiter
/// that sleeps meanwhile joins the stack that the next fair unlocks hand
/// from, and once every waiter sleeps, every acquisition waits for a wake
/// while the CPUs idle: with 8 threads, 1 µs critical sections and fair
/// unlocks, 0.04-0.07 Mops/s, near every acquisition a hand-off that
/// waited 10-100 µs for its recipient (`hand_off_wait_profile`), against
/// 0.93 Mops/s with plain unlocks. Waiters that stay awake let the stack
/// drain, and a fair unlock that finds nobody asleep is a plain unlock.
///
/// Swept over 0 (the rule off), 50, 100, 200 and 400 µs on the 2-core AMD
/// EPYC VM (sweep profile with the fair-unlock cells, two interleaved runs
/// each; sixteenth section of `benches/results/sweep-x86_64-amd-epyc.md`):
/// `fair-inline/t8/cs1000` 0.06-0.08, 0.30-0.34, 0.42-0.44, 0.63-0.69 and
/// 0.83-0.93 Mops/s (the faster `parking_lot`: 0.06-0.08), `fair-inline/t2/cs1000`
/// 0.04 and then 0.84-1.02 at every value, `fair-inline/t2/cs0` 57-61
/// and then 78-96 Mops/s; fairness there no lower than with the rule off
/// (`t8/cs1000` 0.68-0.78 off, 0.84-0.91 at 200 µs), and the cells
/// without fair unlocks, which never take this path, within their
/// run-to-run spread. 200 µs: most of the gain of 400, for half the
/// longest busy wait (a thread whose yields find nobody else runnable
/// spins on `sched_yield` until the time is up), and a tenth of
/// [`STARVING_NS`] (a waiter's starvation clock runs while it yields
/// here, unless its first push then finds sleepers backed up). The time a
/// hand-off takes to reach its recipient, which the value covers several
/// times over, depends on the OS and the machine. Swept over 100, 200 and
/// 400 µs on a 2-core Intel Xeon VM (one run each,
/// `benches/results/sweep-x86_64-intel-xeon-2.md`): the same shape, `fair-inline/t8/cs1000`
/// 0.13, 0.41 and 0.61 Mops/s at fairness 0.81, 0.89 and 0.51;
/// `handoff-inline/cs1000` 0.73, 0.77 and 0.82 (0.75-0.80 in the six runs
/// at the defaults); the other key cells within 3 % of their spread.
pub(crate) const HAND_OFF_AWAKE_NS: u64 = 200_000;

/// How many times an unlock in starvation mode yields its CPU right after
/// it handed the lock to a sleeping thread (0 turns the rule off; only 0
/// and 1 have been measured; see `Lock::unlock_starving` and
/// `Lock::hand_off`). In starvation mode the lock stays held from the hand-off
/// until its recipient runs, and under oversubscription a woken thread
/// can wait for a CPU for a whole scheduler slice while the unlocker goes
/// on running. Go's `sync.Mutex` yields there too. Measured on the 2-core
/// AMD EPYC VM with `hand_off_wait_profile` (64 threads, 10 µs critical
/// sections, 100 µs of work between them; two runs of three 500 ms
/// windows per value): without the yield the lock waited for its
/// recipients 33-74 % of the time and ran 0.011-0.015 Mops/s at 124-151 µs
/// of CPU per operation (110 µs of it the work); with it, 0-8 % and
/// 0.017-0.018 Mops/s at 112-118 µs. The price is the tail there: fewer
/// sleepers reach the starvation threshold, so more waiting happens in
/// the unordered normal mode, and the longest `lock()` grew from 53-96 ms
/// to 96-248 ms (both CPUs are busy with the work, so most of that is
/// waiting for a CPU). The sweep profile (`benches/sweep.sh`, values 0
/// and 1, two runs each) moved `t32/cs10000/think100000` from 0.89-0.93
/// of the fastest peer to 0.97-0.98 and no other cell beyond its spread.
/// Yielding after the hand-offs of `unlock_fair` as well gave no
/// measurable change (`fair` 8 threads, 1 µs: 0.70-0.75 Mops/s against
/// 0.67-0.73) and is not done. See the seventeenth sweep in
/// `benches/results/sweep-x86_64-amd-epyc.md`. On a 2-core Intel Xeon VM
/// (values 0 and 1, one run each, `benches/results/sweep-x86_64-intel-xeon-2.md`): the
/// same, 0 moved `t32/cs10000/think100000` to 0.92 of the fastest peer
/// (0.98-0.99 in the six runs at the defaults) and no other key cell more
/// than 5 % beyond its spread.
pub(crate) const STARVING_HAND_OFF_YIELDS: u64 = 1;

/// A tuning constant that the `tuning` feature lets the environment
/// override (benchmarks only: `benches/sweep.sh` sweeps them).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Knob {
    /// [`SPIN_NS`].
    Spin,
    /// [`PING_PONG_NS`].
    PingPong,
    /// [`STARVING_NS`].
    Starving,
    /// [`LOOK_NS`].
    Look,
    /// [`PING_PONG_PAUSE_NS`].
    PingPongPause,
    /// [`MAX_LOOK_GAP_NS`].
    MaxLookGap,
    /// [`STARVED_AWAKE_NS`].
    StarvedAwake,
    /// [`ARRIVAL_YIELDS`].
    ArrivalYields,
    /// [`YIELD_BUSY_NS`].
    YieldBusy,
    /// [`BACKLOG_PER_CPU`].
    BacklogPerCpu,
    /// [`STARVING_FEW_NS`].
    StarvingFew,
    /// [`HAND_OFF_AWAKE_NS`].
    HandOffAwake,
    /// [`STARVING_HAND_OFF_YIELDS`].
    StarvingHandOffYields,
    /// [`PING_PONG_MAX_NS`].
    PingPongMax,
}

impl Knob {
    /// The constant's name; its environment variable is `SPINBIT_<name>`.
    #[cfg(feature = "tuning")]
    fn name(self) -> &'static str {
        match self {
            Knob::Spin => "SPIN_NS",
            Knob::PingPong => "PING_PONG_NS",
            Knob::Starving => "STARVING_NS",
            Knob::Look => "LOOK_NS",
            Knob::PingPongPause => "PING_PONG_PAUSE_NS",
            Knob::MaxLookGap => "MAX_LOOK_GAP_NS",
            Knob::StarvedAwake => "STARVED_AWAKE_NS",
            Knob::ArrivalYields => "ARRIVAL_YIELDS",
            Knob::YieldBusy => "YIELD_BUSY_NS",
            Knob::BacklogPerCpu => "BACKLOG_PER_CPU",
            Knob::StarvingFew => "STARVING_FEW_NS",
            Knob::HandOffAwake => "HAND_OFF_AWAKE_NS",
            Knob::StarvingHandOffYields => "STARVING_HAND_OFF_YIELDS",
            Knob::PingPongMax => "PING_PONG_MAX_NS",
        }
    }
}

/// The value of a tuning constant: `default`, folded at compile time.
#[cfg(not(feature = "tuning"))]
#[inline(always)]
pub(crate) const fn tuned(_knob: Knob, default: u64) -> u64 {
    default
}

/// The value of a tuning constant: the environment variable
/// `SPINBIT_<name>` if it is set, else `default`. Read once per process, at
/// the constant's first use (a slow path), and cached. A value that is not a
/// non-negative integer that fits a `u64` aborts the process with a message
/// naming the variable: the first use can come while the thread's waiter
/// node is on the lock's stack or while it owns the stack, and a panic
/// there would unwind past the node (which lives in the unwound frame) or
/// leave the stack owned for good.
#[cfg(feature = "tuning")]
#[inline]
pub(crate) fn tuned(knob: Knob, default: u64) -> u64 {
    use std::sync::OnceLock;
    static VALUES: [OnceLock<u64>; 14] = [const { OnceLock::new() }; 14];
    *VALUES[knob as usize].get_or_init(|| read_tuning(knob, default))
}

#[cfg(feature = "tuning")]
#[cold]
fn read_tuning(knob: Knob, default: u64) -> u64 {
    let var = format!("SPINBIT_{}", knob.name());
    let bad = |why: String| -> ! {
        eprintln!("spinbit (feature `tuning`): {var}{why}; aborting");
        std::process::abort()
    };
    match std::env::var(&var) {
        Err(std::env::VarError::NotPresent) => default,
        Err(e) => bad(format!(": {e}")),
        Ok(text) => match text.trim().replace('_', "").parse::<u64>() {
            Ok(v) => v,
            Err(e) => bad(format!("={text:?} is not a non-negative integer: {e}")),
        },
    }
}

/// `ns` nanoseconds in ticks of [`ticks`].
#[inline]
pub(crate) fn ns_to_ticks(ns: u64) -> u64 {
    ns.saturating_mul(ticks_per_us()) / 1_000
}

/// How many spin hints take about `ns` nanoseconds on this CPU (at least
/// one). The hint's cost is measured once per process, the first time a
/// spinner needs it: the best of four runs of 256 hints, timed with
/// [`ticks`] (an interrupt can only lengthen a run).
#[inline]
pub(crate) fn hints_in_ns(ns: u64) -> u32 {
    // 32 bits: every target with std has 32-bit atomics, not every one
    // 64-bit ones (32-bit PowerPC and MIPS); 2^32 hints per millisecond is
    // far beyond any CPU.
    use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // Hints per millisecond; 0 until measured.
    static HINTS_PER_MS: AtomicU32 = AtomicU32::new(0);
    let per_ms = match HINTS_PER_MS.load(Relaxed) {
        0 => {
            let rate = u32::try_from(measure_hints_per_ms()).unwrap_or(u32::MAX);
            // Relaxed: the value is self-contained; racing measurements
            // store near-identical values.
            HINTS_PER_MS.store(rate, Relaxed);
            rate
        }
        rate => rate,
    };
    u32::try_from(ns.saturating_mul(u64::from(per_ms)) / 1_000_000).unwrap_or(u32::MAX).max(1)
}

#[cold]
fn measure_hints_per_ms() -> u64 {
    const HINTS: u64 = 256;
    let best = (0..4)
        .map(|_| {
            let t0 = ticks();
            for _ in 0..HINTS {
                spin_hint();
            }
            ticks().wrapping_sub(t0)
        })
        .min()
        .unwrap_or(1)
        .max(1);
    // HINTS hints in `best` ticks; ticks_per_us() * 1000 ticks per ms.
    (HINTS.saturating_mul(ticks_per_us()).saturating_mul(1_000) / best).max(1)
}

/// Returns the tick count at which a spin of `ns` nanoseconds that starts now
/// is over.
#[cfg(test)]
pub(crate) fn deadline_after_ns(ns: u64) -> u64 {
    // The duration first: the first conversion in a process calibrates the
    // counter (about 200 µs of busy waiting).
    let span = ns_to_ticks(ns);
    ticks().wrapping_add(span)
}

/// Busy-waits for about `ns` nanoseconds.
#[cfg(test)]
pub(crate) fn spin_for_ns(ns: u64) {
    let deadline = deadline_after_ns(ns);
    while ticks() < deadline {
        spin_hint();
    }
}

/// Measures the rate of a counter whose frequency the hardware does not
/// report, against the OS monotonic clock, over about 200 µs. Runs once per
/// process, the first time a thread has to wait for a lock.
#[cfg(all(target_arch = "x86_64", not(miri)))]
#[cold]
fn calibrate(ticks: fn() -> u64) -> u64 {
    use std::time::{Duration, Instant};
    let t0 = Instant::now();
    let c0 = ticks();
    let mut elapsed;
    loop {
        spin_hint();
        elapsed = t0.elapsed();
        if elapsed >= Duration::from_micros(200) {
            break;
        }
    }
    let c1 = ticks();
    let ns = elapsed.as_nanos().max(1) as u64;
    (c1.wrapping_sub(c0).saturating_mul(1_000) / ns).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_monotonic_and_rate_is_sane() {
        let a = ticks();
        let b = ticks();
        assert!(b >= a);
        let rate = ticks_per_us();
        // From a 1 MHz counter to a 10 GHz one.
        assert!((1..=10_000).contains(&rate), "ticks per µs = {rate}");
    }

    // x86_64 only: the aarch64 tests run under qemu, whose loops speed up
    // once translated and whose counter is not the hardware's (it failed
    // there with a factor of 2-4); and not under Miri, which interprets
    // every hint.
    #[test]
    #[cfg(target_arch = "x86_64")]
    #[cfg_attr(miri, ignore = "timing on an interpreter")]
    fn hints_in_ns_take_about_that_long() {
        assert_eq!(hints_in_ns(0), 1, "at least one hint");
        let n = hints_in_ns(200_000);
        let t0 = std::time::Instant::now();
        for _ in 0..n {
            spin_hint();
        }
        // Lower bound only (the calibration keeps the fastest of its runs,
        // so the count is not too small): a busy machine may stretch it.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(100), "{n} hints");
    }

    #[test]
    fn spin_for_ns_spins_at_least_that_long() {
        let t0 = std::time::Instant::now();
        spin_for_ns(200_000);
        // Lower bound only: a busy machine may stretch it, never shorten it
        // by more than the calibration error.
        assert!(t0.elapsed() >= std::time::Duration::from_micros(150));
    }
}
