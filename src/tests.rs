//! Unit tests that need the crate's internals: slow-path event counters,
//! contended stress runs of every native platform (the futex parker, the
//! portable parker and the spin ablations), lost-wakeup
//! hunts with a parker that dawdles before it arms, and a look at the waiter
//! stack through the stack lock.

use std::cell::{RefCell, UnsafeCell};
use std::fmt;
use std::ptr;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::arch::spin_for_ns;
use crate::lock::{FLAGS, LOCKED, Lock, SPINNING, STACK_LOCKED};
use crate::platform::native::{AllSpin, Native, NativeWith, NoSpin, OsParker, SpinOne, Variant};
use crate::platform::park::{ParkWatch, StdThreads, ThreadParker};
use crate::platform::{Event, Nudge, Parker, Platform, Wait, Woke};

#[path = "../tests/common/mod.rs"]
mod common;
use common::{Rng, Watchdog};

// The native platform's test variants: the production code with a parker,
// a fault or a time changed so that a rare path runs often.

/// The portable thread-park parker, so that it is tested on Linux too.
type ThreadPark = NativeWith<ThreadParker, SpinOne>;
/// The portable parker where nobody starves ([`NeverStarvesVariant`]): no
/// waiter's park reaches its deadline within a test's time.
type ThreadParkNeverStarves = NativeWith<ThreadParker, NeverStarvesVariant>;
/// `ThreadParkNeverStarves` with a deliberate bug: it gives no park token
/// back (a negative control).
type ThreadParkLosesTokens = NativeWith<ThreadParker<StdThreads, true>, NeverStarvesVariant>;

/// A ping-pong window of 10 ms instead of the adaptive one: nearly every
/// arrival of a thread that spun pauses, so that tests reach the pause
/// however slowly the threads run (sanitizers, emulators).
struct WidePingPongVariant;
impl Variant for WidePingPongVariant {
    const PING_PONG_WINDOW_NS: Option<u64> = Some(10_000_000);
}
type WidePingPong = NativeWith<OsParker, WidePingPongVariant>;

/// A starvation threshold of 20 µs, so that tests see many sleepers mark
/// themselves starving; with either parker.
struct QuickStarveVariant;
impl Variant for QuickStarveVariant {
    const STARVING_NS: Option<u64> = Some(20_000);
}
type QuickStarve<K = OsParker> = NativeWith<K, QuickStarveVariant>;

/// Arrival yields that each take 300 µs (a sleep standing in for a yield
/// that ran other threads), so that a waiter's yields outlast its
/// starvation threshold.
struct SlowYieldVariant;
impl Variant for SlowYieldVariant {
    const ARRIVAL_YIELD_SLEEP_US: Option<u64> = Some(300);
}
type SlowYield = NativeWith<OsParker, SlowYieldVariant>;

/// `SlowYield` with a deliberate bug: the starvation clock starts at the
/// first push, not at the first yield (a negative control).
struct SlowYieldClockAtPushVariant;
impl Variant for SlowYieldClockAtPushVariant {
    const ARRIVAL_YIELD_SLEEP_US: Option<u64> = Some(300);
    const FAULT: crate::platform::Fault = crate::platform::Fault::ClockStartsAtPush;
}
type SlowYieldClockAtPush = NativeWith<OsParker, SlowYieldClockAtPushVariant>;

/// Waiters poll for wake latencies up to 1 s, so that the polls run however
/// slowly the threads run (a loaded machine, sanitizers, emulators), where
/// the production cap would see a wait for a CPU in every wake.
struct PollAlwaysVariant;
impl Variant for PollAlwaysVariant {
    const WAKE_POLL_MAX_NS: Option<u64> = Some(1_000_000_000);
}
type PollAlways = NativeWith<OsParker, PollAlwaysVariant>;

/// Waiters never poll (a cap of 0 on the wake latency): the negative
/// control of the polling test.
struct NoPollVariant;
impl Variant for NoPollVariant {
    const WAKE_POLL_MAX_NS: Option<u64> = Some(0);
}
type NoPoll = NativeWith<OsParker, NoPollVariant>;

/// With a deliberate bug: a panic inside a lock call unwinds out of it (a
/// negative control).
struct UnwindsPastNodeVariant;
impl Variant for UnwindsPastNodeVariant {
    const FAULT: crate::platform::Fault = crate::platform::Fault::UnwindPastNode;
}
type UnwindsPastNode = NativeWith<OsParker, UnwindsPastNodeVariant>;

/// A starvation threshold of a minute: no stack owner judges a waiter
/// starving (and nudges it) however long a loaded machine keeps a test's
/// thread from running.
const NEVER_STARVES_NS: Option<u64> = Some(60_000_000_000);

/// Nobody starves ([`NEVER_STARVES_NS`]).
struct NeverStarvesVariant;
impl Variant for NeverStarvesVariant {
    const STARVING_NS: Option<u64> = NEVER_STARVES_NS;
}
/// Nobody starves, and a woken thread runs late ([`LateRiser`]).
type NeverStarves = NativeWith<LateRiser<OsParker>, NeverStarvesVariant>;

/// `NeverStarves` with a deliberate bug: a requeued condition variable
/// waiter's own push leaves its node flagged as requeued (a negative
/// control).
struct PushKeepsRequeuedVariant;
impl Variant for PushKeepsRequeuedVariant {
    const STARVING_NS: Option<u64> = NEVER_STARVES_NS;
    const FAULT: crate::platform::Fault = crate::platform::Fault::PushKeepsRequeued;
}
type PushKeepsRequeued = NativeWith<LateRiser<OsParker>, PushKeepsRequeuedVariant>;

// ---------------------------------------------------------------------------
// Slow-path event counters
// ---------------------------------------------------------------------------

/// Room for every `Event` variant.
const MAX_EVENTS: usize = crate::platform::EVENTS;

/// Counts of every `Event` variant, indexed by `event as usize`, so variants
/// added to `Event` are counted without any change here.
#[derive(Clone, Copy)]
pub(crate) struct Events {
    counts: [u64; MAX_EVENTS],
    /// One instance of each variant seen, for printing its name.
    seen: [Option<Event>; MAX_EVENTS],
}

impl Default for Events {
    fn default() -> Self {
        Events { counts: [0; MAX_EVENTS], seen: [None; MAX_EVENTS] }
    }
}

impl Events {
    fn add(&mut self, other: &Events) {
        for i in 0..MAX_EVENTS {
            self.counts[i] += other.counts[i];
            self.seen[i] = self.seen[i].or(other.seen[i]);
        }
    }

    /// The counts added since `before` (an earlier copy of these counts).
    fn since(&self, before: &Events) -> Events {
        let mut d = *self;
        for (now, was) in d.counts.iter_mut().zip(before.counts) {
            *now -= was;
        }
        d
    }

    fn get(&self, event: Event) -> u64 {
        self.counts[event as usize]
    }

    /// Wakes (of the oldest waiter: every wake's).
    fn wakes(&self) -> u64 {
        self.get(Event::TailWake)
    }
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (count, event) in self.counts.iter().zip(&self.seen) {
            if let Some(event) = event {
                m.entry(event, count);
            }
        }
        m.finish()
    }
}

thread_local! {
    static EVENTS: RefCell<Events> = RefCell::new(Events::default());
}

thread_local! {
    /// Test hook: `record` panics when this thread records the event with
    /// this index (see `a_panic_inside_a_lock_call_aborts`).
    static PANIC_ON: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Called by the native platforms' `Platform::record` in test builds.
pub(crate) fn record(event: Event) {
    let i = event as usize;
    assert!(i < MAX_EVENTS, "raise MAX_EVENTS in src/tests.rs for {event:?}");
    if PANIC_ON.get() == Some(i) {
        PANIC_ON.set(None);
        panic!("a panic injected at {event:?}");
    }
    EVENTS.with_borrow_mut(|e| {
        e.counts[i] += 1;
        e.seen[i] = Some(event);
    });
}

/// This thread's counts so far.
fn my_events() -> Events {
    EVENTS.with_borrow(|e| *e)
}

/// Adds this thread's counts to a test's total when it is dropped, at the
/// end of the worker thread (also when the worker panics).
struct Tally<'a>(&'a Mutex<Events>);

impl Drop for Tally<'_> {
    fn drop(&mut self) {
        let mine = EVENTS.with_borrow_mut(std::mem::take);
        self.0.lock().unwrap_or_else(|e| e.into_inner()).add(&mine);
    }
}

#[test]
fn every_event_variant_is_counted_and_named() {
    let total = Mutex::new(Events::default());
    thread::scope(|s| {
        for n in 1..=3 {
            let total = &total;
            s.spawn(move || {
                let _tally = Tally(total);
                for _ in 0..n {
                    record(Event::TailWake);
                }
                record(Event::StackBusy);
            });
        }
    });
    let total = total.into_inner().unwrap();
    assert_eq!(total.get(Event::TailWake), 6);
    assert_eq!(total.get(Event::StackBusy), 3);
    assert_eq!(total.get(Event::Parked), 0);
    assert_eq!(format!("{total:?}"), "{StackBusy: 3, TailWake: 6}");
}

// ---------------------------------------------------------------------------
// A lock over any native platform
// ---------------------------------------------------------------------------

/// A lock over any native platform, with non-atomic data.
struct Guarded<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> {
    lock: Lock<P>,
    data: UnsafeCell<u64>,
}

// SAFETY: `data` is only touched with `lock` held.
unsafe impl<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> Sync for Guarded<P> {}

impl<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>> Guarded<P> {
    fn new() -> Self {
        Guarded { lock: Lock { state: AtomicPtr::new(ptr::null_mut()) }, data: UnsafeCell::new(0) }
    }

    fn increment(&self) {
        self.lock.lock();
        // SAFETY: locked; a plain read-modify-write that loses updates
        // without mutual exclusion.
        unsafe { *self.data.get() = std::hint::black_box(*self.data.get()) + 1 };
        // SAFETY: locked above.
        unsafe { self.lock.unlock() };
    }

    /// Like [`Guarded::increment`], with a random critical section between
    /// the read and the write, so that a lost update shows.
    fn increment_slowly(&self, rng: &mut Rng) {
        self.lock.lock();
        // SAFETY: locked above, and unlocked once here; the plain
        // read-modify-write around the critical section loses updates
        // without mutual exclusion.
        unsafe {
            let v = std::hint::black_box(*self.data.get());
            critical_section(rng);
            *self.data.get() = v + 1;
            self.lock.unlock();
        }
    }

    /// Like [`Guarded::increment_slowly`], but unlocks with `unlock_fair`,
    /// and one call in sixteen first bumps the lock.
    fn increment_fairly(&self, rng: &mut Rng) {
        self.lock.lock();
        // SAFETY: locked above and unlocked once here (a bump gives the
        // lock back before it returns); the plain read-modify-write after
        // the bump loses updates without mutual exclusion.
        unsafe {
            if rng.below(16) == 0 {
                self.lock.bump();
            }
            let v = std::hint::black_box(*self.data.get());
            critical_section(rng);
            *self.data.get() = v + 1;
            self.lock.unlock_fair();
        }
    }

    /// Like [`Guarded::increment_slowly`], but gives up at `deadline`;
    /// returns whether it incremented.
    fn increment_slowly_until(&self, rng: &mut Rng, deadline: Instant) -> bool
    where
        P::Parker: Parker<Deadline = Instant>,
    {
        if !(self.lock.try_lock() || self.lock.lock_until_slow(deadline)) {
            return false;
        }
        // SAFETY: as in `increment_slowly`.
        unsafe {
            let v = std::hint::black_box(*self.data.get());
            critical_section(rng);
            *self.data.get() = v + 1;
            self.lock.unlock();
        }
        true
    }

    /// The data, once every thread that touched it has been joined.
    fn value(&self) -> u64 {
        // SAFETY: the callers have joined every other thread.
        unsafe { *self.data.get() }
    }

    /// The whole state word: 0 once the lock is free and nobody waits.
    fn word(&self) -> usize {
        self.lock.state.load(Relaxed).addr()
    }

    /// Counts the sleeping waiters.
    fn sleepers(&self) -> usize {
        self.with_stack(|top| {
            let mut n = 0;
            let mut node = top;
            while !node.is_null() {
                n += 1;
                // SAFETY: we own the stack lock, so every linked node is live.
                node = unsafe { crate::lock::next_of(node) };
            }
            n
        })
    }

    /// Runs `f` on the top node (or null), taking the stack lock as an
    /// unlocker would so that no node is removed meanwhile.
    fn with_stack<R>(&self, f: impl FnOnce(*mut crate::lock::Node<P>) -> R) -> R {
        let mut s = self.lock.state.load(Relaxed);
        loop {
            if s.addr() & STACK_LOCKED != 0 {
                thread::yield_now();
                s = self.lock.state.load(Relaxed);
                continue;
            }
            match self.lock.state.compare_exchange(
                s,
                s.map_addr(|a| a | STACK_LOCKED),
                Acquire,
                Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let r = f(s.map_addr(|a| a & !FLAGS));
        self.lock.state.fetch_and(!STACK_LOCKED, Release);
        r
    }
}

// ---------------------------------------------------------------------------
// Contended stress runs
// ---------------------------------------------------------------------------

/// Each event that the contended runs must show, at least this many times.
const MIN_EVENTS: u64 = 2_000;

/// Threads of a contended run: four per core on the 2-core CI machine.
const THREADS: usize = if cfg!(miri) { 3 } else { 8 };
/// Acquisitions per thread of a contended run.
const ROUNDS: u64 = if cfg!(miri) { 15 } else { 3_000 };

/// A critical section: a quarter of them outlast the spinner's 2 µs budget
/// (3-6 µs), and a quarter sleep while holding the lock (20 µs asked, more
/// in practice). Sleeping holders are what make waiters park: a holder that
/// stays on its CPU is mostly waited out by a spinner and by yields.
fn critical_section(rng: &mut Rng) {
    match rng.below(16) {
        0..4 => spin_for_ns(3_000 + rng.below(3_000)),
        4..8 => thread::sleep(Duration::from_micros(20)),
        _ => {}
    }
}

/// Time between two acquisitions: none half the time, up to 2 µs of work
/// otherwise, and one in 256 sleeps for 50 µs.
fn think(rng: &mut Rng) {
    match rng.below(256) {
        0..128 => {}
        128 => thread::sleep(Duration::from_micros(50)),
        _ => spin_for_ns(rng.below(2_000)),
    }
}

/// `threads` threads take the lock `rounds` times each, with critical
/// sections and think times from [`critical_section`] and [`think`]. Checks
/// that no update was lost and that the lock ends clean; returns the
/// slow-path events of all the threads.
fn contend<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
    rounds: u64,
) -> Events {
    contend_with::<P>(name, threads, rounds, 1, Guarded::increment_slowly)
}

/// The runs of [`contend`] and [`contend_fair`]: `threads` threads each
/// call `step` (one acquisition that increments the data once) `rounds`
/// times, thinking in between, with random numbers seeded from `seed` on.
fn contend_with<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
    rounds: u64,
    seed: u64,
    step: fn(&Guarded<P>, &mut Rng),
) -> Events {
    let g = Guarded::<P>::new();
    let events = run_rounds(name, threads, rounds, seed, |rng| step(&g, rng));
    assert_eq!(g.value(), threads as u64 * rounds, "lost updates: mutual exclusion failed");
    assert_eq!(g.word(), 0, "lock left dirty");
    events
}

/// `threads` threads each call `step` `rounds` times, thinking in
/// between, with random numbers seeded from `seed` on, under a watchdog,
/// on two CPUs ([`Placement`]). Returns the slow-path events of all the
/// threads.
fn run_rounds(
    name: &str,
    threads: usize,
    rounds: u64,
    seed: u64,
    step: impl Fn(&mut Rng) + Sync,
) -> Events {
    let total = Mutex::new(Events::default());
    let dog = Watchdog::start(name);
    let start = Instant::now();
    let placement = Placement::two_here();
    thread::scope(|s| {
        for t in 0..threads {
            let (step, total, dog) = (&step, &total, &dog);
            s.spawn(move || {
                placement.enter();
                let _tally = Tally(total);
                let mut rng = Rng::new(t as u64 + seed);
                for _ in 0..rounds {
                    step(&mut rng);
                    dog.progress();
                    think(&mut rng);
                }
            });
        }
    });
    let events = total.into_inner().unwrap();
    eprintln!("{name}: {threads} threads x {rounds} rounds in {:?}: {events:?}", start.elapsed());
    events
}

/// The CPU masks of the tests that place their threads: Linux, not under
/// Miri (which has none of these calls). Every call is for the calling
/// thread (pid 0).
#[cfg(all(target_os = "linux", not(miri)))]
mod cpus {
    use std::mem::{size_of, zeroed};

    pub(super) type Set = libc::cpu_set_t;

    /// The calling thread's mask.
    pub(super) fn get() -> Option<Set> {
        // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set, and the
        // call writes the set passed, of the size passed.
        unsafe {
            let mut set: Set = zeroed();
            (libc::sched_getaffinity(0, size_of::<Set>(), &mut set) == 0).then_some(set)
        }
    }

    /// Sets the calling thread's mask; whether it could.
    pub(super) fn set(set: &Set) -> bool {
        // SAFETY: the call reads the set passed, of the size passed.
        unsafe { libc::sched_setaffinity(0, size_of::<Set>(), set) == 0 }
    }

    /// The CPU the calling thread runs on and the `n - 1` after it in its
    /// mask (wrapping around), if the mask has at least `n` CPUs; and how
    /// many CPUs the mask has.
    pub(super) fn here(n: usize) -> Option<(Set, usize)> {
        let mine = get()?;
        // SAFETY: `sched_getcpu` has no preconditions; `CPU_COUNT` reads a
        // valid set.
        let (cpu, count) = unsafe { (libc::sched_getcpu(), libc::CPU_COUNT(&mine)) };
        let all = 8 * size_of::<Set>();
        let cpu = usize::try_from(cpu).ok()?.min(all);
        let count = usize::try_from(count).ok()?;
        if count < n {
            return None;
        }
        // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set; every
        // index passed to `CPU_ISSET` and `CPU_SET` is below `all`, the
        // sets' size in bits.
        unsafe {
            let mut picked: Set = zeroed();
            (cpu..all)
                .chain(0..cpu)
                .filter(|&c| libc::CPU_ISSET(c, &mine))
                .take(n)
                .for_each(|c| libc::CPU_SET(c, &mut picked));
            Some((picked, count))
        }
    }
}

/// Whether the calling thread has only one CPU to run on (its affinity
/// mask or CPU quota, rounded down), saying so on the standard error
/// stream itself, past the test harness's capture, so that a passing run
/// shows the skip: then the tests that watch two threads
/// run side by side (a sleeper polling its node while its waker runs, a
/// spinner's pause while the holder runs, a holder that keeps a sleeper
/// waiting past its deadline) cannot see what they check, and return
/// without checking it. Elsewhere they run as written ([`Placement`] gives
/// them two CPUs on larger machines); under Miri too, which checks the
/// paths they run, not their counts ([`until`] makes one run there).
fn skipped_on_one_cpu(name: &str) -> bool {
    let one = !cfg!(miri) && thread::available_parallelism().is_ok_and(|n| n.get() < 2);
    if one {
        use std::io::Write;
        let _ =
            writeln!(std::io::stderr(), "{name}: skipped: needs two CPUs, and this thread has one");
    }
    one
}

/// Where a contended run's threads run: all of them on the CPU the
/// spawning thread was on and the next one in its mask (Linux), so that
/// they are as oversubscribed on a machine with many idle CPUs as on two:
/// there a yield would find nothing else to run, and the counts
/// [`shortfall`] asks for would not come. Elsewhere, or with two CPUs or
/// fewer, anywhere.
#[derive(Clone, Copy)]
struct Placement {
    #[cfg(all(target_os = "linux", not(miri)))]
    cpus: Option<cpus::Set>,
}

impl Placement {
    /// Two CPUs from where the calling thread runs.
    fn two_here() -> Placement {
        Placement {
            #[cfg(all(target_os = "linux", not(miri)))]
            cpus: cpus::here(2).and_then(|(two, n)| (n > 2).then_some(two)),
        }
    }

    /// Moves the calling thread (one of the run's, which ends with it)
    /// there; where it cannot, it runs anywhere.
    fn enter(&self) {
        #[cfg(all(target_os = "linux", not(miri)))]
        if let Some(set) = &self.cpus {
            cpus::set(set);
        }
    }
}

/// What a contended run fell short of: parking, spinning and waking must
/// each have happened at least `min` times, and spin episodes that ran out
/// without the lock, yielding before a sleep and waking past the spinner
/// (more than 2 sleepers, the test builds' `backlog_sleepers`) and renewing the arrival yields after such a wake a
/// quarter as often, and yielding again (the previous
/// yield ran other threads) and counting the stack on a push beside a
/// spinner a twentieth as often.
fn shortfall(events: &Events, min: u64) -> Vec<&'static str> {
    let mut short = Vec::new();
    if events.get(Event::Parked) < min {
        short.push("Parked");
    }
    if events.get(Event::Spun) < min {
        short.push("Spun");
    }
    if events.get(Event::SpinRanOut) < min.div_ceil(4) {
        short.push("SpinRanOut");
    }
    if events.wakes() < min {
        short.push("TailWake");
    }
    if events.get(Event::Yielded) < min.div_ceil(4) {
        short.push("Yielded");
    }
    if events.get(Event::YieldedAgain) < min.div_ceil(20) {
        short.push("YieldedAgain");
    }
    if events.get(Event::WokePastSpinner) < min.div_ceil(4) {
        short.push("WokePastSpinner");
    }
    if events.get(Event::CountedOnPush) < min.div_ceil(20) {
        short.push("CountedOnPush");
    }
    if events.get(Event::YieldsRenewed) < min.div_ceil(4) {
        short.push("YieldsRenewed");
    }
    short
}

/// At most this many runs of [`contend`] per test.
///
/// A cap, not a target: a path that never runs fails after this many runs,
/// and a path that runs rarely gets the runs it needs. Under
/// ThreadSanitizer (`.ci/run`) a run of the starving timed test with the
/// portable parker handed the lock over only 255-471 times (2-core AMD EPYC
/// VM), so 5 runs fell short of [`MIN_EVENTS`]. On aarch64 under qemu, with
/// three busy loops beside it on the same 2 cores, the timed tests timed
/// out only 86-115 times a run, so 16 runs fell short; 48 leave room for
/// half that. A path that never runs costs 48 runs before the test fails,
/// and at least [`MIN_TRYING`].
const MAX_BATCHES: u32 = 48;

/// The shortest time [`until`] keeps running before it fails. Runs that
/// take milliseconds can all fall while other tests of the same binary
/// keep both CPUs busy: then a run's threads seldom run side by side, and
/// `contended_sleepers_poll_for_their_wake`'s two threads made 48 runs of
/// about 13 sleeps each in 3 s beside five other contended tests (2-core
/// AMD EPYC VM), short of the 500 it asks for, in 3 of 7 such runs; alone,
/// one run is enough.
const MIN_TRYING: Duration = Duration::from_secs(20);

/// Repeats `run` until `short` finds nothing missing from the events of
/// all the runs so far, and fails if [`MAX_BATCHES`] runs, and
/// [`MIN_TRYING`], are not enough.
///
/// One run is enough on a quiet machine. Under load (another test binary,
/// the loom models, a benchmark) waits grow past the starvation threshold,
/// the lock hands over directly instead of letting waiters spin, and a run
/// shows fewer spins and pop wakes: more runs make up for it, so the
/// requirement is on work done; the time is only a floor on how long the
/// runs may take to do it. The price: a path that has become rarer, not
/// absent, passes if it reaches the count within that floor (for runs of
/// milliseconds, some hundreds of runs, where the cap alone allowed 48).
fn until(
    name: &str,
    run: impl Fn() -> Events,
    short: impl Fn(&Events) -> Vec<&'static str>,
) -> Events {
    let start = Instant::now();
    let mut total = Events::default();
    for batch in 1.. {
        total.add(&run());
        if cfg!(miri) {
            break;
        }
        let missing = short(&total);
        if missing.is_empty() {
            break;
        }
        assert!(
            batch < MAX_BATCHES || start.elapsed() < MIN_TRYING,
            "{name}: {batch} runs in {:?} fell short of {missing:?}: {total:?}",
            start.elapsed()
        );
    }
    total
}

/// [`until`] with runs of [`contend`].
fn contend_until<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    short: impl Fn(&Events) -> Vec<&'static str>,
) -> Events {
    until(name, || contend::<P>(name, THREADS, ROUNDS), short)
}

/// As [`contend`], but half the acquisitions (or all) are timed, with deadlines
/// from 1 to 64 µs away: many expire while their waiters sleep, some while
/// a wake or a hand-off is on its way to them, some while they spin.
fn contend_timed<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
    rounds: u64,
    all_timed: bool,
) -> Events
where
    P::Parker: Parker<Deadline = Instant>,
{
    let g = Guarded::<P>::new();
    let total = Mutex::new(Events::default());
    let done = std::sync::atomic::AtomicU64::new(0);
    let dog = Watchdog::start(name);
    let start = Instant::now();
    let placement = Placement::two_here();
    thread::scope(|s| {
        for t in 0..threads {
            let (g, total, dog, done) = (&g, &total, &dog, &done);
            s.spawn(move || {
                placement.enter();
                let _tally = Tally(total);
                let mut rng = Rng::new(t as u64 + 101);
                let mut mine = 0;
                for _ in 0..rounds {
                    if !all_timed && rng.below(2) == 0 {
                        g.increment_slowly(&mut rng);
                        mine += 1;
                    } else {
                        let wait = Duration::from_micros(1 + rng.below(64));
                        let asked = Instant::now();
                        if g.increment_slowly_until(&mut rng, asked + wait) {
                            mine += 1;
                        } else {
                            assert!(asked.elapsed() >= wait, "a timed lock gave up early");
                        }
                    }
                    dog.progress();
                    think(&mut rng);
                }
                done.fetch_add(mine, Relaxed);
            });
        }
    });
    assert_eq!(g.value(), done.into_inner(), "lost updates: mutual exclusion failed");
    assert_eq!(g.word(), 0, "lock left dirty");
    let events = total.into_inner().unwrap();
    eprintln!("{name}: {threads} threads x {rounds} rounds in {:?}: {events:?}", start.elapsed());
    events
}

/// What a timed contended run fell short of: waiters must have timed out
/// asleep and left the stack, found themselves popped while leaving, and
/// given up a handed SPINNING bit.
fn timed_shortfall(events: &Events, need_popped: bool) -> Vec<&'static str> {
    let mut short = Vec::new();
    if events.get(Event::TimedOut) < MIN_EVENTS {
        short.push("TimedOut");
    }
    if need_popped && events.get(Event::PoppedWhileLeaving) < 50 {
        short.push("PoppedWhileLeaving");
    }
    if events.get(Event::GaveUpSpinning) < 10 {
        short.push("GaveUpSpinning");
    }
    short
}

/// [`until`] with runs of [`contend_timed`] and [`timed_shortfall`].
fn contend_timed_until<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    need_popped: bool,
) -> Events
where
    P::Parker: Parker<Deadline = Instant>,
{
    until(
        name,
        || contend_timed::<P>(name, THREADS, ROUNDS, need_popped),
        |e| timed_shortfall(e, need_popped),
    )
}

#[test]
fn contended_timed_futex_parker() {
    contend_timed_until::<Native>("contended_timed_futex_parker", false);
}

#[test]
fn contended_timed_portable_parker() {
    contend_timed_until::<ThreadPark>("contended_timed_portable_parker", false);
}

/// A timed-out waiter is popped before it can leave: rare with a prompt
/// parker (the window is the few instructions between the kernel's timeout
/// and the waiter's CAS on the stack lock), so a parker that dawdles after
/// its timeouts makes it common. Every acquisition is timed, so that the
/// oldest sleeper, the one a wake pops, is a timed one.
#[test]
fn timed_waiters_popped_while_leaving() {
    contend_timed_until::<NativeWith<Dawdle<OsParker>, SpinOne>>(
        "timed_waiters_popped_while_leaving_os",
        true,
    );
    contend_timed_until::<NativeWith<Dawdle<ThreadParker>, SpinOne>>(
        "timed_waiters_popped_while_leaving_portable",
        true,
    );
}

#[test]
fn contended_futex_parker() {
    contend_until::<Native>("contended_futex_parker", |e| shortfall(e, MIN_EVENTS));
}

#[test]
fn contended_portable_parker() {
    contend_until::<ThreadPark>("contended_portable_parker", |e| shortfall(e, MIN_EVENTS));
}

#[test]
fn contended_without_spinning() {
    let events = contend_until::<NoSpin>("contended_without_spinning", |e| {
        let mut short = shortfall(e, MIN_EVENTS);
        short.retain(|&s| {
            !matches!(
                s,
                "Spun"
                    | "SpinRanOut"
                    | "Yielded"
                    | "YieldedAgain"
                    | "WokePastSpinner"
                    | "CountedOnPush"
                    | "YieldsRenewed"
            )
        });
        short
    });
    assert_eq!(events.get(Event::Spun), 0, "{events:?}");
    assert_eq!(events.get(Event::Yielded), 0, "{events:?}");
}

#[test]
fn contended_when_every_waiter_spins() {
    // Nobody holds SPINNING, so nobody yields for it, is woken past it or
    // counts the stack beside it.
    let events = contend_until::<AllSpin>("contended_when_every_waiter_spins", |e| {
        let mut short = shortfall(e, MIN_EVENTS);
        short.retain(|&s| {
            !matches!(
                s,
                "Yielded" | "YieldedAgain" | "WokePastSpinner" | "CountedOnPush" | "YieldsRenewed"
            )
        });
        short
    });
    assert_eq!(events.get(Event::Yielded), 0, "{events:?}");
}

/// As [`contend`], but every unlock is fair (`unlock_fair`), and one
/// acquisition in sixteen first bumps the lock (`bump`: hands it to the
/// oldest sleeper and takes it back).
fn contend_fair<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
    rounds: u64,
) -> Events {
    contend_with::<P>(name, threads, rounds, 201, Guarded::increment_fairly)
}

/// What a run of fair unlocks must show: hand-offs to sleepers, taken by
/// their recipients, waits of the handing threads that yielded instead of
/// sleeping (`Event::AwakeAfterHandOff`), and fair unlocks that found
/// nobody asleep (a twentieth as often).
fn fair_shortfall(events: &Events, min: u64) -> Vec<&'static str> {
    let mut short = Vec::new();
    for (event, name, need) in [
        (Event::Parked, "Parked", min),
        (Event::HandOff, "HandOff", min),
        (Event::HandedLock, "HandedLock", min),
        (Event::AwakeAfterHandOff, "AwakeAfterHandOff", min),
        (Event::FairUnlockEmpty, "FairUnlockEmpty", min.div_ceil(20)),
    ] {
        if events.get(event) < need {
            short.push(name);
        }
    }
    short
}

#[test]
fn contended_fair_unlocks_futex_parker() {
    let name = "contended_fair_unlocks_futex_parker";
    until(
        name,
        || contend_fair::<Native>(name, THREADS, ROUNDS),
        |e| fair_shortfall(e, MIN_EVENTS),
    );
}

#[test]
fn contended_fair_unlocks_portable_parker() {
    let name = "contended_fair_unlocks_portable_parker";
    until(
        name,
        || contend_fair::<ThreadPark>(name, THREADS, ROUNDS),
        |e| fair_shortfall(e, MIN_EVENTS),
    );
}

/// The run of [`contend`] through a public mutex type, `lock_api::Mutex`
/// over `R`: each step locks it, increments the data across a critical
/// section and drops the guard, so `R`'s `unlock` is what releases it.
fn contend_public<R: lock_api::RawMutex + Sync>(name: &str, threads: usize, rounds: u64) -> Events {
    let m = lock_api::Mutex::<R, u64>::new(0);
    let events = run_rounds(name, threads, rounds, 301, |rng| {
        let mut g = m.lock();
        let v = std::hint::black_box(*g);
        critical_section(rng);
        *g = v + 1;
    });
    assert!(!m.is_locked(), "lock left held");
    assert_eq!(m.into_inner(), threads as u64 * rounds, "lost updates: mutual exclusion failed");
    events
}

/// `FairMutex`: every guard drop is a fair unlock, so a contended run shows
/// what the fair runs of [`contend_fair`] show, without one explicit
/// `unlock_fair` (and without the bumps, hence no minimum for them).
#[test]
fn fair_mutex_unlocks_fairly() {
    let name = "fair_mutex_unlocks_fairly";
    until(
        name,
        || contend_public::<crate::RawFairMutex>(name, THREADS, ROUNDS),
        |e| fair_shortfall(e, MIN_EVENTS),
    );
}

/// The check of `fair_mutex_unlocks_fairly` can fail: the same run through
/// `Mutex`, whose guard drops are plain unlocks, finds no fair unlock on an
/// empty stack, and no stay awake after a fair hand-off.
#[test]
fn a_plain_mutex_fails_the_fair_mutex_check() {
    let events = contend_public::<crate::RawMutex>(
        "a_plain_mutex_fails_the_fair_mutex_check",
        THREADS,
        ROUNDS / 4,
    );
    let short = fair_shortfall(&events, 1);
    assert!(
        short.contains(&"FairUnlockEmpty") && short.contains(&"AwakeAfterHandOff"),
        "{short:?} {events:?}"
    );
}

#[test]
#[cfg_attr(miri, ignore = "Miri's clock advances with the interpreter's steps")]
fn staying_awake_after_a_hand_off_is_per_lock_and_ends() {
    // Of the thread that handed a lock over, right after: a preemption
    // between the two calls may take longer than the window, so a few
    // tries.
    assert!(
        (0..100).any(|_| {
            Native::note_hand_off(0x1000);
            Native::awake_after_hand_off(0x1000)
        }),
        "never awake right after a hand-off"
    );
    // Of that lock only, and of that thread only.
    assert!(!Native::awake_after_hand_off(0x2000));
    thread::spawn(|| assert!(!Native::awake_after_hand_off(0x1000))).join().unwrap();
    // For `arch::HAND_OFF_AWAKE_NS` (200 µs) only; the margin covers an
    // emulator's miscalibrated tick rate.
    thread::sleep(Duration::from_millis(20));
    assert!(!Native::awake_after_hand_off(0x1000));
}

#[test]
fn an_uncontended_run_fails_the_fair_check() {
    // The check of the fair runs can fail: one thread never waits, so it
    // hands nothing over and every fair unlock finds the stack empty.
    let events = contend_fair::<Native>("an_uncontended_run_fails_the_fair_check", 1, ROUNDS / 4);
    assert_eq!(
        fair_shortfall(&events, 1),
        ["Parked", "HandOff", "HandedLock", "AwakeAfterHandOff"],
        "{events:?}"
    );
}

/// What a run of sleepers that judge themselves must show: sleepers that
/// marked themselves starving, moves down from the top and from the middle
/// of the stack, moves to just above earlier marks, hand-offs, unlocks
/// that yielded after theirs, and marked sleepers whose spin for their
/// hand-off got it and ran out (each path of `Platform::wait_awake`).
/// (Wakes are rare: nearly every sleeper starves before one comes.)
fn starved_shortfall(e: &Events) -> Vec<&'static str> {
    below(
        e,
        &[
            (Event::Parked, "Parked", MIN_EVENTS),
            (Event::Starved, "Starved", MIN_EVENTS),
            (Event::HandedLock, "HandedLock", MIN_EVENTS),
            (Event::MovedFromTop, "MovedFromTop", MIN_EVENTS / 10),
            (Event::MovedFromMiddle, "MovedFromMiddle", MIN_EVENTS / 10),
            (Event::MovedAboveMarked, "MovedAboveMarked", MIN_EVENTS / 10),
            (Event::YieldedAfterHandOff, "YieldedAfterHandOff", MIN_EVENTS / 10),
            (Event::HandedWhileAwake, "HandedWhileAwake", MIN_EVENTS / 20),
            (Event::AwakeWaitRanOut, "AwakeWaitRanOut", MIN_EVENTS / 10),
            (Event::Nudged, "Nudged", MIN_EVENTS / 10),
            (Event::Rejoined, "Rejoined", MIN_EVENTS / 10),
        ],
    )
}

/// The names of the events that `e` counted fewer times than their minimum.
fn below(e: &Events, mins: &[(Event, &'static str, u64)]) -> Vec<&'static str> {
    mins.iter().filter(|&&(event, _, min)| e.get(event) < min).map(|&(_, name, _)| name).collect()
}

/// What a run of timed waiters that judge themselves must show: waiters
/// that marked themselves starving and then reached their own deadline,
/// beside hand-offs and ordinary timeouts.
fn starved_timed_shortfall(e: &Events) -> Vec<&'static str> {
    below(
        e,
        &[
            (Event::Starved, "Starved", MIN_EVENTS),
            (Event::HandedLock, "HandedLock", MIN_EVENTS),
            (Event::TimedOut, "TimedOut", MIN_EVENTS),
            (Event::LeftStarving, "LeftStarving", MIN_EVENTS / 10),
        ],
    )
}

#[test]
fn contended_sleepers_mark_themselves_starving() {
    // A 20 µs threshold: most sleeps run out, the sleeper marks itself,
    // moves to the bottom and is handed the lock; with both parkers.
    contend_until::<QuickStarve>("contended_sleepers_mark_themselves_starving", starved_shortfall);
    contend_until::<QuickStarve<ThreadParker>>(
        "contended_sleepers_mark_themselves_starving_portable",
        starved_shortfall,
    );
}

#[test]
fn contended_timed_waiters_leave_while_starving() {
    // A 20 µs threshold and deadlines up to 64 µs away: many timed waiters
    // mark themselves starving, move to the bottom, and then reach their
    // own deadline before the hand-off; they leave with STARVING set.
    let name = "contended_timed_waiters_leave_while_starving";
    until(
        name,
        || contend_timed::<QuickStarve>(name, THREADS, ROUNDS, true),
        starved_timed_shortfall,
    );
    let name = "contended_timed_waiters_leave_while_starving_portable";
    until(
        name,
        || contend_timed::<QuickStarve<ThreadParker>>(name, THREADS, ROUNDS, true),
        starved_timed_shortfall,
    );
}

/// The poll before a sleep (`Platform::wait_for_wake`) follows its rule on
/// the native platform: no poll before the thread has measured a wake from
/// the OS; a poll, which sees a wake that comes, while its waits have been
/// shorter than its wakes took; a poll that ends without a wake that does
/// not come; no poll once its waits outlast its wakes, nor once its wakes
/// take longer than the cap (a wait for a CPU). Each case is
/// the others' negative control (a rule that always or never polled fails
/// one of them).
#[test]
#[cfg_attr(miri, ignore = "reads the tick counter and spins for microseconds")]
fn a_sleeper_polls_only_while_its_waits_are_shorter_than_its_wakes() {
    thread::spawn(|| {
        let us = |n: u64| crate::arch::ns_to_ticks(n * 1_000);
        let looks = std::cell::Cell::new(0_u32);
        let woken_at = |n: u32| {
            looks.set(0);
            let looks = &looks;
            move || {
                looks.set(looks.get() + 1);
                looks.get() >= n
            }
        };
        assert!(
            !Native::wait_for_wake(Wait::Stack, None, woken_at(1)),
            "polled before any wake was measured"
        );
        assert_eq!(looks.get(), 0, "looked before any wake was measured");
        // Waits of 1 µs, wakes that take 30 µs to run the thread: it polls
        // (its first look, before any look at the clock, sees the wake).
        Native::note_wake(Wait::Stack, us(1), Some(us(30)));
        assert!(Native::wait_for_wake(Wait::Stack, None, woken_at(1)), "did not poll");
        assert_eq!(looks.get(), 1);
        // Short waits, but wakes that take 10 ms to run the thread (it
        // waited for a CPU): no poll under the production cap, ...
        for _ in 0..16 {
            Native::note_wake(Wait::Stack, us(1), Some(us(10_000)));
        }
        assert!(
            !Native::wait_for_wake(Wait::Stack, None, woken_at(1)),
            "polled on oversubscribed CPUs"
        );
        assert_eq!(looks.get(), 0);
        // ... a poll under a cap of 1 s, which sees a wake that comes, and
        // ends on its own without one (10 ms: time for many looks however
        // the thread is scheduled).
        assert!(
            PollAlways::wait_for_wake(Wait::Stack, None, woken_at(3)),
            "missed a wake while polling"
        );
        assert_eq!(looks.get(), 3);
        assert!(!PollAlways::wait_for_wake(Wait::Stack, None, woken_at(u32::MAX)));
        assert!(looks.get() > 1, "gave up at once: {} looks", looks.get());
        // Waits of 20 ms: a wake would most likely come after the poll.
        for _ in 0..16 {
            Native::note_wake(Wait::Stack, us(20_000), None);
        }
        assert!(
            !PollAlways::wait_for_wake(Wait::Stack, None, woken_at(1)),
            "polled although waits outlast wakes"
        );
        assert_eq!(looks.get(), 0);
        // Waits for a notification have a memory of their own: this
        // thread's notifications come at once, while its waits on a stack
        // outlast its wakes.
        Native::note_wake(Wait::Notify, us(1), None);
        assert!(
            PollAlways::wait_for_wake(Wait::Notify, None, woken_at(1)),
            "did not poll for a notification"
        );
        assert!(!PollAlways::wait_for_wake(Wait::Stack, None, woken_at(1)), "polled on the stack");
        // A poll that would outlast the waiter's deadline (the wake latency
        // is about 10 ms here) does not start; one that ends before it does.
        let soon = std::time::Instant::now() + Duration::from_micros(100);
        assert!(
            !PollAlways::wait_for_wake(Wait::Notify, Some(soon), woken_at(1)),
            "polled past the deadline"
        );
        assert_eq!(looks.get(), 0);
        let later = std::time::Instant::now() + Duration::from_secs(60);
        assert!(
            PollAlways::wait_for_wake(Wait::Notify, Some(later), woken_at(1)),
            "did not poll before a far deadline"
        );
        // Notifications that outlast the wakes end those polls too.
        for _ in 0..16 {
            Native::note_wake(Wait::Notify, us(20_000), None);
        }
        assert!(
            !PollAlways::wait_for_wake(Wait::Notify, None, woken_at(1)),
            "polled for a late notification"
        );
        assert_eq!(looks.get(), 0);
    })
    .join()
    .unwrap();
}

/// Two threads, holds of 3-6 µs (past the spinner's budget, so the waiter
/// sleeps) and short think times: waits on the stack are a hold long,
/// shorter than a wake from the OS takes, so sleepers poll for their wake
/// and most wakes find them polling (on `PollAlways`, whatever a wake
/// takes on the machine running the test). Checks exclusion as every
/// contended run does, and returns the events.
fn contend_polling<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
) -> Events {
    let guarded = Guarded::<P>::new();
    // The whole `Guarded` (which is `Sync`), not its fields, goes to the threads.
    let g = &guarded;
    let events = run_rounds(name, threads, ROUNDS, 7, move |rng| {
        g.lock.lock();
        // SAFETY: locked above, unlocked once here; a lost update shows.
        unsafe {
            let v = std::hint::black_box(*g.data.get());
            spin_for_ns(3_000 + rng.below(3_000));
            *g.data.get() = v + 1;
            g.lock.unlock();
        }
    });
    assert_eq!(guarded.value(), threads as u64 * ROUNDS, "lost updates: mutual exclusion failed");
    assert_eq!(guarded.word(), 0, "lock left dirty");
    events
}

/// What a run of [`contend_polling`] fell short of: sleeps, and wakes that
/// found their sleeper polling, each at least a quarter of [`MIN_EVENTS`].
fn polling_shortfall(e: &Events) -> Vec<&'static str> {
    below(
        e,
        &[
            (Event::Parked, "Parked", MIN_EVENTS / 4),
            (Event::WokenWhilePolling, "WokenWhilePolling", MIN_EVENTS / 4),
        ],
    )
}

#[test]
fn contended_sleepers_poll_for_their_wake() {
    if skipped_on_one_cpu("contended_sleepers_poll_for_their_wake") {
        return;
    }
    let name = "contended_sleepers_poll_for_their_wake";
    until(name, || contend_polling::<PollAlways>(name, 2), polling_shortfall);
}

#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads: Miri's run is too short for a sleep")]
fn a_contended_run_without_polls_fails_the_polling_check() {
    // The check above can fail on a run that sleeps: nobody polls.
    let events =
        contend_polling::<NoPoll>("a_contended_run_without_polls_fails_the_polling_check", 2);
    assert!(events.get(Event::Parked) > 0, "nobody slept: {events:?}");
    assert_eq!(events.get(Event::WokenWhilePolling), 0, "{events:?}");
    assert!(polling_shortfall(&events).contains(&"WokenWhilePolling"));
}

#[test]
fn an_uncontended_run_fails_the_polling_check() {
    // The check above can fail: one thread never sleeps.
    let events = contend_polling::<PollAlways>("an_uncontended_run_fails_the_polling_check", 1);
    assert_eq!(polling_shortfall(&events), ["Parked", "WokenWhilePolling"]);
}

/// Two threads pass a turn back and forth `rounds` times through a
/// condition variable (wait while it is not your turn, pass it,
/// `notify_one`), as a ping-pong does; checks that every turn was taken and
/// returns the events. A notification comes as soon as the other thread
/// runs, sooner than a wake from the OS: waiters poll for it (on
/// `PollAlways`, however long a wake takes on the machine running the test).
fn condvar_ping_pong<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    rounds: u64,
) -> Events {
    let guarded = Guarded::<P>::new();
    let cond = crate::condvar::Cond::<P> { word: AtomicPtr::new(ptr::null_mut()) };
    let total = Mutex::new(Events::default());
    let dog = Watchdog::start(name);
    thread::scope(|s| {
        for me in 0..2_u64 {
            let (g, cond, total, dog) = (&guarded, &cond, &total, &dog);
            s.spawn(move || {
                let _tally = Tally(total);
                g.lock.lock();
                // SAFETY: `data` (the turns taken; even: thread 0's turn)
                // is read and written with the lock held, which `wait`
                // gives back before it returns; unlocked once at the end.
                unsafe {
                    for _ in 0..rounds {
                        while *g.data.get() % 2 != me {
                            cond.wait(&g.lock, || g.lock.unlock(), None);
                        }
                        *g.data.get() += 1;
                        cond.notify_one();
                        dog.progress();
                    }
                    g.lock.unlock();
                }
            });
        }
    });
    assert_eq!(guarded.value(), 2 * rounds, "a turn was lost");
    let events = total.into_inner().unwrap();
    eprintln!("{name}: {rounds} round trips: {events:?}");
    events
}

/// What a [`condvar_ping_pong`] fell short of: notifications, and
/// notifications that found their waiter polling, each at least a quarter
/// of [`MIN_EVENTS`].
fn condvar_polling_shortfall(e: &Events) -> Vec<&'static str> {
    below(
        e,
        &[
            (Event::CondWoken, "CondWoken", MIN_EVENTS / 4),
            (Event::CondPolled, "CondPolled", MIN_EVENTS / 4),
        ],
    )
}

#[test]
fn condvar_waiters_poll_for_their_notification() {
    if skipped_on_one_cpu("condvar_waiters_poll_for_their_notification") {
        return;
    }
    let name = "condvar_waiters_poll_for_their_notification";
    until(name, || condvar_ping_pong::<PollAlways>(name, ROUNDS), condvar_polling_shortfall);
}

#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads: Miri's run is too short for a sleep")]
fn a_condvar_ping_pong_without_polls_fails_the_polling_check() {
    // The check above can fail: nobody polls, every notification wakes a
    // sleeper.
    let events = condvar_ping_pong::<NoPoll>(
        "a_condvar_ping_pong_without_polls_fails_the_polling_check",
        ROUNDS,
    );
    assert!(events.get(Event::CondWoken) > 0, "nobody was notified: {events:?}");
    assert_eq!(condvar_polling_shortfall(&events), ["CondPolled"]);
}

/// `waiters` threads make `rounds` timed waits each (deadlines 1-200 µs
/// away) on one condition variable while two notifiers call `notify_one`
/// and `notify_all`, each with the mutex held (a requeue) or free (a
/// hand-over, or a wake), until the waiters are done. Every wait that
/// returns notified counts itself under the mutex; the notifications' own
/// counts must add up to exactly that (a timed-out waiter is never
/// counted, a counted one never reports a timeout). Waiters poll for their
/// notification (on `PollAlways`), so polls race timeouts, requeues and
/// hand-overs. Returns the events.
fn condvar_timed_waits_race_notifications<P>(name: &str, waiters: usize, rounds: u64) -> Events
where
    P: Platform<State = AtomicPtr<crate::lock::Node<P>>, Parker: Parker<Deadline = Instant>>,
{
    let guarded = Guarded::<P>::new();
    let cond = crate::condvar::Cond::<P> { word: AtomicPtr::new(ptr::null_mut()) };
    let (notified, waiting) = (AtomicU64::new(0), AtomicUsize::new(waiters));
    let total = Mutex::new(Events::default());
    let dog = Watchdog::start(name);
    thread::scope(|s| {
        for t in 0..waiters {
            let (g, cond, total, dog, waiting) = (&guarded, &cond, &total, &dog, &waiting);
            s.spawn(move || {
                let _tally = Tally(total);
                let mut rng = Rng::new(t as u64 + 31);
                for _ in 0..rounds {
                    let deadline = Instant::now() + Duration::from_micros(1 + rng.below(200));
                    g.lock.lock();
                    // SAFETY: locked; `wait` gives the lock back before it
                    // returns; `data` is touched only with it held.
                    unsafe {
                        if !cond.wait(&g.lock, || g.lock.unlock(), Some(deadline)) {
                            *g.data.get() += 1;
                        }
                        g.lock.unlock();
                    }
                    dog.progress();
                }
                waiting.fetch_sub(1, Relaxed);
            });
        }
        for t in 0..2 {
            let (g, cond, total, notified, waiting) =
                (&guarded, &cond, &total, &notified, &waiting);
            s.spawn(move || {
                let _tally = Tally(total);
                let mut rng = Rng::new(t + 97);
                while waiting.load(Relaxed) > 0 {
                    let held = rng.one_in(2);
                    if held {
                        g.lock.lock();
                    }
                    let n = if rng.one_in(2) {
                        cond.notify_all()
                    } else {
                        usize::from(cond.notify_one())
                    };
                    notified.fetch_add(n as u64, Relaxed);
                    if held {
                        // SAFETY: locked above.
                        unsafe { g.lock.unlock() };
                    }
                    spin_for_ns(rng.below(20_000));
                }
            });
        }
    });
    assert_eq!(
        guarded.value(),
        notified.load(Relaxed),
        "the notifications' counts differ from the waits that returned notified"
    );
    assert_eq!(guarded.word(), 0, "lock left dirty");
    let events = total.into_inner().unwrap();
    eprintln!("{name}: {waiters} waiters x {rounds} timed waits: {events:?}");
    events
}

/// What a run of [`condvar_timed_waits_race_notifications`] fell short of:
/// polls that saw their wake, timeouts, timeouts that a notification
/// overtook, requeues, hand-overs and wakes.
fn condvar_race_shortfall(e: &Events) -> Vec<&'static str> {
    below(
        e,
        &[
            (Event::CondPolled, "CondPolled", MIN_EVENTS / 4),
            (Event::CondTimedOut, "CondTimedOut", MIN_EVENTS / 4),
            (Event::CondTimeoutOvertaken, "CondTimeoutOvertaken", 1),
            (Event::Requeued, "Requeued", MIN_EVENTS / 4),
            (Event::CondHanded, "CondHanded", MIN_EVENTS / 4),
            (Event::CondWoken, "CondWoken", MIN_EVENTS / 4),
        ],
    )
}

#[test]
fn condvar_timed_waits_that_poll_race_every_kind_of_notification() {
    if skipped_on_one_cpu("condvar_timed_waits_that_poll_race_every_kind_of_notification") {
        return;
    }
    let name = "condvar_timed_waits_that_poll_race_every_kind_of_notification";
    until(
        name,
        || condvar_timed_waits_race_notifications::<PollAlways>(name, 4, ROUNDS),
        condvar_race_shortfall,
    );
}

#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads: Miri's run is too short for a sleep")]
fn condvar_timed_waits_without_polls_fail_the_race_check() {
    // The check above can fail: nobody polls.
    let events = condvar_timed_waits_race_notifications::<NoPoll>(
        "condvar_timed_waits_without_polls_fail_the_race_check",
        4,
        ROUNDS,
    );
    assert_eq!(events.get(Event::CondPolled), 0, "{events:?}");
    assert!(condvar_race_shortfall(&events).contains(&"CondPolled"));
}

#[test]
fn an_uncontended_run_fails_the_starvation_check() {
    // The check above can fail: one thread never sleeps, so never starves.
    let events =
        contend::<QuickStarve>("an_uncontended_run_fails_the_starvation_check", 1, ROUNDS / 4);
    assert_eq!(
        starved_shortfall(&events),
        [
            "Parked",
            "Starved",
            "HandedLock",
            "MovedFromTop",
            "MovedFromMiddle",
            "MovedAboveMarked",
            "YieldedAfterHandOff",
            "HandedWhileAwake",
            "AwakeWaitRanOut",
            "Nudged",
            "Rejoined",
        ],
        "{events:?}"
    );
    // And the timed one: one thread's timed locks never wait.
    let events = contend_timed::<QuickStarve>(
        "an_uncontended_run_fails_the_starvation_check_timed",
        1,
        ROUNDS / 4,
        true,
    );
    assert_eq!(
        starved_timed_shortfall(&events),
        ["Starved", "HandedLock", "TimedOut", "LeftStarving"],
        "{events:?}"
    );
}

#[test]
fn an_uncontended_run_fails_the_slow_path_check() {
    // The check of the contended runs can fail: one thread never waits.
    let events = contend::<Native>("an_uncontended_run_fails_the_slow_path_check", 1, ROUNDS / 4);
    assert_eq!(
        shortfall(&events, 1),
        [
            "Parked",
            "Spun",
            "SpinRanOut",
            "TailWake",
            "Yielded",
            "YieldedAgain",
            "WokePastSpinner",
            "CountedOnPush",
            "YieldsRenewed"
        ],
        "{events:?}"
    );
}

/// Short critical sections, no think time: mostly fast paths and spinner
/// hand-overs.
fn hammer<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(threads: usize, per_thread: u64) {
    let g = Guarded::<P>::new();
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| (0..per_thread).for_each(|_| g.increment()));
        }
    });
    assert_eq!(g.value(), threads as u64 * per_thread, "lost updates: mutual exclusion failed");
    assert_eq!(g.word(), 0, "lock left dirty");
}

/// Two threads take turns through the lock alone: each takes the lock over
/// and over, and updates the data only when its parity says it is its turn.
/// Every update therefore follows a hand-over of the lock from the other
/// thread, most of them through the fast paths (the other thread polls).
/// This is the ThreadSanitizer negative control's test (see `.ci/run`): with
/// an unlock that does not release, each such hand-over is a data race.
fn take_turns<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(name: &str, turns: u64) {
    let g = Guarded::<P>::new();
    let dog = Watchdog::start(name);
    thread::scope(|s| {
        for me in 0..2 {
            let (g, dog) = (&g, &dog);
            s.spawn(move || {
                let mut mine = 0;
                while mine < turns {
                    g.lock.lock();
                    // SAFETY: locked above, and unlocked once by its holder.
                    let my_turn = unsafe {
                        let v = *g.data.get();
                        let my_turn = v % 2 == me;
                        if my_turn {
                            *g.data.get() = v + 1;
                            mine += 1;
                        }
                        g.lock.unlock();
                        my_turn
                    };
                    dog.progress();
                    if !my_turn {
                        // Let the other thread have its turn: a thread that
                        // re-takes the lock at once keeps it from a sleeper.
                        thread::yield_now();
                    }
                }
            });
        }
    });
    assert_eq!(g.value(), 2 * turns);
    assert_eq!(g.word(), 0, "lock left dirty");
}

#[test]
fn two_threads_take_turns() {
    take_turns::<Native>("two_threads_take_turns", if cfg!(miri) { 20 } else { 5_000 });
}

/// Two threads that re-take the lock at once (empty critical sections, no
/// think time), started together, in rounds of 100k acquisitions each until
/// `done` says the events suffice or 30 s have passed (the two threads
/// contend only while both run: under a loaded `cargo test` on two cores
/// twenty rounds once saw only 31 spins). Each thread runs `end` after its
/// last acquisition. Returns the events.
fn ping_pong<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    done: impl Fn(&Events) -> bool,
    end: impl Fn() + Sync,
) -> Events {
    rounds(done, || {
        let g = Guarded::<P>::new();
        let round = Mutex::new(Events::default());
        let start = Barrier::new(2);
        thread::scope(|s| {
            for _ in 0..2 {
                let (round, g, start, end) = (&round, &g, &start, &end);
                s.spawn(move || {
                    let _tally = Tally(round);
                    start.wait();
                    (0..100_000).for_each(|_| g.increment());
                    end();
                });
            }
        });
        assert_eq!(g.value(), 200_000, "lost updates: mutual exclusion failed");
        assert_eq!(g.word(), 0, "lock left dirty");
        round.into_inner().unwrap()
    })
}

/// Runs `round`, which returns its events, until `done` says the events
/// of all rounds suffice or 30 s have passed. Returns those events.
fn rounds(done: impl Fn(&Events) -> bool, mut round: impl FnMut() -> Events) -> Events {
    let mut total = Events::default();
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        total.add(&round());
        if done(&total) {
            break;
        }
    }
    total
}

/// A thread that took the lock by spinning and finds it taken again at
/// once pauses before its first look, and then still takes the lock; many
/// pauses end with the lock held (the other thread runs a batch). The
/// window is widened (`WidePingPong`) so that slow runs (sanitizer,
/// emulator) reach the pause too; with the real, adaptive window a native
/// run on two cores pauses in most spin episodes
/// (`ping_pong_widens_the_window`).
#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads")]
fn ping_pong_spinners_pause() {
    if skipped_on_one_cpu("ping_pong_spinners_pause") {
        return;
    }
    let events = ping_pong::<WidePingPong>(
        |e| e.get(Event::PingPongPause) >= 200 && e.get(Event::PauseEndedHeld) >= 100,
        || (),
    );
    eprintln!("ping_pong_spinners_pause: {events:?}");
    assert!(events.get(Event::PingPongPause) >= 200, "too few ping-pong pauses: {events:?}");
    // Most pauses end with the lock held by the other thread, in the middle
    // of its batch: the window widens. The negative control is
    // `hand_over_pauses_end_with_the_lock_free`, where few do.
    let (held, free) = (events.get(Event::PauseEndedHeld), events.get(Event::PauseEndedFree));
    assert_eq!(held + free, events.get(Event::PingPongPause), "a pause without its ending");
    assert!(held >= 100, "too few pauses that ended with the lock held: {events:?}");
}

/// Two threads that pass the lock back and forth, as the benchmark's
/// `handoff` cells do: the thread whose turn it is takes the lock, hands
/// the turn to the other one while it still holds the lock, runs a
/// critical section of `cs_ns` and unlocks, so that the other thread
/// arrives while the lock is held and nobody re-takes it until that thread
/// has it. Rounds of `turns` hand-overs until `done` says the events
/// suffice or 30 s have passed; each thread runs `start` before its first
/// turn and `end` after its last. Returns the events.
fn hand_over<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    turns: u64,
    cs_ns: u64,
    done: impl Fn(&Events) -> bool,
    (start, end): (impl Fn() + Sync, impl Fn() + Sync),
) -> Events {
    let dog = Watchdog::start(name);
    rounds(done, || {
        let g = Guarded::<P>::new();
        let turn = std::sync::atomic::AtomicU64::new(0);
        let round = Mutex::new(Events::default());
        thread::scope(|s| {
            for me in 0..2 {
                let (round, g, turn, dog) = (&round, &g, &turn, &dog);
                let (start, end) = (&start, &end);
                s.spawn(move || {
                    let _tally = Tally(round);
                    start();
                    for mine in (me..2 * turns).step_by(2) {
                        // Spin for the turn, yielding now and then: the
                        // other test threads share the cores.
                        let mut spins = 0u32;
                        while turn.load(Acquire) != mine {
                            spins += 1;
                            if spins.is_multiple_of(64) {
                                thread::yield_now();
                            } else {
                                std::hint::spin_loop();
                            }
                        }
                        g.lock.lock();
                        turn.store(mine + 1, Release);
                        // SAFETY: locked above, and unlocked once here.
                        unsafe {
                            *g.data.get() += 1;
                            spin_for_ns(cs_ns);
                            g.lock.unlock();
                        }
                        dog.progress();
                    }
                    end();
                });
            }
        });
        assert_eq!(g.value(), 2 * turns, "lost updates: mutual exclusion failed");
        assert_eq!(g.word(), 0, "lock left dirty");
        round.into_inner().unwrap()
    })
}

/// A ping-pong pause that ends with the lock free, and free for one look
/// gap, was a hand-over the pause delayed: two threads passing the lock
/// back and forth around a critical section shorter than the pause
/// (`arch::ping_pong_pause_ns`) find it so. The window is widened
/// (`WidePingPong`) so that every spin episode after a spin acquisition
/// pauses. This is also the negative control of `ping_pong_spinners_pause`'s
/// count of pauses that ended with the lock held (here few do), and of
/// `hand_overs_keep_the_window_narrow`'s share of paused episodes (a window
/// that does not narrow pauses in nearly every one).
#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads")]
fn hand_over_pauses_end_with_the_lock_free() {
    if skipped_on_one_cpu("hand_over_pauses_end_with_the_lock_free") {
        return;
    }
    let events = hand_over::<WidePingPong>(
        "hand_over_pauses_end_with_the_lock_free",
        5_000,
        300,
        // The shares too, not only the count: a loaded machine (a holder
        // descheduled in its section) can make one round's pauses find the
        // lock held, and more rounds dilute that.
        |e| {
            let (held, free) = (e.get(Event::PauseEndedHeld), e.get(Event::PauseEndedFree));
            free >= 200 && held * 4 <= free && e.get(Event::PingPongPause) * 10 > e.get(Event::Spun)
        },
        (|| (), || ()),
    );
    eprintln!("hand_over_pauses_end_with_the_lock_free: {events:?}");
    let (held, free) = (events.get(Event::PauseEndedHeld), events.get(Event::PauseEndedFree));
    let (spun, paused) = (events.get(Event::Spun), events.get(Event::PingPongPause));
    assert_eq!(held + free, paused, "a pause without its ending");
    assert!(free >= 200, "too few pauses that ended with the lock free: {events:?}");
    assert!(held * 4 <= free, "hand-over pauses that found the lock held: {events:?}");
    assert!(paused * 10 > spun, "the narrow window's check passes here: {events:?}");
}

/// A thread's ping-pong window doubles when a pause ends with the lock
/// held, up to `arch::PING_PONG_MAX_NS`, and halves when it ends with the
/// lock free, down to `arch::ping_pong_ns`; and it decides whether a spin
/// acquisition a while ago was recent.
#[test]
#[cfg_attr(miri, ignore = "reads the tick counter and spins for microseconds")]
fn ping_pong_window_adapts_to_what_pauses_find() {
    use crate::platform::native::{ping_pong_bounds_ns, ping_pong_window_ns};
    let (narrowest, widest) = ping_pong_bounds_ns();
    // A fresh thread: the window is per thread.
    thread::spawn(move || {
        assert_eq!(ping_pong_window_ns(), narrowest, "a new thread's window");
        Native::pause_ended(true);
        assert_eq!(ping_pong_window_ns(), 2 * narrowest);
        for _ in 0..64 {
            Native::pause_ended(true);
        }
        assert_eq!(ping_pong_window_ns(), widest, "the widest window");
        Native::pause_ended(false);
        assert_eq!(ping_pong_window_ns(), widest / 2);
        // At the widest window a spin acquisition 2 µs ago is recent (tried
        // until no preemption stretches the 2 µs past the window).
        Native::pause_ended(true);
        let recent = (0..1_000).any(|_| {
            Native::note_spin_acquire();
            spin_for_ns(2_000);
            Native::spun_recently()
        });
        assert!(recent, "a spin acquisition 2 µs ago is not recent at the widest window");
        for _ in 0..64 {
            Native::pause_ended(false);
        }
        assert_eq!(ping_pong_window_ns(), narrowest, "the narrowest window");
        // At the narrowest it is not.
        Native::note_spin_acquire();
        spin_for_ns(2_000);
        assert!(!Native::spun_recently(), "a spin acquisition 2 µs ago is recent at 500 ns");
    })
    .join()
    .unwrap();
}

/// Other threads judge a sleeper starving by age at twice the longer
/// starvation threshold (a backstop: it has a timer of its own), and a
/// requeued condition variable waiter, which has none, at that threshold
/// itself. Half a millisecond either side of each, so that no
/// preemption between the two clock readings changes the answer.
#[test]
#[cfg_attr(miri, ignore = "Miri's clock advances with the interpreter's steps")]
fn stack_owners_judge_a_requeued_waiter_at_the_longer_threshold() {
    use crate::arch::{STARVING_NS, ns_to_ticks};
    let now = Native::now();
    let waited = |ns: u64| now.wrapping_sub(ns_to_ticks(ns));
    let margin = 500_000;
    assert!(Native::starving(waited(2 * STARVING_NS + margin), false));
    assert!(!Native::starving(waited(2 * STARVING_NS - margin), false));
    assert!(Native::starving(waited(STARVING_NS + margin), true));
    assert!(!Native::starving(waited(STARVING_NS - margin), true));
}

/// With the real, adaptive window, a ping-pong widens it (its pauses end
/// with the lock held) until most spin episodes pause; at the narrowest
/// window a two-core run pauses in a fifth to a third of them. A check of
/// timing: it needs native threads on an otherwise idle machine (other
/// processes' load, a sanitizer or an emulator stretch the batches past
/// the widest window), so `cargo test` leaves it out. The pauses' endings need
/// the watch of one look gap: by the first look alone 60 % ended held
/// (twenty-first sweep section), here at least 80 % must, in one of five
/// runs (a run is short, and one now and then finds fewer). Its negative
/// control is `hand_overs_keep_the_window_narrow`, whose run fails the
/// check of the paused share.
///
/// Run by hand only: it checks what the CPU does with the pause, not the
/// lock's correctness, and CPUs differ. On a 2-core AMD EPYC VM of family
/// 26 (model 2) it fails at 49c71e6 as since: 46-55 % of the pauses end
/// held and 42-52 % of the spin episodes pause, in each of ten runs,
/// against 93-96 % held on the older AMD EPYC VMs (issue "many cores"
/// asks whether the ping-pong rule earns its place). On a 2-core Intel
/// Xeon VM of family 6 (model 167) it passes at 1af53f2, in 7 runs of 7:
/// 98-100 % of the pauses end held and 68-81 % of the spin episodes pause.
#[test]
#[ignore = "timing that depends on the CPU: run by hand on an idle machine"]
fn ping_pong_widens_the_window() {
    use crate::platform::native::ping_pong_window_ns;
    let widest = crate::platform::native::ping_pong_bounds_ns().1;
    // Up to five runs, one of which must pass every check: a run is about
    // 0.1 s, and on the 2-core AMD EPYC VM two of six runs in a row found
    // 60-75 % of the pauses held (more parking, fewer pauses) while the
    // others found 93-96 %. The checks' mutants (a first-look judgement:
    // 41 % held) fail every run.
    passes_in_one_of(5, || {
        let widest_at_end = std::sync::atomic::AtomicU64::new(0);
        let events = ping_pong::<Native>(
            |e| e.get(Event::Spun) >= 20_000,
            || _ = widest_at_end.fetch_max(ping_pong_window_ns(), Relaxed),
        );
        let widest_at_end = widest_at_end.into_inner();
        eprintln!(
            "ping_pong_widens_the_window: widest window at a thread's end {widest_at_end} ns, {events:?}"
        );
        let (spun, paused) = (events.get(Event::Spun), events.get(Event::PingPongPause));
        let held = events.get(Event::PauseEndedHeld);
        let failed = if spun < 20_000 {
            Some("the run did not contend")
        } else if paused * 2 < spun {
            Some("fewer than half of the spin episodes paused")
        } else if held * 5 < paused * 4 {
            Some("fewer than 80 % of the pauses ended held")
        } else if widest_at_end < widest / 4 {
            Some("the window did not widen")
        } else {
            None
        };
        failed.map(|why| format!("{why}: widest at end {widest_at_end} ns, {events:?}"))
    });
}

/// Hand-overs narrow the real window: each thread starts with the widest
/// window and passes the lock around a 1 µs critical section, so its
/// pauses end with the lock free, the window halves until it no longer
/// reaches back to the thread's last spin acquisition (at least the
/// critical section ago), and pausing stops. The negative control of the
/// test above, whose run fails this check of the paused share; and
/// `hand_over_pauses_end_with_the_lock_free`'s run, whose window does not
/// narrow, fails it too. A check of timing, run as the test above is: when
/// the threads run slowly (other processes' load, an emulator) the
/// critical section outlasts the pause, the pauses end with the lock held,
/// and the window rightly stays wide. So up to three runs, one of which
/// must pass every check: a run that another process's burst slowed down
/// does not fail the test alone.
#[test]
#[ignore = "timing: needs an idle machine; .ci/run runs it in a step of its own"]
fn hand_overs_keep_the_window_narrow() {
    use crate::platform::native::ping_pong_window_ns;
    let widest = crate::platform::native::ping_pong_bounds_ns().1;
    passes_in_one_of(3, || {
        let widen = || (0..64).for_each(|_| Native::pause_ended(true));
        // Where it stops depends on how fast the threads run (1250 ns
        // under ThreadSanitizer, 625 natively): narrower than it started,
        // at least, in both threads.
        let widest_at_end = AtomicU64::new(0);
        let events = hand_over::<Native>(
            "hand_overs_keep_the_window_narrow",
            5_000,
            1_000,
            |e| e.get(Event::Spun) >= 2_000,
            (widen, || _ = widest_at_end.fetch_max(ping_pong_window_ns(), Relaxed)),
        );
        let widest_at_end = widest_at_end.into_inner();
        eprintln!(
            "hand_overs_keep_the_window_narrow: widest window at a thread's end \
             {widest_at_end} ns, {events:?}"
        );
        let (spun, paused) = (events.get(Event::Spun), events.get(Event::PingPongPause));
        let failed = if spun < 2_000 {
            Some("the run did not contend")
        } else if paused == 0 {
            Some("the widest window never paused")
        } else if paused * 10 > spun {
            Some("hand-overs kept pausing")
        } else if widest_at_end >= widest {
            Some("a thread's window did not narrow")
        } else {
            None
        };
        failed.map(|why| format!("{why}: widest at end {widest_at_end} ns, {events:?}"))
    });
}

/// A check of timing that another process's burst may fail now and then:
/// up to `tries` runs, one of which must pass (`run` returns why it
/// failed, or `None`); otherwise it fails with every run's reason.
fn passes_in_one_of(tries: usize, mut run: impl FnMut() -> Option<String>) {
    let mut runs = Vec::new();
    for _ in 0..tries {
        match run() {
            None => return,
            Some(why) => runs.push(why),
        }
    }
    panic!("no run of {tries} passed: {runs:#?}");
}

/// The check above can fail: without spinning nobody pauses, in a run that
/// contends (threads park).
#[test]
#[cfg_attr(miri, ignore = "needs real parallel threads")]
fn ping_pong_pause_check_fails_without_spinning() {
    let events = ping_pong::<NoSpin>(|e| e.get(Event::Parked) >= 100, || ());
    assert!(events.get(Event::Parked) >= 100, "the run did not contend: {events:?}");
    assert_eq!(events.get(Event::PingPongPause), 0, "{events:?}");
}

#[test]
fn exclusion_with_short_critical_sections() {
    hammer::<Native>(4, if cfg!(miri) { 50 } else { 100_000 });
}

#[test]
fn exclusion_with_short_critical_sections_portable_parker() {
    hammer::<ThreadPark>(4, if cfg!(miri) { 50 } else { 100_000 });
}

// ---------------------------------------------------------------------------
// Lost wakeups
// ---------------------------------------------------------------------------

/// What a test parker ([`Hooked`]) does around its inner parker's calls.
trait Hooks {
    /// Before `prepare`.
    fn before_prepare() {}
    /// After `park` returned `woke`.
    fn after_park(_woke: Woke) {}
    /// After `park_until` returned `woke`.
    fn after_park_until(_woke: Woke) {}
}

/// The parker `K` with `H`'s hooks around its calls; everything else is
/// `K`'s.
#[repr(transparent)]
struct Hooked<K, H>(K, std::marker::PhantomData<H>);

impl<K: Parker, H: Hooks> Parker for Hooked<K, H> {
    fn new() -> Self {
        Hooked(K::new(), std::marker::PhantomData)
    }

    fn prepare(&self) {
        H::before_prepare();
        self.0.prepare();
    }

    fn park(&self) -> Woke {
        let woke = self.0.park();
        H::after_park(woke);
        woke
    }

    type Deadline = K::Deadline;

    fn unparked(&self) -> bool {
        self.0.unparked()
    }
    fn park_until(&self, deadline: K::Deadline) -> Woke {
        let woke = self.0.park_until(deadline);
        H::after_park_until(woke);
        woke
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: forwarded from the caller; `Hooked` is a transparent
        // wrapper, so the inner parker lives exactly as long as `this`.
        unsafe { K::unpark(&raw const (*this).0) }
    }

    type Wake = K::Wake;

    unsafe fn nudge(this: *const Self) -> Nudge<K::Wake> {
        // SAFETY: as in `unpark`.
        unsafe { K::nudge(&raw const (*this).0) }
    }

    fn wake_nudged(wake: K::Wake) {
        K::wake_nudged(wake);
    }

    fn retire(&self) {
        self.0.retire();
    }
}

/// A parker that now and then dawdles (yields the CPU, or spins for a few
/// microseconds) before it arms. Harmless when the lock arms before it
/// publishes the node, as it must; a lock that arms after the push leaves a
/// wide window for the unparker to wake the node before it is armed, and the
/// arming then erases the wake.
type Dawdle<K> = Hooked<K, Dawdling>;

/// [`Dawdle`]'s hooks.
struct Dawdling;

thread_local! {
    static DAWDLE_RNG: RefCell<Rng> = RefCell::new(Rng::new(thread_id_seed()));
}

fn thread_id_seed() -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(thread::current().id())
}

impl Hooks for Dawdling {
    fn before_prepare() {
        match DAWDLE_RNG.with_borrow_mut(|r| r.below(4)) {
            0 => thread::yield_now(),
            1 => spin_for_ns(2_000),
            2 => spin_for_ns(8_000),
            _ => {
                thread::yield_now();
                spin_for_ns(4_000);
            }
        }
    }

    /// Dawdles after a timeout too, before the waiter takes the stack to
    /// leave it: a wide window for an unlocker to pop it meanwhile.
    fn after_park_until(woke: Woke) {
        if woke == Woke::TimedOut {
            thread::yield_now();
            spin_for_ns(DAWDLE_RNG.with_borrow_mut(|r| r.below(20_000)));
        }
    }
}

/// A parker whose thread, once woken, sleeps [`LATE_RISER_SLEEP`] before
/// it returns from `park`: whoever woke it has that long to act before
/// it runs on. Timed parks and polls are as `K`'s.
type LateRiser<K> = Hooked<K, RisingLate>;

/// [`LateRiser`]'s hooks.
struct RisingLate;

/// How long a [`LateRiser`] sleeps after its wake.
const LATE_RISER_SLEEP: Duration = Duration::from_millis(5);

impl Hooks for RisingLate {
    fn after_park(_woke: Woke) {
        thread::sleep(LATE_RISER_SLEEP);
    }
}

/// Threads that take the lock in short bursts and then all meet at a
/// barrier, over and over: each meeting is a moment when nobody is left to
/// unlock, so a sleeper whose wake was lost (or that went to sleep on a free
/// lock) stays asleep, the barrier never opens, and the watchdog fails the
/// test.
fn bursts<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
    threads: usize,
    bursts: u64,
) {
    let g = Guarded::<P>::new();
    let meet = Barrier::new(threads);
    let dog = Watchdog::start(name);
    let total = Mutex::new(Events::default());
    let start = Instant::now();
    thread::scope(|s| {
        for t in 0..threads {
            let (g, meet, dog, total) = (&g, &meet, &dog, &total);
            s.spawn(move || {
                let _tally = Tally(total);
                let mut rng = Rng::new(t as u64 + 100);
                for _ in 0..bursts {
                    meet.wait();
                    for _ in 0..2 + rng.below(4) {
                        g.increment_slowly(&mut rng);
                        dog.progress();
                    }
                }
            });
        }
    });
    assert_eq!(g.word(), 0, "lock left dirty");
    let events = total.into_inner().unwrap();
    eprintln!("{name}: {threads} threads x {bursts} bursts in {:?}: {events:?}", start.elapsed());
}

/// Bursts per lost-wakeup test.
const BURSTS: u64 = if cfg!(miri) { 10 } else { 2_500 };

#[test]
fn no_lost_wakeup_when_arming_dawdles_os_parker() {
    bursts::<NativeWith<Dawdle<OsParker>, SpinOne>>(
        "no_lost_wakeup_when_arming_dawdles_os_parker",
        4,
        BURSTS,
    );
}

#[test]
fn no_lost_wakeup_when_arming_dawdles_portable() {
    bursts::<NativeWith<Dawdle<ThreadParker>, SpinOne>>(
        "no_lost_wakeup_when_arming_dawdles_portable",
        4,
        BURSTS,
    );
}

#[test]
fn no_sleeper_left_behind_at_quiescence() {
    bursts::<Native>("no_sleeper_left_behind_at_quiescence", 3, BURSTS);
}

// ---------------------------------------------------------------------------
// Single scenarios
// ---------------------------------------------------------------------------

/// A holder keeps the lock until every waiter sleeps on the stack; each
/// waiter must then have parked, and one of them must have spun first.
fn waiters_park_and_one_spins<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>() {
    const WAITERS: usize = 4;
    let g = Guarded::<P>::new();
    g.lock.lock();
    let per_thread = thread::scope(|s| {
        let handles: Vec<_> = (0..WAITERS)
            .map(|_| {
                s.spawn(|| {
                    g.increment();
                    my_events()
                })
            })
            .collect();
        while g.sleepers() < WAITERS {
            thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        handles.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(g.value(), WAITERS as u64);
    assert!(per_thread.iter().all(|e| e.get(Event::Parked) >= 1), "{per_thread:?}");
    assert!(per_thread.iter().any(|e| e.get(Event::Spun) >= 1), "{per_thread:?}");
}

#[test]
fn waiters_really_park_and_one_spins() {
    waiters_park_and_one_spins::<Native>();
}

#[test]
fn waiters_really_park_with_the_portable_parker() {
    waiters_park_and_one_spins::<ThreadPark>();
}

#[test]
fn no_spin_ablation_never_spins() {
    let g = Guarded::<NoSpin>::new();
    g.lock.lock();
    let events = thread::scope(|s| {
        let h = s.spawn(|| {
            g.increment();
            my_events()
        });
        while g.sleepers() < 1 {
            thread::sleep(Duration::from_millis(1));
        }
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        h.join().unwrap()
    });
    assert!(events.get(Event::Parked) >= 1, "{events:?}");
    assert_eq!(events.get(Event::Spun), 0, "{events:?}");
}

/// The unlock's guess (`Platform::release_guess`) follows what its
/// thread's unlocks find: nothing before the first, nothing after an
/// unlock that found a sleeper without a guess, the clean word after an
/// uncontended unlock (the next one then guesses right), a pause after an
/// unlock beside a spinner (the guess of a clean word missed), which the
/// next `arch::GUESS_PAUSE` releases count down without guessing, the last
/// of them leaving the word it found; a pause too after a guess that
/// missed on a word with a sleeper (the unlock's slow path), and what it
/// was after an `unlock_fair` that handed the lock to a sleeper.
#[test]
fn an_unlock_guesses_the_word_its_threads_latest_unlock_found() {
    /// Takes `g`'s lock, waits until another thread sleeps on it, then
    /// releases it with `unlock_fair` if `fair`, else with `unlock`.
    fn release_to_a_sleeper(g: &Guarded<Native>, fair: bool) {
        g.lock.lock();
        thread::scope(|s| {
            s.spawn(|| g.increment());
            while g.sleepers() < 1 {
                thread::yield_now();
            }
            // SAFETY: locked above.
            unsafe {
                if fair {
                    g.lock.unlock_fair();
                } else {
                    g.lock.unlock();
                }
            }
        });
    }
    let unit = FLAGS + 1;
    let pause = crate::arch::GUESS_PAUSE * unit;
    // A thread of its own: the guess is per thread, and starts at 0.
    let (first, woke_unguessed, clean, missed_clean, spinner, missed_spinner, after) =
        thread::spawn(move || {
            let g = Guarded::<Native>::new();
            let first = Native::release_guess();
            release_to_a_sleeper(&g, false);
            let woke_unguessed = Native::release_guess();
            g.increment();
            let clean = Native::release_guess();
            let before = my_events();
            g.increment();
            let missed_clean = my_events().since(&before).get(Event::GuessMissed);
            // The bit as a spinning waiter would hold it.
            g.lock.lock();
            g.lock.state.fetch_or(SPINNING, Relaxed);
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            let spinner = (Native::release_guess(), g.word());
            let missed_spinner = my_events().since(&before).get(Event::GuessMissed);
            g.lock.state.fetch_and(!SPINNING, Relaxed);
            let before = my_events();
            for _ in 1..crate::arch::GUESS_PAUSE {
                g.increment();
            }
            let last_paused = Native::release_guess();
            g.increment();
            let paused = (
                last_paused,
                Native::release_guess(),
                my_events().since(&before).get(Event::GuessMissed),
            );
            // The clean word's guess misses on the word with a sleeper.
            release_to_a_sleeper(&g, false);
            let after_wake = Native::release_guess();
            // A fair unlock that hands the lock to a sleeper leaves the guess
            // that the latest plain release (one of the pause) left.
            g.increment();
            let before = my_events();
            release_to_a_sleeper(&g, true);
            let handed = (my_events().since(&before).get(Event::HandOff), Native::release_guess());
            (
                first,
                woke_unguessed,
                clean,
                missed_clean,
                spinner,
                missed_spinner,
                (paused, after_wake, handed),
            )
        })
        .join()
        .unwrap();
    assert_eq!(first, 0, "a thread's first unlock guessed");
    assert_eq!(woke_unguessed, 0, "an unguessed unlock that woke a sleeper left a guess");
    assert_eq!(clean, LOCKED, "an uncontended unlock left no guess of the clean word");
    assert_eq!(missed_clean, 0, "the guess of the clean word missed on the clean word");
    assert_eq!(
        spinner,
        (pause, SPINNING),
        "(the guess, the word) after the miss beside the spinner"
    );
    assert_eq!(missed_spinner, 1, "the guess of the clean word beside a spinner");
    let (paused, after_wake, handed) = after;
    assert_eq!(
        paused,
        (unit, LOCKED, 0),
        "(the guess before the pause's last release, after it, misses during it)"
    );
    assert_eq!(after_wake, pause, "a guess that missed on a word with a sleeper left no pause");
    assert_eq!(handed, (1, pause - unit), "(hand-offs, the guess) after a fair unlock's hand-off");
}

#[test]
fn a_held_lock_with_a_spinner_shows_the_spinning_bit() {
    // A waiter that arrives at a held lock with no spinner takes the bit.
    let g = Guarded::<Native>::new();
    g.lock.lock();
    thread::scope(|s| {
        s.spawn(|| g.increment());
        // It spins, then sleeps with the bit cleared; wait for that.
        while g.sleepers() < 1 {
            thread::yield_now();
        }
        let state = g.lock.state.load(Relaxed).addr();
        // Unlock before the check: a failed assertion must not leave the
        // waiter asleep behind a lock nobody will release.
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        // The sleeping waiter retired SPINNING when it pushed itself. Other
        // flags may be set: on a slow machine (or an interpreter) its sleep
        // can reach the starvation deadline before we look.
        assert_eq!(
            state & (LOCKED | SPINNING),
            LOCKED,
            "sleeping waiter must have dropped SPINNING"
        );
    });
}

#[test]
fn parker_survives_an_early_unpark() {
    // The wake lands before the thread blocks: `park` must not sleep.
    let p = <Native as Platform>::Parker::new();
    p.prepare();
    // SAFETY: armed above and not parked yet.
    unsafe { <Native as Platform>::Parker::unpark(&p) };
    p.park();
}

/// A `Thread::unpark` aimed at a thread while it sleeps in `lock` reaches
/// the thread's own `thread::park` after the lock is taken, as with std's
/// and parking_lot's mutexes: code that checks a condition, takes a lock
/// and then parks (an executor's waker, a hand-written event loop) must not
/// lose that wake to the mutex's parker.
///
/// `watch`, if given: `P` parks with the portable parker, which reports
/// there the tokens it takes that were not its wake and whether it is in a
/// park (a static of the caller's: its tests run at the same time); the
/// futex parker never touches it. With a watch, nobody may starve in `P`:
/// a park that ran out at its starvation deadline would count as a foreign
/// token, and the park after it may find its deadline passed and not
/// sleep, so neither would show the state the test waits for.
fn keeps_the_threads_park_token<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    watch: Option<&'static ParkWatch>,
) {
    // Far above the time a thread with a token takes to return from
    // `park_timeout` (at once, also under emulation or a sanitizer); a
    // lost token makes it wait this long.
    const LIMIT: Duration = Duration::from_secs(2);
    // `park_timeout` may return early without a token (std allows spurious
    // returns): a parker that loses the token must fail in one of the
    // rounds, and a sound one pass in every one.
    const ROUNDS: usize = 3;
    for _ in 0..ROUNDS {
        if let Some(watch) = watch {
            watch.foreign.store(0, Relaxed);
            watch.in_park.store(false, Relaxed);
        }
        let g = Guarded::<P>::new();
        g.lock.lock();
        let (parked, waited) = thread::scope(|s| {
            let h = s.spawn(|| {
                crate::platform::park::PARK_WATCH.set(watch);
                g.increment();
                let parked = my_events().get(Event::Parked);
                let start = Instant::now();
                thread::park_timeout(LIMIT);
                (parked, start.elapsed())
            });
            while g.sleepers() < 1 {
                thread::sleep(Duration::from_millis(1));
            }
            h.thread().unpark();
            if let Some(watch) = watch {
                // Until the sleeper has returned from its park on that
                // token and is in a park again: a wake that came before it
                // looked at its word again would end its wait without a
                // park, leaving the wake's token to its thread, so that a
                // parker that keeps no token could not be told from one
                // that does (and a wake that came before the foreign
                // token's return would merge with it). Acquire: the
                // count's Release orders the flag's clearing after that
                // return before the loads of the flag below, so a set flag
                // is a later park's.
                let start = Instant::now();
                while watch.foreign.load(Acquire) == 0 && start.elapsed() < LIMIT {
                    thread::sleep(Duration::from_millis(1));
                }
                while !watch.in_park.load(Acquire) && start.elapsed() < 2 * LIMIT {
                    thread::sleep(Duration::from_millis(1));
                }
            }
            let ready = watch.map(|w| (w.foreign.load(Acquire) > 0, w.in_park.load(Acquire)));
            // SAFETY: locked above.
            unsafe { g.lock.unlock() };
            let result = h.join().unwrap();
            // Asserted after the unlock, so that a failure cannot leave
            // the sleeper waiting for the lock forever.
            if let Some((took, parked_again)) = ready {
                assert!(took, "the sleeper never took the token");
                assert!(parked_again, "the sleeper never parked again");
            }
            result
        });
        assert!(parked >= 1, "the waiter never slept in `lock`");
        assert!(
            waited < LIMIT / 2,
            "the unpark aimed at the thread while it slept in `lock` was lost: its \
             `park_timeout` after the lock waited {waited:?}"
        );
    }
}

#[test]
fn a_thread_keeps_its_park_token_futex_parker() {
    keeps_the_threads_park_token::<Native>(None);
}

#[test]
fn a_thread_keeps_its_park_token_portable_parker() {
    static WATCH: ParkWatch = ParkWatch::new();
    keeps_the_threads_park_token::<ThreadParkNeverStarves>(Some(&WATCH));
    // The shipped variant, starvation on: a sound parker passes whatever
    // happened before the wake, so no watch is needed.
    keeps_the_threads_park_token::<ThreadPark>(None);
}

/// The merge: a parker's wake and a `Thread::unpark` aimed at its thread
/// both land while the thread sleeps in the parker, before it runs, so that
/// its one `thread::park` return consumes both (a park token does not
/// count). The thread's own `park_timeout` afterwards must still return at
/// once. The two unparks are issued back to back, far within a wake-up's
/// latency, but the thread may still run in between (then there is no
/// merge): a scheduler may even run it at once every time, on the waker's
/// CPU. So in every other round (on Linux) both threads run on one CPU
/// ([`Pinned`]), and the sleeper's wakes do not preempt the waker
/// ([`wakes_without_preempting`]): the two wakes merge. Twenty rounds, so
/// that a parker that loses the merged token (as the portable one did when
/// its park returned with its word already awake) fails in some. `timed`:
/// the parker sleeps with a (far) deadline, as a sleeper with a starvation
/// timer does.
fn keeps_a_merged_park_token<K: Parker<Deadline = Instant>>(timed: bool) {
    const LIMIT: Duration = Duration::from_secs(1);
    for round in 0..20 {
        // Kept to the end of the round, the join included.
        let pinned = if round % 2 == 0 { Pinned::here() } else { None };
        let behind = pinned.is_some();
        let p = K::new();
        // The parker is shared as the lock shares a node: by pointer.
        struct Shared<K>(*const K);
        // SAFETY: the parker is made to be woken from another thread; the
        // test hands its pointer to the one thread that parks on it.
        unsafe impl<K> Send for Shared<K> {}
        let shared = Shared(ptr::from_ref(&p));
        let (armed, is_armed) = std::sync::mpsc::channel();
        let waited = thread::scope(|s| {
            let h = s.spawn(move || {
                let shared = shared;
                // On our CPU (its mask is ours, pinned), where its wake
                // waits for us to block. Where the policy cannot be set,
                // the round is as the unpinned ones.
                if behind && !wakes_without_preempting() {
                    eprintln!("round {round}: could not set SCHED_BATCH");
                }
                // SAFETY: `p` outlives the scope.
                let p = unsafe { &*shared.0 };
                p.prepare();
                armed.send(()).unwrap();
                if timed {
                    assert_eq!(
                        p.park_until(Instant::now() + 10 * LIMIT),
                        Woke::Unparked,
                        "timed out"
                    );
                } else {
                    p.park();
                }
                let start = Instant::now();
                thread::park_timeout(LIMIT);
                start.elapsed()
            });
            // Until the thread sleeps in the parker.
            is_armed.recv().unwrap();
            thread::sleep(Duration::from_millis(5));
            // SAFETY: armed above; the thread does not return from its
            // park before this wake, so `p` is live.
            unsafe { K::unpark(&p) };
            h.thread().unpark();
            h.join().unwrap()
        });
        assert!(
            waited < LIMIT / 2,
            "round {round}: the unpark merged with the parker's wake was lost: the \
             thread's `park_timeout` afterwards waited {waited:?}"
        );
    }
}

/// The calling thread pinned to the CPU it runs on, until dropped (Linux,
/// not under Miri): a thread that the test harness runs other tests on
/// afterwards gets its mask back.
struct Pinned {
    #[cfg(all(target_os = "linux", not(miri)))]
    old: cpus::Set,
}

impl Pinned {
    /// Pins the calling thread where it runs; `None` where it cannot.
    fn here() -> Option<Pinned> {
        #[cfg(all(target_os = "linux", not(miri)))]
        {
            let old = cpus::get()?;
            cpus::set(&cpus::here(1)?.0).then_some(Pinned { old })
        }
        #[cfg(not(all(target_os = "linux", not(miri))))]
        None
    }
}

#[cfg(all(target_os = "linux", not(miri)))]
impl Drop for Pinned {
    fn drop(&mut self) {
        if !cpus::set(&self.old) && !thread::panicking() {
            panic!("could not restore the thread's CPU mask");
        }
    }
}

/// Makes the calling thread's wakes not preempt the thread running on its
/// CPU (`SCHED_BATCH`, at its nice value: no privilege needed to enter it
/// or leave it): on Linux's fair scheduler (CFS, EEVDF) the thread then
/// runs once the other blocks, or at a later tick. Linux, not under Miri;
/// elsewhere nothing. Returns whether it did.
fn wakes_without_preempting() -> bool {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: the call reads the parameters passed and changes the
        // calling thread's policy (a per-thread call, on any libc).
        unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_BATCH, &param) == 0 }
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    false
}

#[test]
fn a_thread_keeps_a_merged_park_token_futex_parker() {
    keeps_a_merged_park_token::<<Native as Platform>::Parker>(false);
    keeps_a_merged_park_token::<<Native as Platform>::Parker>(true);
}

#[test]
fn a_thread_keeps_a_merged_park_token_portable_parker() {
    keeps_a_merged_park_token::<crate::platform::park::ThreadParker>(false);
    keeps_a_merged_park_token::<crate::platform::park::ThreadParker>(true);
}

#[test]
#[should_panic(expected = "was lost")]
fn a_parker_that_loses_the_merged_token_fails_the_merge_check() {
    keeps_a_merged_park_token::<ThreadParker<StdThreads, true>>(false);
}

#[test]
#[should_panic(expected = "was lost")]
fn a_parker_that_keeps_foreign_tokens_fails_the_token_check() {
    static WATCH: ParkWatch = ParkWatch::new();
    keeps_the_threads_park_token::<ThreadParkLosesTokens>(Some(&WATCH));
}

// ---------------------------------------------------------------------------
// Starvation deadlines that wakes keep cutting short
// ---------------------------------------------------------------------------

/// Sets the calling thread's timer slack (how much later than asked the
/// kernel may end its timed sleeps) and returns the previous one.
#[cfg(target_os = "linux")]
fn set_timer_slack(ns: u64) -> u64 {
    // SAFETY: PR_GET_TIMERSLACK and PR_SET_TIMERSLACK read and write the
    // calling thread's slack and no memory of ours.
    unsafe {
        let old = libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0);
        assert!(old >= 0, "PR_GET_TIMERSLACK failed");
        let r = libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
        assert_eq!(r, 0, "PR_SET_TIMERSLACK failed");
        old as u64
    }
}

/// Two threads: one runs 10 µs critical sections back to back, the other
/// locks and unlocks as often as it gets the lock. Each unlock of the
/// first pops the sleeping second one, which often wakes too late to
/// catch the next release, and sleeps again. Its timer slack is 1 s, so
/// the kernel ends a timed sleep whose deadline has passed only at some
/// later timer interrupt (milliseconds), and a wake always comes first:
/// only the parker's own look at the clock lets the starvation deadline
/// pass. The sleeper must mark itself starving and be handed the lock,
/// many times, in 200 ms rounds (up to 30 s). Without that look (the
/// futex parker before it had one), it marked itself 0 times in 30 s.
/// Returns the sleeper's events.
#[cfg(target_os = "linux")]
fn woken_again_and_again<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    name: &str,
) -> Events {
    let dog = Watchdog::start(name);
    rounds(
        |e| e.get(Event::Starved) >= 20 && e.get(Event::HandedLock) >= 20,
        || {
            let g = Guarded::<P>::new();
            let stop = std::sync::atomic::AtomicBool::new(false);
            let sleeper = Mutex::new(Events::default());
            thread::scope(|s| {
                let (g, stop, sleeper, dog) = (&g, &stop, &sleeper, &dog);
                s.spawn(move || {
                    while !stop.load(Relaxed) {
                        g.lock.lock();
                        spin_for_ns(10_000);
                        // SAFETY: locked above.
                        unsafe { g.lock.unlock() };
                        dog.progress();
                    }
                });
                s.spawn(move || {
                    /// Stops the holder when the sleeper is done, also if it
                    /// panics (the holder's progress keeps the watchdog
                    /// quiet).
                    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
                    impl Drop for Stop<'_> {
                        fn drop(&mut self) {
                            self.0.store(true, Relaxed);
                        }
                    }
                    let _stop = Stop(stop);
                    let old = set_timer_slack(1_000_000_000);
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(200) {
                        let before = my_events();
                        g.increment();
                        dog.progress();
                        // Only this thread's events: the holder's are its
                        // own.
                        sleeper.lock().unwrap().add(&my_events().since(&before));
                    }
                    set_timer_slack(old);
                });
            });
            assert_eq!(g.word(), 0, "lock left dirty");
            sleeper.into_inner().unwrap()
        },
    )
}

#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "needs real parallel threads and prctl")]
fn sleepers_woken_again_and_again_still_starve() {
    if skipped_on_one_cpu("sleepers_woken_again_and_again_still_starve") {
        return;
    }
    for (name, events) in [
        ("futex parker", woken_again_and_again::<Native>("woken_again_and_again")),
        ("portable parker", woken_again_and_again::<ThreadPark>("woken_again_and_again_portable")),
        // Wakes that find the sleeper polling its node, where only a sleep
        // marks it: the poll must give way once the deadline has passed.
        ("polling", woken_again_and_again::<PollAlways>("woken_again_and_again_polling")),
    ] {
        eprintln!("sleepers_woken_again_and_again_still_starve, {name}: {events:?}");
        assert!(
            events.get(Event::Starved) >= 20 && events.get(Event::HandedLock) >= 20,
            "{name}: the sleeper did not starve: {events:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// The starvation threshold by backlog
// ---------------------------------------------------------------------------

/// How much later a sleeper whose clock starts now reaches its starvation
/// deadline if its push found sleepers backed up than if it found them few.
fn backlog_threshold_gap<P: Platform>() -> Duration
where
    P::Parker: Parker<Deadline = Instant>,
{
    let since = P::now();
    let few = P::starve_deadline(since, false).expect("native sleepers judge themselves");
    let backed_up = P::starve_deadline(since, true).expect("native sleepers judge themselves");
    backed_up.saturating_duration_since(few)
}

/// Whether `gap` is the difference between the two thresholds
/// (`arch::STARVING_NS` and `arch::STARVING_FEW_NS`, 1 ms apart), give or
/// take the time between the two clock reads (generous: an emulator).
fn gap_is_the_thresholds_difference(gap: Duration) -> bool {
    let want = crate::arch::STARVING_NS - crate::arch::STARVING_FEW_NS;
    gap.as_nanos().abs_diff(u128::from(want)) < 250_000
}

/// A sleeper whose push found few sleepers starves after the shorter
/// threshold, one that found them backed up after the longer one.
#[test]
#[cfg_attr(miri, ignore = "Miri's clock advances with the interpreter's steps")]
fn sleepers_starve_sooner_when_few() {
    let gap = backlog_threshold_gap::<Native>();
    assert!(gap_is_the_thresholds_difference(gap), "gap {gap:?}");
}

/// The check above can fail: the test build's quick-starve platform uses
/// one 20 µs threshold whatever the backlog.
#[test]
#[cfg_attr(miri, ignore = "Miri's clock advances with the interpreter's steps")]
fn one_threshold_for_all_fails_the_backlog_check() {
    let gap = backlog_threshold_gap::<QuickStarve>();
    assert!(!gap_is_the_thresholds_difference(gap), "gap {gap:?}");
}

// ---------------------------------------------------------------------------
// The starvation clock starts at the first yield
// ---------------------------------------------------------------------------

/// Sets (`on`) or clears `flag` in the lock's word, whatever the other
/// bits hold.
fn set_flag<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>(
    g: &Guarded<P>,
    flag: usize,
    on: bool,
) {
    let mut s = g.lock.state.load(Relaxed);
    loop {
        let new = s.map_addr(|a| if on { a | flag } else { a & !flag });
        match g.lock.state.compare_exchange(s, new, Relaxed, Relaxed) {
            Ok(_) => return,
            Err(now) => s = now,
        }
    }
}

/// How long after its push a waiter whose arrival yields outlast its
/// starvation threshold sets STARVING (`None` if it did not within 20 ms),
/// and the waiter's events. We hold the lock and pose as a spinner
/// (SPINNING set, nobody spinning), so the waiter yields, 300 µs per yield
/// on the slow-yield platforms: `arch::ARRIVAL_YIELDS` of them take 2.4 ms,
/// past the 1 ms threshold of a push onto an empty stack. If its clock
/// started at its first yield, it stops yielding at that threshold,
/// pushes itself, finds its deadline passed when it first sleeps, and marks
/// itself at once; if the clock started at the push, it yields every time
/// and marks itself 1 ms after the push at the earliest.
fn starving_after_push<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>()
-> (Option<Duration>, Events) {
    let g = Guarded::<P>::new();
    g.lock.lock();
    set_flag(&g, SPINNING, true);
    let (after, events) = thread::scope(|s| {
        let waiter = s.spawn(|| {
            let before = my_events();
            g.increment();
            my_events().since(&before)
        });
        let pushed = loop {
            if g.word() & !FLAGS != 0 {
                break Instant::now();
            }
            std::hint::spin_loop();
        };
        let after = loop {
            if g.word() & crate::lock::STARVING != 0 {
                break Some(pushed.elapsed());
            }
            if pushed.elapsed() > Duration::from_millis(20) {
                break None;
            }
            std::hint::spin_loop();
        };
        // No spinner would take the wake: clear the bit before the unlock.
        set_flag(&g, SPINNING, false);
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        (after, waiter.join().unwrap())
    });
    assert_eq!(g.word(), 0, "lock left dirty");
    assert_eq!(g.value(), 1);
    assert!(
        events.get(Event::Yielded) == 1 && events.get(Event::Parked) >= 1,
        "the waiter did not yield and sleep: {events:?}"
    );
    (after, events)
}

/// Whether, in one of twenty tries, the waiter of `starving_after_push` set
/// STARVING within 400 µs of its push (a few µs natively; the margin is
/// for emulators, sanitizers and a loaded machine) after it stopped
/// yielding at its threshold, with what every try saw.
fn starves_soon_after_push<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>()
-> (bool, Vec<(Option<Duration>, Events)>) {
    let mut seen = Vec::new();
    for _ in 0..20 {
        let (after, events) = starving_after_push::<P>();
        let soon = after.is_some_and(|d| d < Duration::from_micros(400));
        let yields = events.get(Event::Yielded) + events.get(Event::YieldedAgain);
        let cut = events.get(Event::YieldsOutlastedThreshold) == 1
            && yields < crate::arch::ARRIVAL_YIELDS;
        seen.push((after, events));
        if soon && cut {
            return (true, seen);
        }
    }
    (false, seen)
}

/// A waiter's starvation clock starts at its first yield: yields that
/// outlast its threshold end there, and it marks itself as soon as it
/// sleeps.
#[test]
#[cfg_attr(miri, ignore = "needs real time and parallel threads")]
fn arrival_yields_count_towards_the_starvation_deadline() {
    let (ok, seen) = starves_soon_after_push::<SlowYield>();
    eprintln!("arrival_yields_count_towards_the_starvation_deadline: {seen:?}");
    assert!(ok, "not marked soon after the push, or yields not cut: {seen:?}");
}

/// The check above can fail: with the clock started at the push, the
/// waiter yields every time and STARVING comes a whole threshold after the
/// push.
#[test]
#[cfg_attr(miri, ignore = "needs real time and parallel threads")]
fn a_clock_started_at_the_push_fails_the_yield_check() {
    let (ok, seen) = starves_soon_after_push::<SlowYieldClockAtPush>();
    eprintln!("a_clock_started_at_the_push_fails_the_yield_check: {seen:?}");
    assert!(!ok, "marked soon after the push, with yields cut: {seen:?}");
}

// ---------------------------------------------------------------------------
// A requeued waiter's own push
// ---------------------------------------------------------------------------

/// One try: a waiter on a condition variable is moved onto the mutex's
/// stack by `notify_all` (we hold the mutex), flagged as requeued; our
/// unlock pops it and wakes it, and we take the mutex back at once, so
/// that, unless it ran first and took the mutex, it finds it held and
/// pushes itself again. Returns its node's flag once it has (`None` if it
/// took the mutex first). On a platform whose waiters never starve: a
/// requeued waiter judged starving would be nudged, not popped, and stay
/// on the stack flagged. Its woken thread runs late ([`LateRiser`]): a
/// wake that the scheduler runs at once (on our CPU, before our return
/// from the unlock's wake), or a waiter still on its way to its sleep
/// when the wake comes, would otherwise often take the mutex first.
fn requeued_flag_after_own_push<P>() -> Option<bool>
where
    P: Platform<State = AtomicPtr<crate::lock::Node<P>>>,
{
    let g = Guarded::<P>::new();
    let cond = crate::condvar::Cond::<P> { word: AtomicPtr::new(ptr::null_mut()) };
    let done = std::sync::atomic::AtomicBool::new(false);
    let (requeued, flagged, flag) = thread::scope(|s| {
        s.spawn(|| {
            g.lock.lock();
            // SAFETY: locked; `wait` gives the lock back before it returns.
            unsafe {
                cond.wait(&g.lock, || g.lock.unlock(), None);
                g.lock.unlock();
            }
            done.store(true, Release);
        });
        // The waiter holds the mutex from before it touches the list's word
        // until it is on the list, so our lock below comes after that.
        while cond.word.load(Acquire).is_null() {
            thread::yield_now();
        }
        g.lock.lock();
        let requeued = cond.notify_all();
        let flagged = g.with_stack(|top| {
            // SAFETY: we own the stack; the node, if any, is linked.
            !top.is_null() && unsafe { crate::lock::requeued_of(top) }
        });
        // SAFETY: locked above. The unlock pops the waiter and wakes it
        // (if the requeue put it on the stack).
        unsafe { g.lock.unlock() };
        if requeued != 1 || !flagged {
            // Asserted after the scope: the waiter must finish first.
            return (requeued, flagged, None);
        }
        g.lock.lock();
        let flag = loop {
            if g.word() & !FLAGS != 0 {
                break g.with_stack(|top| {
                    // SAFETY: we own the stack; the node, if any, is linked.
                    (!top.is_null()).then(|| unsafe { crate::lock::requeued_of(top) })
                });
            }
            if done.load(Acquire) {
                break None;
            }
            thread::yield_now();
        };
        // SAFETY: locked above.
        unsafe { g.lock.unlock() };
        (requeued, flagged, flag)
    });
    assert_eq!(requeued, 1, "notify_all did not find the waiter");
    assert!(flagged, "the requeue did not flag the node");
    assert_eq!(g.word(), 0, "lock left dirty");
    flag
}

/// The first of up to 50 tries in which the requeued waiter pushed itself
/// again: its node's flag then (`None` if no try got that far).
fn requeued_flag_after_first_own_push<P>() -> Option<bool>
where
    P: Platform<State = AtomicPtr<crate::lock::Node<P>>>,
{
    (0..50).find_map(|_| requeued_flag_after_own_push::<P>())
}

/// A requeued waiter that pushes itself again has a starvation timer of
/// its own: its push clears the flag by which stack owners judge it at
/// the requeue's threshold and later marks stop above it.
#[test]
#[cfg_attr(miri, ignore = "needs real time and parallel threads")]
fn a_requeued_waiter_pushing_itself_again_is_no_longer_flagged() {
    assert_eq!(requeued_flag_after_first_own_push::<NeverStarves>(), Some(false));
}

/// The check above can fail: with the clearing left out, the node is
/// still flagged after its own push.
#[test]
#[cfg_attr(miri, ignore = "needs real time and parallel threads")]
fn a_push_that_keeps_the_requeued_flag_fails_the_check() {
    assert_eq!(requeued_flag_after_first_own_push::<PushKeepsRequeued>(), Some(true));
}

// ---------------------------------------------------------------------------
// A panic inside a lock call aborts
// ---------------------------------------------------------------------------

/// The variable that makes `child_panics_while_its_node_is_linked` run.
const PANIC_CHILD_VAR: &str = "SPINBIT_TEST_PANIC_CHILD";

/// A thread's `lock` panics right after it pushed its node (an injected
/// panic, standing in for any broken invariant or overflow there), while
/// the node is linked into the mutex. Must abort the process, with a
/// message: unwinding would free the node's frame with the node still on
/// the stack, which the holder's unlock would then write to. If it
/// unwinds (the negative control's platform), this child exits at once,
/// before anything touches the dangling node.
fn panic_while_linked<P: Platform<State = AtomicPtr<crate::lock::Node<P>>>>() {
    let g = Guarded::<P>::new();
    g.lock.lock();
    let joined = thread::scope(|s| {
        s.spawn(|| {
            PANIC_ON.set(Some(Event::Parked as usize));
            g.lock.lock();
        })
        .join()
    });
    eprintln!("child: `lock` returned or unwound: {}", joined.is_err());
    std::process::exit(0);
}

#[test]
#[ignore = "run by a_panic_inside_a_lock_call_aborts in a child process"]
fn child_panics_while_its_node_is_linked() {
    match std::env::var(PANIC_CHILD_VAR).as_deref() {
        Ok("native") => panic_while_linked::<Native>(),
        Ok("unwinds") => panic_while_linked::<UnwindsPastNode>(),
        _ => {}
    }
}

/// Runs `child_panics_while_its_node_is_linked` with `variant` and says
/// whether it aborted with spinbit's message; `None` where the test binary
/// cannot be re-executed (under a user-mode emulator).
#[cfg(unix)]
fn panicking_child_aborts(variant: &str) -> Option<Result<(), String>> {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "tests::child_panics_while_its_node_is_linked", "--ignored"])
        .args(["--nocapture", "--test-threads=1"])
        .env(PANIC_CHILD_VAR, variant)
        .output();
    let out = match out {
        Err(e) if e.raw_os_error() == Some(libc::ENOEXEC) => return None,
        Ok(out) if out.status.code() == Some(127) && out.stdout.is_empty() => return None,
        Ok(out) => out,
        Err(e) => panic!("cannot run the child: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let message = stderr.contains("would unwind past a linked waiter node; aborting");
    if out.status.signal() == Some(libc::SIGABRT) && message {
        Some(Ok(()))
    } else {
        Some(Err(format!("the child did not abort with the message: {:?}\n{stderr}", out.status)))
    }
}

#[test]
#[cfg(unix)]
#[cfg_attr(miri, ignore = "spawns a process")]
fn a_panic_inside_a_lock_call_aborts() {
    if let Some(r) = panicking_child_aborts("native") {
        r.unwrap();
    }
}

/// Negative control: a lock whose panics unwind out of `lock` fails the
/// check above.
#[test]
#[cfg(unix)]
#[cfg_attr(miri, ignore = "spawns a process")]
fn negative_control_a_panic_that_unwinds_out_of_lock_is_caught() {
    if let Some(r) = panicking_child_aborts("unwinds") {
        let e = r.expect_err("the check passed for a lock that unwinds");
        assert!(e.contains("`lock` returned or unwound: true"), "{e}");
    }
}

// ---------------------------------------------------------------------------
// fork
// ---------------------------------------------------------------------------

/// What a forked child did with the mutex (`child_takes_the_lock_after_fork`).
#[cfg(target_os = "linux")]
#[derive(Debug, PartialEq)]
enum InChild {
    /// It took the lock.
    Took,
    /// It did not take the lock by its deadline.
    NotTaken,
    /// It was still running after 10 s and was killed: its `unlock_fair`
    /// waited for a stack owner that does not exist in the child (the
    /// sleeper owned the stack at the fork, e.g. while it marked itself
    /// starving), which the crate docs' Limits allow.
    Hung,
}

/// Forks while this thread holds a mutex, with a sleeper in its `lock` if
/// `contended`; in the child, hands the lock on with `unlock_fair` and then
/// tries to take it again within 100 ms. The child calls nothing that
/// allocates or takes a lock of the parent's other threads (it may fork
/// while another test's thread holds the allocator's lock), and leaves
/// with `_exit`.
#[cfg(target_os = "linux")]
fn child_takes_the_lock_after_fork(contended: bool) -> InChild {
    let g = Guarded::<Native>::new();
    // This thread's event counters exist before the fork: the child's first
    // `record` would otherwise create them (an allocation).
    my_events();
    g.lock.lock();
    thread::scope(|s| {
        if contended {
            s.spawn(|| g.increment());
            while g.sleepers() < 1 {
                thread::sleep(Duration::from_millis(1));
            }
        }
        // SAFETY: plain `fork`; the child runs only the code below.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            // SAFETY: locked by this thread before the fork.
            unsafe { g.lock.unlock_fair() };
            let deadline = Instant::now() + Duration::from_millis(100);
            let took = g.lock.try_lock() || g.lock.lock_until_slow(deadline);
            // SAFETY: `_exit` ends the child without running anything of
            // the parent's (no destructors, no atexit handlers).
            unsafe { libc::_exit(if took { 0 } else { 1 }) };
        }
        // Waits for the child for up to 10 s (a child under
        // ThreadSanitizer takes milliseconds): one that hangs is killed.
        let mut status = 0;
        let start = Instant::now();
        let waited = loop {
            // SAFETY: polls the child forked above; `status` is writable.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r < 0 {
                break Err("waitpid failed");
            }
            if r == pid {
                break Ok(true);
            }
            if start.elapsed() > Duration::from_secs(10) {
                // SAFETY: kills and reaps our own child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                break Ok(false);
            }
            thread::sleep(Duration::from_millis(1));
        };
        // Unlocked before any failure is reported: the scope joins the
        // sleeper, which needs the lock, so a panic while we held it would
        // hang the test instead of failing it.
        // SAFETY: locked above; the sleeper, if any, takes it next.
        unsafe { g.lock.unlock() };
        match waited {
            Err(why) => panic!("{why}"),
            Ok(false) => InChild::Hung,
            Ok(true) => {
                assert!(libc::WIFEXITED(status), "the child did not exit: status {status:#x}");
                match libc::WEXITSTATUS(status) {
                    0 => InChild::Took,
                    1 => InChild::NotTaken,
                    code => panic!("the child exited with {code}"),
                }
            }
        }
    })
}

/// What the crate docs say a forked child may do (Limits): a mutex that
/// nobody but the forking thread held or waited for at the fork works as
/// usual in the child.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "fork")]
fn a_mutex_uncontended_at_the_fork_works_in_the_child() {
    assert_eq!(child_takes_the_lock_after_fork(false), InChild::Took);
}

/// And one that another thread waited for at the fork must not be used: a
/// fair unlock hands the lock to a waiter that does not exist in the child,
/// and it stays locked for good; or, if that waiter owned the waiter stack
/// at the fork, the fair unlock waits for it for good (seen once under
/// ThreadSanitizer, whose slow fork let the sleeper's 1 ms starvation
/// timer fire first). The same check as above, failing: its negative
/// control.
#[test]
#[cfg(target_os = "linux")]
#[cfg_attr(miri, ignore = "fork")]
fn a_mutex_contended_at_the_fork_stays_locked_in_the_child() {
    let child = child_takes_the_lock_after_fork(true);
    eprintln!("a_mutex_contended_at_the_fork_stays_locked_in_the_child: {child:?}");
    assert_ne!(child, InChild::Took);
}
