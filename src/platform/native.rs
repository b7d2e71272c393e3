//! The production platform: std atomics, `crate::arch`, and the OS parker.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering, Ordering::Relaxed};
use std::cell::Cell;

use super::{Fault, NodeCell, Parker, Platform, SpinPolicy, StateWord, Wait};
use crate::arch::{self, Knob};

#[cfg(all(target_os = "linux", not(spinbit_portable_parker)))]
pub(crate) type OsParker = super::futex::FutexParker;
#[cfg(any(not(target_os = "linux"), spinbit_portable_parker))]
pub(crate) type OsParker = super::park::ThreadParker;

/// std atomics, the architecture's tick counter, the OS parker: the platform
/// of [`crate::RawMutex`].
pub(crate) type Native = NativeWith<OsParker, SpinOne>;

/// Ablation: the spin bit's algorithm with spinning switched off.
#[cfg(any(test, feature = "bench-ablations"))]
pub(crate) type NoSpin = NativeWith<OsParker, SpinNever>;
/// Ablation: every waiter spins before it sleeps (no spin bit).
#[cfg(any(test, feature = "bench-ablations"))]
pub(crate) type AllSpin = NativeWith<OsParker, SpinAll>;

/// What sets one native platform apart from another, all of it constant:
/// which waiters spin and, for the tests' variants (`src/tests.rs`), a
/// deliberate fault or a time scaled so that a rare path runs often. The
/// production variants keep the defaults.
pub(crate) trait Variant: 'static {
    /// [`Platform::SPIN`].
    const SPIN: SpinPolicy = SpinPolicy::One;
    /// [`Platform::FAULT`].
    const FAULT: Fault = Fault::None;
    /// A starvation threshold in place of `arch::STARVING_NS` and
    /// `arch::STARVING_FEW_NS`.
    const STARVING_NS: Option<u64> = None;
    /// A fixed ping-pong window in place of the adaptive one.
    const PING_PONG_WINDOW_NS: Option<u64> = None;
    /// Arrival yields that are sleeps of this long (standing in for yields
    /// that ran other threads) in place of yields.
    const ARRIVAL_YIELD_SLEEP_US: Option<u64> = None;
    /// A cap on the wake latency for which a waiter polls in place of
    /// `arch::WAKE_POLL_MAX_NS`.
    const WAKE_POLL_MAX_NS: Option<u64> = None;
}

/// The spin bit: at most one waiter spins.
pub(crate) struct SpinOne;
impl Variant for SpinOne {}

/// Nobody spins (an ablation).
#[cfg(any(test, feature = "bench-ablations"))]
pub(crate) struct SpinNever;
#[cfg(any(test, feature = "bench-ablations"))]
impl Variant for SpinNever {
    const SPIN: SpinPolicy = SpinPolicy::Never;
}

/// Every waiter spins (an ablation).
#[cfg(any(test, feature = "bench-ablations"))]
pub(crate) struct SpinAll;
#[cfg(any(test, feature = "bench-ablations"))]
impl Variant for SpinAll {
    const SPIN: SpinPolicy = SpinPolicy::All;
}

std::thread_local! {
    /// [`Platform::release_guess`]. Read by every unlock: a `const`
    /// initialiser and no destructor, so its access is one load with no
    /// lazy-initialisation check.
    static RELEASE_GUESS: Cell<usize> = const { Cell::new(0) };
    /// When this thread last took a lock by spinning (ticks). Touched only
    /// on slow paths.
    static LAST_SPIN_ACQUIRE: Cell<u64> = const { Cell::new(0) };
    /// This thread's ping-pong window (ns), between `arch::ping_pong_ns`
    /// and `arch::PING_PONG_MAX_NS`; 0 until its first pause ends (the
    /// narrowest). Per thread, not per lock: a thread that spins for
    /// several locks adapts to their mix.
    static PING_PONG_WINDOW: Cell<u64> = const { Cell::new(0) };
    /// When this thread may next look at the oldest sleeper (ticks).
    static NEXT_LOOK: Cell<u64> = const { Cell::new(0) };
    /// The lock (its address) that this thread's latest fair hand-off
    /// handed over, and until when (ticks) this thread's waits for that
    /// lock yield rather than sleep.
    static AWAKE_UNTIL: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
    /// How long this thread's recent waits on a stack lasted, from its push
    /// to its wake (ticks, a running average; see `wait_for_wake`).
    static QUEUED: Cell<u64> = const { Cell::new(0) };
    /// How long this thread's recent waits on a condition variable lasted,
    /// from listing itself to its notification (ticks, a running average).
    static NOTIFY_WAITED: Cell<u64> = const { Cell::new(0) };
    /// How long this thread's recent wakes from an OS sleep took to run it
    /// (ticks, a running average); 0 until it has slept once.
    static WAKE_LATENCY: Cell<u64> = const { Cell::new(0) };
}

/// Moves the running average `avg` a quarter of the way to `sample` (to
/// `sample` itself if there is no average yet).
#[inline]
fn average(avg: &Cell<u64>, sample: u64) {
    let a = avg.get();
    avg.set(if a == 0 { sample } else { a - a / 4 + sample / 4 });
}

/// The one spinner's budget in nanoseconds (`arch::SPIN_NS`), which the
/// spinner's other timings are derived from.
#[inline]
fn spin_ns() -> u64 {
    arch::tuned(Knob::Spin, arch::SPIN_NS)
}

/// This thread's ping-pong window in nanoseconds (see
/// `arch::PING_PONG_MAX_NS`).
#[inline]
pub(crate) fn ping_pong_window_ns() -> u64 {
    PING_PONG_WINDOW.with(Cell::get).max(ping_pong_bounds_ns().0)
}

/// The narrowest and the widest ping-pong window in nanoseconds:
/// `arch::ping_pong_ns` and `arch::PING_PONG_MAX_NS` (at least the
/// narrowest).
#[inline]
pub(crate) fn ping_pong_bounds_ns() -> (u64, u64) {
    let narrowest = arch::ping_pong_ns(spin_ns());
    (narrowest, arch::tuned(Knob::PingPongMax, arch::PING_PONG_MAX_NS).max(narrowest))
}

/// The CPUs this process may run on, counted without allocating, reading a
/// file or blocking: its first call comes from inside a lock call, which may
/// be a global allocator's (`tests/no_alloc.rs`). On Linux that is the
/// affinity mask (not the cgroup CPU quota, which
/// `std::thread::available_parallelism` reads from files, allocating); a
/// mask beyond `cpu_set_t`'s 1024 CPUs counts as 1024.
#[cfg(target_os = "linux")]
fn cpus() -> u32 {
    // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `set` is a writable `cpu_set_t` of the size passed; pid 0 is
    // the calling thread.
    let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        // EINVAL: the kernel's mask is wider than `cpu_set_t`, so there are
        // more than its 1024 CPUs (`sysconf` would read a file to count
        // them).
        return libc::CPU_SETSIZE as u32;
    }
    // SAFETY: `set` was filled in by the kernel above.
    u32::try_from(unsafe { libc::CPU_COUNT(&set) }).unwrap_or(1).max(1)
}

/// The CPUs this process may run on: elsewhere std asks the OS in one call
/// that neither allocates nor blocks (`sysconf`, `sysctl` or
/// `cpuset_getaffinity` on the BSDs and macOS, `GetSystemInfo` on Windows).
#[cfg(not(target_os = "linux"))]
fn cpus() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

/// One wait of a thread that waits for something no wake will announce (a
/// stack owner's give-back, or a futex word whose futex calls fail): the
/// first `yields` of its waits (`waits` counts them) yield the CPU, the
/// later ones sleep, 1 µs doubling up to 1 ms, and never past `deadline`.
/// It never spins: such a wait costs a wake-up per millisecond at most, not
/// a CPU, and sees the change within a millisecond.
pub(crate) fn back_off(waits: &mut u32, yields: u32, deadline: Option<std::time::Instant>) {
    *waits = waits.saturating_add(1);
    if *waits <= yields {
        std::thread::yield_now();
        return;
    }
    let mut d = std::time::Duration::from_micros(1 << (*waits - yields - 1).min(10));
    if let Some(deadline) = deadline {
        d = d.min(deadline.saturating_duration_since(std::time::Instant::now()));
    }
    std::thread::sleep(d);
}

/// The native platform, parameterised by parker and [`Variant`].
/// Everything is decided at compile time.
pub(crate) struct NativeWith<K, V>(PhantomData<(K, V)>);

/// The most spin hints between two looks at a word (`arch::max_look_gap_ns`
/// in hints); the first call in a process calibrates the hint's cost.
#[inline]
fn max_look_gap_hints() -> u32 {
    arch::hints_in_ns(arch::max_look_gap_ns(spin_ns()))
}

impl<K, V: Variant> NativeWith<K, V> {
    /// Polls `woken`, a look at this thread's own node, for up to `ticks`;
    /// returns whether it said so. Spin hints between looks, not yields: a
    /// thread that yields while others are runnable goes to the back of the
    /// run queue (milliseconds on an oversubscribed CPU), and a lock handed
    /// to it would wait there with it.
    #[inline]
    fn poll(woken: impl Fn() -> bool, ticks: u64) -> bool {
        // Before the clock starts: the first call in a process calibrates
        // the hint's cost.
        let gap = max_look_gap_hints();
        let until = arch::ticks().wrapping_add(ticks);
        loop {
            if woken() {
                return true;
            }
            if (arch::ticks().wrapping_sub(until) as i64) >= 0 {
                return false;
            }
            for _ in 0..gap {
                arch::spin_hint();
            }
        }
    }

    /// The starvation threshold of a sleeper whose latest push found
    /// sleepers backed up (`arch::STARVING_NS`) or not
    /// (`arch::STARVING_FEW_NS`), or the variant's either way.
    #[inline]
    fn starving_ns(backed_up: bool) -> u64 {
        if let Some(ns) = V::STARVING_NS {
            ns
        } else if backed_up {
            arch::tuned(Knob::Starving, arch::STARVING_NS)
        } else {
            arch::tuned(Knob::StarvingFew, arch::STARVING_FEW_NS)
        }
    }
}

impl<K: Parker<Deadline = std::time::Instant> + 'static, V: Variant> Platform for NativeWith<K, V> {
    type State = AtomicPtr<crate::lock::Node<Self>>;
    type Cell<T: Copy> = PlainCell<T>;
    type Parker = K;
    const SPIN: SpinPolicy = V::SPIN;
    const FAULT: Fault = V::FAULT;

    #[inline(always)]
    fn spin_hint() {
        arch::spin_hint();
    }
    #[inline(always)]
    fn yield_now() {
        std::thread::yield_now();
    }
    #[inline]
    fn arrival_yield() -> bool {
        if let Some(us) = V::ARRIVAL_YIELD_SLEEP_US {
            std::thread::sleep(std::time::Duration::from_micros(us));
            return true;
        }
        let start = arch::ticks();
        std::thread::yield_now();
        arch::ticks().wrapping_sub(start)
            >= arch::ns_to_ticks(arch::tuned(Knob::YieldBusy, arch::YIELD_BUSY_NS))
    }
    #[inline]
    fn max_arrival_yields() -> u32 {
        arch::tuned(Knob::ArrivalYields, arch::ARRIVAL_YIELDS).try_into().unwrap_or(u32::MAX)
    }
    #[inline]
    fn wait_for_stack(waits: &mut u32) {
        // Yields first: the owner, if it was preempted, usually runs again
        // within the yield. Then sleeps: a yield runs no thread of lower
        // priority, so a real-time thread (SCHED_FIFO or SCHED_RR) that
        // waits for a stack owner of lower priority on its CPU would yield
        // to nobody for ever.
        back_off(waits, arch::STACK_WAIT_YIELDS, None);
    }
    #[inline(always)]
    fn now() -> u64 {
        arch::ticks()
    }
    #[inline(always)]
    fn spin_deadline() -> (u64, u64) {
        let now = arch::ticks();
        (now, now.wrapping_add(arch::ns_to_ticks(spin_ns())))
    }
    #[inline]
    fn awake_after_hand_off(lock: usize) -> bool {
        let (handed, until) = AWAKE_UNTIL.with(Cell::get);
        handed == lock && until.wrapping_sub(arch::ticks()) as i64 > 0
    }
    #[inline]
    fn note_hand_off(lock: usize) {
        // The duration before the clock: the first conversion in a process
        // calibrates the counter (about 200 µs of busy waiting).
        let ticks = arch::ns_to_ticks(arch::tuned(Knob::HandOffAwake, arch::HAND_OFF_AWAKE_NS));
        AWAKE_UNTIL.with(|t| t.set((lock, arch::ticks().wrapping_add(ticks))));
    }
    #[inline]
    fn yield_after_starving_hand_off() -> bool {
        std::thread::yield_now();
        true
    }
    #[inline(always)]
    fn release_guess() -> usize {
        RELEASE_GUESS.with(Cell::get)
    }
    #[inline(always)]
    fn set_release_guess(word: usize) {
        RELEASE_GUESS.with(|g| g.set(word));
    }
    #[inline]
    fn note_spin_acquire() {
        LAST_SPIN_ACQUIRE.with(|t| t.set(arch::ticks()));
        #[cfg(feature = "stats")]
        crate::stats::spin_won();
    }
    #[inline]
    fn spun_recently() -> bool {
        let last = LAST_SPIN_ACQUIRE.with(Cell::get);
        let window_ns = V::PING_PONG_WINDOW_NS.unwrap_or_else(ping_pong_window_ns);
        arch::ticks().wrapping_sub(last) < arch::ns_to_ticks(window_ns)
    }
    #[inline]
    fn pause_ended(held: bool) {
        let (narrowest, widest) = ping_pong_bounds_ns();
        PING_PONG_WINDOW.with(|w| {
            let now = w.get().max(narrowest);
            w.set(if held { now.saturating_mul(2).min(widest) } else { (now / 2).max(narrowest) });
        });
    }
    #[inline]
    fn ping_pong_pause(started: u64) {
        let until = started.wrapping_add(arch::ns_to_ticks(arch::ping_pong_pause_ns(spin_ns())));
        while arch::ticks() < until {
            for _ in 0..4 {
                arch::spin_hint();
            }
        }
    }
    #[inline]
    fn max_backoff() -> u32 {
        max_look_gap_hints()
    }
    #[inline]
    fn look_due(now: u64) -> bool {
        // Time only: a thread's first spin acquisition looks, whatever it
        // did before, so short-lived threads look too.
        NEXT_LOOK.with(|next| {
            if now.wrapping_sub(next.get()) as i64 >= 0 {
                let starving = arch::tuned(Knob::Starving, arch::STARVING_NS);
                next.set(now.wrapping_add(arch::ns_to_ticks(arch::look_ns(starving))));
                true
            } else {
                false
            }
        })
    }
    #[inline]
    fn starving(since: u64, requeued: bool) -> bool {
        // A requeued waiter, which has no timer: the longer of the two
        // deadlines at which a sleeper marks itself. Any other: twice that,
        // a backstop for a sleeper whose timer has fired but which has not
        // run yet.
        let deadline = arch::ns_to_ticks(Self::starving_ns(true));
        arch::ticks_since(since) > if requeued { deadline } else { deadline.saturating_mul(2) }
    }
    #[inline]
    fn starve_due(since: u64, backed_up: bool) -> bool {
        arch::ticks_since(since) >= arch::ns_to_ticks(Self::starving_ns(backed_up))
    }
    #[inline]
    fn starve_deadline(since: u64, backed_up: bool) -> Option<std::time::Instant> {
        // The tick counter and `Instant` are different clocks: carry over
        // what is left of the threshold.
        let threshold = arch::ns_to_ticks(Self::starving_ns(backed_up));
        let left = threshold.saturating_sub(arch::ticks_since(since));
        let left_ns = left.saturating_mul(1_000) / arch::ticks_per_us();
        std::time::Instant::now().checked_add(std::time::Duration::from_nanos(left_ns))
    }
    /// Polls for `arch::STARVED_AWAKE_NS`: the hand-off comes with the
    /// holder's unlock, so the wait is about a critical section, whatever
    /// a wake from the OS takes.
    #[inline]
    fn wait_awake(woken: impl Fn() -> bool) -> bool {
        let awake = arch::tuned(Knob::StarvedAwake, arch::STARVED_AWAKE_NS);
        Self::poll(woken, arch::ns_to_ticks(awake))
    }
    /// Polls while this thread's recent waits of this kind (on a stack, or
    /// for a notification) were shorter than its recent wakes took to run
    /// it, for that wake latency, if it is at most `arch::WAKE_POLL_MAX_NS`.
    ///
    /// A sleeper that is running when its wake comes takes over the wake at
    /// once; one asleep in the OS runs a wake latency later, and when the
    /// wake handed it SPINNING, unlocks skip their wakes for it all that
    /// while and the lock can sit free with nobody running to take it (the
    /// loss under moderate contention on many cores). Polling its own
    /// node's word, a waiter costs the holder nothing: only the wake's
    /// store touches that line. The rule is the ski-rental one: poll for
    /// as long as a sleep would cost (its latency), so that a wait is never
    /// worse than twice the better of the two; and where this thread's
    /// waits have been outlasting that, sleep at once, so that long queues
    /// (many more waiters than CPUs, heavy contention) cost no CPU. Both
    /// inputs are this thread's own measurements (`note_wake`); a thread
    /// that has not slept yet has no latency to go by and does not poll. A
    /// latency beyond the cap is a wait for a CPU (the CPUs are
    /// oversubscribed), and there a poll would take a CPU from the threads
    /// that have work, the holder among them: no poll.
    #[inline]
    fn wait_for_wake(
        wait: Wait,
        deadline: Option<std::time::Instant>,
        woken: impl Fn() -> bool,
    ) -> bool {
        let latency = WAKE_LATENCY.with(Cell::get);
        let waited = match wait {
            Wait::Stack => QUEUED.with(Cell::get),
            Wait::Notify => NOTIFY_WAITED.with(Cell::get),
        };
        if latency == 0
            || latency
                > arch::ns_to_ticks(
                    V::WAKE_POLL_MAX_NS
                        .unwrap_or_else(|| arch::tuned(Knob::WakePollMax, arch::WAKE_POLL_MAX_NS)),
                )
            || waited >= latency
        {
            return false;
        }
        if let Some(d) = deadline {
            // Whole microseconds: a tick count from a `Duration`.
            let left = d.saturating_duration_since(std::time::Instant::now());
            let left_us = u64::try_from(left.as_micros()).unwrap_or(u64::MAX);
            if left_us.saturating_mul(arch::ticks_per_us()) < latency {
                return false;
            }
        }
        Self::poll(woken, latency)
    }
    #[inline]
    fn note_wake(wait: Wait, waited: u64, latency: Option<u64>) {
        match wait {
            Wait::Stack => QUEUED.with(|q| average(q, waited)),
            Wait::Notify => NOTIFY_WAITED.with(|q| average(q, waited)),
        }
        if let Some(latency) = latency {
            // At least one tick: 0 means "not measured".
            WAKE_LATENCY.with(|l| average(l, latency.max(1)));
        }
    }
    #[inline]
    fn backlog_sleepers() -> u32 {
        // Test builds: 2, whatever the machine, so that the contended tests'
        // 8 threads back the stack up on any number of CPUs.
        if cfg!(test) {
            return 2;
        }
        // Computed on first use, which is inside a lock call (a stack owner
        // counting), so it must neither allocate nor block (see `cpus`):
        // racing first uses compute the same value and store it twice.
        // Relaxed: the value is self-contained.
        static SLEEPERS: AtomicU32 = AtomicU32::new(0);
        match SLEEPERS.load(Relaxed) {
            0 => {
                let per_cpu = arch::tuned(Knob::BacklogPerCpu, arch::BACKLOG_PER_CPU);
                let n = per_cpu.saturating_mul(u64::from(cpus())).clamp(1, u64::from(u32::MAX));
                let n = n as u32;
                SLEEPERS.store(n, Relaxed);
                n
            }
            n => n,
        }
    }
    #[inline]
    fn expired(deadline: std::time::Instant, _slept: bool) -> bool {
        std::time::Instant::now() >= deadline
    }
    #[cfg(any(test, feature = "stats"))]
    #[inline(always)]
    fn record(event: super::Event) {
        #[cfg(feature = "stats")]
        crate::stats::record(event);
        #[cfg(test)]
        crate::tests::record(event);
    }
    #[cfg(feature = "stats")]
    #[inline(always)]
    fn record_woken(ticks: u64) {
        crate::stats::woken(ticks);
    }
}

impl<N> StateWord<N> for AtomicPtr<N> {
    #[inline(always)]
    fn load(&self, order: Ordering) -> *mut N {
        AtomicPtr::load(self, order)
    }
    #[inline(always)]
    fn compare_exchange(
        &self,
        current: *mut N,
        new: *mut N,
        success: Ordering,
        failure: Ordering,
    ) -> Result<*mut N, *mut N> {
        AtomicPtr::compare_exchange(self, current, new, success, failure)
    }
    #[inline(always)]
    fn fetch_or(&self, bits: usize, order: Ordering) -> *mut N {
        AtomicPtr::fetch_or(self, bits, order)
    }
    #[inline(always)]
    fn fetch_and(&self, bits: usize, order: Ordering) -> *mut N {
        AtomicPtr::fetch_and(self, bits, order)
    }
    #[inline(always)]
    fn fetch_xor(&self, bits: usize, order: Ordering) -> *mut N {
        AtomicPtr::fetch_xor(self, bits, order)
    }
    #[inline(always)]
    fn fetch_sub(&self, bits: usize, order: Ordering) -> *mut N {
        AtomicPtr::fetch_byte_sub(self, bits, order)
    }
}

/// A plain `UnsafeCell`: the protocol, not the type, orders its accesses.
pub(crate) struct PlainCell<T>(UnsafeCell<T>);

impl<T: Copy> NodeCell<T> for PlainCell<T> {
    #[inline(always)]
    fn new(value: T) -> Self {
        PlainCell(UnsafeCell::new(value))
    }
    #[inline(always)]
    unsafe fn get(&self) -> T {
        // SAFETY: the caller guarantees no racing write.
        unsafe { *self.0.get() }
    }
    #[inline(always)]
    unsafe fn set(&self, value: T) {
        // SAFETY: the caller guarantees no racing access.
        unsafe { *self.0.get() = value }
    }
}
