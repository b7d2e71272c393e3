//! Linux futex parker: one 32-bit futex word per waiter node.

use core::ptr;
use core::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::time::Instant;

use super::word::{AWAKE, NUDGED, PARKED, SLEEPING, give_up, settle};
use super::{Nudge, Parker, Woke};

/// A futex word holding the waiter's state: PARKED, SLEEPING or NUDGED
/// while it waits, AWAKE once woken.
pub(crate) struct FutexParker {
    word: AtomicU32,
}

impl Parker for FutexParker {
    #[inline(always)]
    fn new() -> Self {
        FutexParker { word: AtomicU32::new(AWAKE) }
    }

    #[inline(always)]
    fn prepare(&self) {
        // Relaxed: published by the Release CAS that pushes the node.
        self.word.store(PARKED, Relaxed);
    }

    fn park(&self) -> Woke {
        let mut failed = Backoff::default();
        loop {
            if let Some(woke) = settle(&self.word) {
                return woke;
            }
            // The kernel compares the word with SLEEPING and sleeps in one
            // step, so a wake or a nudge that lands between our look and
            // the syscall makes FUTEX_WAIT return EAGAIN instead of
            // sleeping. EINTR and spurious returns land here too; the loop
            // looks at the word again.
            match futex_wait(&self.word, SLEEPING) {
                None | Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                // The futex itself fails (a seccomp filter's ENOSYS or
                // EPERM): sleep anyway, polling the word.
                Some(_) => failed.sleep(None),
            }
        }
    }

    type Deadline = Instant;

    fn park_until(&self, deadline: Instant) -> Woke {
        // A deadline that has passed returns here, not in the kernel, before
        // the first wait and after every early return of one. The kernel
        // sleeps past an expired absolute deadline until its timer fires,
        // the thread's timer slack later (50 µs by default,
        // `PR_SET_TIMERSLACK`; 60-100 µs measured on the 2-core AMD EPYC
        // VM), and a wake that lands first makes the wait a wake. A sleeper
        // whose sleeps wakes keep cutting short (each unlock of a lock held
        // 10 µs at a time pops it) then never saw its starvation deadline
        // pass, and waited until it won the lock by chance: `lock()` waits
        // of 1.5-6 ms with a 1 ms threshold. (A wake may have landed
        // meanwhile: `give_up` says.)
        let now = Instant::now();
        if now >= deadline {
            return give_up(&self.word);
        }
        // The kernel takes an absolute CLOCK_MONOTONIC deadline, so a signal
        // (EINTR) or a spurious return followed by another wait does not
        // stretch the wait. `Instant` is CLOCK_MONOTONIC on Linux too, but
        // opaque, so the deadline is carried over as "now + what is left",
        // reading `Instant` before the kernel's clock: the result is at or
        // after `deadline`, never before it.
        let Some(abs) = monotonic_after(deadline - now) else {
            // Beyond what a timespec holds: no deadline at all.
            return self.park();
        };
        // As in `park`.
        let mut failed = Backoff::default();
        loop {
            if let Some(woke) = settle(&self.word) {
                return woke;
            }
            match futex_wait_until(&self.word, SLEEPING, &abs) {
                // Woken (maybe spuriously), the word changed, or a signal:
                // the loop looks at the word again, and the clock (here).
                None | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    if Instant::now() >= deadline {
                        return give_up(&self.word);
                    }
                }
                // The deadline passed. Any other error (none is expected
                // with the arguments built here) is treated the same once
                // the deadline has passed, so that it cannot keep the
                // thread in this loop: the caller then leaves the stack.
                Some(e) if e == libc::ETIMEDOUT || Instant::now() >= deadline => {
                    // A wake may have landed after the kernel gave up.
                    return give_up(&self.word);
                }
                // The futex itself fails: as in `park`, never past the
                // deadline.
                Some(_) => failed.sleep(Some(deadline)),
            }
        }
    }

    #[inline]
    fn unparked(&self) -> bool {
        // Acquire: pairs with the Release swap in `unpark`, so everything
        // the unparker did before it is visible.
        self.word.load(Acquire) == AWAKE
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: the caller guarantees `this` is live until the swap below.
        let word: *const AtomicU32 = unsafe { &raw const (*this).word };
        // SAFETY: `word` is live here (the thread is still blocked); after
        // this swap the thread may return and free the node.
        let was = unsafe { (*word).swap(AWAKE, Release) };
        // A thread still PARKED is not asleep: it sees AWAKE when it next
        // looks (a poll, or `settle`'s CAS to SLEEPING fails), and the
        // system call would wake nobody. Only the address is passed on: the
        // kernel looks it up in its futex table and never dereferences
        // freed memory. If the node is already gone, the wake finds nobody,
        // or at worst wakes an unrelated futex waiter on the reused address
        // spuriously, which every futex user must tolerate.
        if was != PARKED {
            futex_wake(word);
        }
    }

    type Wake = *const AtomicU32;

    unsafe fn nudge(this: *const Self) -> Nudge<*const AtomicU32> {
        // SAFETY: the node is linked and we own the stack, so its thread
        // cannot return from `lock` (it would need the stack to leave it).
        let word: *const AtomicU32 = unsafe { &raw const (*this).word };
        // Release: a thread that a condition variable moved onto the stack
        // reads its node's starvation clock, written by the notifier before
        // its push, as soon as it sees the nudge (`Lock::wait_requeued`):
        // the notifier's Release push, our Acquire take of the stack, this
        // Release and the nudged thread's Acquire look at its word order
        // the two. Failure Relaxed: nothing is read after it.
        // SAFETY: as above.
        match unsafe { (*word).compare_exchange(SLEEPING, NUDGED, Release, Relaxed) } {
            Ok(_) => Nudge::Woken(word),
            Err(NUDGED) => Nudge::Pending,
            Err(_) => Nudge::Running,
        }
    }

    fn wake_nudged(word: *const AtomicU32) {
        // Only the address, as in `unpark`.
        futex_wake(word);
    }

    /// Nothing to wait for: no waker touches the parker after its store.
    #[inline(always)]
    fn retire(&self) {}
}

/// The sleep of a parker whose futex fails with an error it cannot mean
/// here (ENOSYS or EPERM from a seccomp filter, in sandboxes), between
/// looks at the word: 4 yields, then [`super::native::back_off`]'s sleeps.
/// A wake, whose own futex call may fail too, is seen within a millisecond.
#[derive(Default)]
struct Backoff(u32);

impl Backoff {
    fn sleep(&mut self, deadline: Option<Instant>) {
        #[cfg(test)]
        tests::FAILED_WAITS.set(tests::FAILED_WAITS.get() + 1);
        #[cfg(test)]
        if tests::HOT_LOOP_ON_ERROR.get() {
            return; // the negative control: a busy loop
        }
        super::native::back_off(&mut self.0, 4, deadline);
    }
}

/// The error a test injects in place of the futex calls' result.
#[cfg(test)]
fn injected() -> Option<i32> {
    tests::INJECT_ERROR.get()
}
#[cfg(not(test))]
#[inline(always)]
fn injected() -> Option<i32> {
    None
}

/// A futex wait with no timeout. Returns the error number if the call failed.
fn futex_wait(word: &AtomicU32, expected: u32) -> Option<i32> {
    futex_wait_bitset(word, expected, None)
}

/// CLOCK_MONOTONIC now plus `left`, or `None` if that does not fit.
fn monotonic_after(left: std::time::Duration) -> Option<libc::timespec> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable timespec; CLOCK_MONOTONIC always
    // exists on Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    let secs = libc::time_t::try_from(left.as_secs()).ok()?;
    let mut tv_sec = now.tv_sec.checked_add(secs)?;
    // Below 2 * 10^9, which fits a 32-bit c_long too.
    let mut tv_nsec = now.tv_nsec + left.subsec_nanos() as libc::c_long;
    if tv_nsec >= 1_000_000_000 {
        tv_nsec -= 1_000_000_000;
        tv_sec = tv_sec.checked_add(1)?;
    }
    Some(libc::timespec { tv_sec, tv_nsec })
}

/// FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC deadline. Returns the
/// error number if the call failed.
fn futex_wait_until(word: &AtomicU32, expected: u32, deadline: &libc::timespec) -> Option<i32> {
    futex_wait_bitset(word, expected, Some(deadline))
}

/// FUTEX_WAIT_BITSET (a plain FUTEX_WAIT, but for the kind of deadline it
/// takes) until `deadline`, or with none. Returns the error number if the
/// call failed (or the one a test injects).
fn futex_wait_bitset(
    word: &AtomicU32,
    expected: u32,
    deadline: Option<&libc::timespec>,
) -> Option<i32> {
    if let Some(e) = injected() {
        return Some(e);
    }
    let deadline = deadline.map_or(ptr::null(), ptr::from_ref);
    // SAFETY: FUTEX_WAIT_BITSET on a live, aligned u32, with a valid
    // timespec or none (null: no timeout); with this operation the kernel
    // reads the timeout as an absolute CLOCK_MONOTONIC time (no
    // FUTEX_CLOCK_REALTIME).
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
            expected,
            deadline,
            ptr::null::<u32>(),
            libc::FUTEX_BITSET_MATCH_ANY,
        )
    };
    if r == 0 { None } else { Some(std::io::Error::last_os_error().raw_os_error().unwrap_or(0)) }
}

fn futex_wake(word: *const AtomicU32) {
    #[cfg(feature = "stats")]
    let start = crate::arch::ticks();
    // SAFETY: FUTEX_WAKE only uses the address as a key; it reads no memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
    #[cfg(feature = "stats")]
    crate::stats::wake_call(start);
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    std::thread_local! {
        /// An error this thread's futex waits return instead of calling the
        /// kernel (as a seccomp filter makes them).
        pub(super) static INJECT_ERROR: Cell<Option<i32>> = const { Cell::new(None) };
        /// How many times this thread's waits fell back to `Backoff`.
        pub(super) static FAILED_WAITS: Cell<u64> = const { Cell::new(0) };
        /// The negative control: the fallback loops without sleeping.
        pub(super) static HOT_LOOP_ON_ERROR: Cell<bool> = const { Cell::new(false) };
    }

    /// A waiter whose futex fails with `errno` waits `hold` for a lock (or,
    /// with `timeout`, until its deadline) and returns whether it got the
    /// lock, how long it waited and how often its futex wait failed.
    fn wait_with_failing_futex(
        errno: i32,
        hold: Duration,
        timeout: Option<Duration>,
        hot: bool,
    ) -> (bool, Duration, u64) {
        let m = crate::Mutex::new(0u32);
        let g = m.lock();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                INJECT_ERROR.set(Some(errno));
                HOT_LOOP_ON_ERROR.set(hot);
                let t0 = Instant::now();
                let got = match timeout {
                    None => {
                        drop(m.lock());
                        true
                    }
                    Some(t) => m.try_lock_for(t).is_some(),
                };
                (got, t0.elapsed(), FAILED_WAITS.get())
            });
            std::thread::sleep(hold);
            drop(g);
            waiter.join().unwrap()
        })
    }

    /// Under a seccomp filter that fails `futex` with ENOSYS or EPERM, a
    /// waiter still sleeps (at most about one failed wait per millisecond
    /// after the first few), still gets the lock once it is free, and a
    /// timed waiter still times out.
    #[test]
    #[cfg_attr(miri, ignore = "timing on an interpreter")]
    #[cfg_attr(spinbit_portable_parker, ignore = "the mutex sleeps on the portable parker here")]
    fn a_failing_futex_still_sleeps() {
        for errno in [libc::ENOSYS, libc::EPERM] {
            let (got, took, failed) =
                wait_with_failing_futex(errno, Duration::from_millis(200), None, false);
            eprintln!("errno {errno}: {failed} failed waits in {took:?}");
            assert!(got && took >= Duration::from_millis(150), "{errno}: {took:?}");
            assert!(
                (5..=400).contains(&failed),
                "errno {errno}: {failed} failed waits in {took:?}"
            );
            let (got, took, failed) = wait_with_failing_futex(
                errno,
                Duration::from_millis(300),
                Some(Duration::from_millis(100)),
                false,
            );
            // Never short of the deadline; past it by at most one backoff
            // sleep (1 ms) and the scheduling delays of a loaded machine.
            assert!(!got && took >= Duration::from_millis(100), "{errno}: {took:?}");
            assert!(
                took < Duration::from_millis(600),
                "{errno}: slept past the deadline: {took:?}"
            );
            assert!(
                (5..=400).contains(&failed),
                "errno {errno}: {failed} failed waits in {took:?}"
            );
        }
    }

    /// Negative control: a fallback that does not sleep turns the same waits
    /// into a busy loop, which the bound above catches.
    #[test]
    #[cfg_attr(miri, ignore = "timing on an interpreter")]
    #[cfg_attr(spinbit_portable_parker, ignore = "the mutex sleeps on the portable parker here")]
    fn negative_control_a_busy_fallback_is_caught() {
        let (got, _, failed) =
            wait_with_failing_futex(libc::ENOSYS, Duration::from_millis(50), None, true);
        assert!(got);
        assert!(failed > 400, "{failed} failed waits");
    }
}
