//! The condition variable: one word, pointing to a list of waiters whose
//! nodes live on their own stacks, as the mutex's do.
//!
//! A waiter's node is a mutex node ([`Node`]) with the list's links. It
//! sleeps on that node's parker from the moment it is on the list, so a
//! notification can do one of three things with it, decided under the
//! list's lock:
//!
//! - **requeue** it: move the node onto the mutex's waiter stack
//!   ([`Lock::push_chain`], only while the mutex is held), where the
//!   mutex's unlocks wake it in their turn, as a waiter that pushed itself
//!   (`notify_all` moves every waiter in one CAS: no thundering herd);
//! - **hand** it the mutex: with the mutex free, `notify_all` takes it for
//!   the oldest waiter and wakes that one owning it (the rest go onto the
//!   mutex's stack, which its unlock serves);
//! - **wake** it: `notify_one`; it locks the mutex itself.
//!
//! A waiter whose timed wait runs out takes the list's lock: if it is still
//! on the list it unlinks itself and reports the timeout (no notification
//! ever counted it); otherwise a notification took it first and it goes on
//! as that notification says. So `wait` returns only after a notification
//! or a timeout, and the counts that `notify_one` and `notify_all` return
//! are exact.
//!
//! The list's lock is the word's low bit. Its owners never block while
//! they hold it: they edit the list and, notifying, push onto the mutex's
//! stack with a CAS loop, take the mutex with one RMW, or neither; wakes
//! come after they give it back.

use core::ptr;
use core::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::lock::{Lock, Node, Retire, no_unwind};
use crate::platform::{Deadline, Event, Fault, NodeCell, Parker, Platform, StateWord, Wait, Woke};

/// On the list.
const WAITING: u8 = 0;
/// Taken off the list and woken: it locks the mutex itself.
const NOTIFIED: u8 = 1;
/// Taken off the list and woken owning the mutex, which the notifier took
/// for it.
const HANDED: u8 = 2;
/// Moved onto the mutex's waiter stack.
const REQUEUED: u8 = 3;

/// The word's lock bit; the rest is the address of the oldest waiter.
const LIST_LOCKED: usize = 1;

/// A waiter on a condition variable: a mutex node, first (the list and the
/// mutex's stack hold its address), and the list's links.
#[repr(C)]
pub(crate) struct Waiter<P: Platform> {
    node: Node<P>,
    /// The next newer and the next older waiter: the list is a ring, and
    /// the word points to its oldest waiter.
    newer: P::Cell<*mut Waiter<P>>,
    older: P::Cell<*mut Waiter<P>>,
    /// `WAITING` until a notification takes it off the list.
    state: P::Cell<u8>,
    /// The mutex it waits with.
    lock: P::Cell<*const Lock<P>>,
}

/// The condition variable's word.
pub(crate) struct Cond<P: Platform> {
    pub(crate) word: P::State,
}

impl<P: Platform> Cond<P> {
    /// Unlocks the mutex through `unlock` and sleeps until a notification
    /// or, with a deadline, until it passes; then holds the mutex again.
    /// Returns whether the deadline ended the wait (no notification
    /// counted this waiter).
    ///
    /// # Panics
    /// If other threads wait on this condition variable with another
    /// mutex (before `unlock` is called: the caller still holds its own).
    ///
    /// # Safety
    /// The caller holds `lock`, and `unlock` releases it.
    pub(crate) unsafe fn wait(
        &self,
        lock: &Lock<P>,
        unlock: impl FnOnce(),
        deadline: Option<Deadline<P>>,
    ) -> bool {
        let me: Waiter<P> = Waiter {
            node: Node::parked(),
            newer: NodeCell::new(ptr::null_mut()),
            older: NodeCell::new(ptr::null_mut()),
            state: NodeCell::new(WAITING),
            lock: NodeCell::new(ptr::from_ref(lock)),
        };
        let _retire = Retire(&me.node);
        let mp = ptr::from_ref(&me).cast_mut();
        let mut unlock = Some(unlock);
        if P::FAULT == Fault::CondUnlocksBeforeListing {
            // Broken on purpose: a notification may come before we are on
            // the list.
            if let Some(u) = unlock.take() {
                u();
            }
        }
        // Before we are on the list, so before a notifier can stamp our node.
        let listed_at = P::now();
        let oldest = self.lock_list();
        // SAFETY: we own the list: its waiters stay on it, their fields
        // ours to read and write, until we give it back.
        unsafe {
            if !oldest.is_null() && !ptr::eq((*oldest).lock.get(), lock) {
                self.unlock_list(oldest);
                // parking_lot's words, for code that expects its panic.
                panic!("attempted to use a condition variable with more than one mutex");
            }
            let oldest = if oldest.is_null() {
                me.newer.set(mp);
                me.older.set(mp);
                mp
            } else {
                let newest = (*oldest).older.get();
                (*newest).newer.set(mp);
                me.older.set(newest);
                me.newer.set(oldest);
                (*oldest).older.set(mp);
                oldest
            };
            self.unlock_list(oldest);
        }
        // Our node is on the list from here on: abort rather than unwind
        // past it.
        no_unwind::<P, _>(|| {
            // After we are on the list: a notification that follows this
            // unlock (and that of any thread that takes the mutex after it)
            // finds us.
            if let Some(unlock) = unlock {
                unlock();
            }
            // Poll our own node first while this thread's notifications
            // have been coming sooner than a wake from the OS would run it
            // (`Platform::wait_for_wake`). A thread that answers at once
            // (a ping-pong, a consumer kept fed) then takes its
            // notification running, and its notifier makes no system call.
            // While we poll, our parker is armed and not asleep: the only
            // change it can see is a wake (a notifier's, or the mutex's
            // after a requeue, which may hand us the lock); nudges go to
            // sleepers only. Seeing it (with `unparked`'s Acquire) is what
            // `park` would return at once.
            let polled = P::wait_for_wake(Wait::Notify, deadline, || me.node.parker().unparked());
            let woke = if polled {
                P::record(Event::CondPolled);
                Woke::Unparked
            } else {
                match deadline {
                    None => me.node.parker().park(),
                    Some(d) => me.node.parker().park_until(d),
                }
            };
            self.finish(&me, lock, woke, (listed_at, polled))
        })
    }

    /// The end of `wait`, once its sleep ended with `woke`; `listed_at` and
    /// `polled`: when it listed itself, and whether its wake came while it
    /// polled.
    fn finish(
        &self,
        me: &Waiter<P>,
        lock: &Lock<P>,
        woke: Woke,
        (listed_at, polled): (u64, bool),
    ) -> bool {
        let state = match woke {
            // Only a node on the mutex's stack is nudged.
            Woke::Nudged => REQUEUED,
            // SAFETY: the notifier (or the stack owner that popped us after
            // a requeue) wrote it before the wake, whose Release the park
            // (or the poll's `unparked`) acquired, and nobody writes it any
            // more.
            Woke::Unparked => unsafe { me.state.get() },
            Woke::TimedOut => {
                let oldest = self.lock_list();
                // SAFETY: we own the list; a notifier writes `state` only
                // while it owns it.
                let state = unsafe { me.state.get() };
                if state == WAITING {
                    // SAFETY: we own the list and are on it.
                    let oldest = unsafe { unlink(oldest, ptr::from_ref(me).cast_mut()) };
                    self.unlock_list(oldest);
                    P::record(Event::CondTimedOut);
                    // A wait at least this long: what the next poll goes by.
                    P::note_wake(Wait::Notify, P::now().saturating_sub(listed_at), None);
                    lock.lock();
                    return true;
                }
                self.unlock_list(oldest);
                P::record(Event::CondTimeoutOvertaken);
                // Its next poll learns nothing from this wait: the
                // notification's time is not ours to read before its wake.
                if P::FAULT == Fault::TimeoutAfterNotification && state != REQUEUED {
                    // Broken on purpose: counted by the notification, and
                    // reporting a timeout all the same.
                    if me.node.parker().park() == Woke::Unparked && state == NOTIFIED {
                        lock.lock();
                    }
                    return true;
                }
                // A notification came first. If it woke us (or is about
                // to), the wake must land before our node goes away.
                if state != REQUEUED && me.node.parker().park() != Woke::Unparked {
                    P::broken("a spinbit condition variable waiter off every list was nudged");
                }
                state
            }
        };
        if woke == Woke::Unparked && (state == NOTIFIED || state == HANDED) {
            // SAFETY: only the notifier wrote it, before its wake (the
            // Release swap in `unpark`), which our park or poll acquired.
            let woken_at = unsafe { me.node.woken_at() };
            // Saturating: two CPUs' tick counters may disagree slightly.
            let latency = (!polled).then(|| P::now().saturating_sub(woken_at));
            P::note_wake(Wait::Notify, woken_at.saturating_sub(listed_at), latency);
        }
        match state {
            NOTIFIED => lock.lock(),
            HANDED => {}
            REQUEUED if woke == Woke::Nudged && P::FAULT == Fault::RequeuedIgnoresNudge => {
                lock.wait_requeued(&me.node, Woke::TimedOut, false)
            }
            REQUEUED => {
                lock.wait_requeued(&me.node, woke, polled);
                // Its wait ended with the mutex's wake, at the earliest:
                // what the next poll goes by.
                P::note_wake(Wait::Notify, P::now().saturating_sub(listed_at), None);
            }
            _ => P::broken("a spinbit condition variable waiter woke while on the list"),
        }
        false
    }

    /// Wakes the oldest waiter, which locks the mutex itself. Returns
    /// whether there was a waiter.
    ///
    /// Not a requeue, even with the mutex held: a woken waiter wakes up
    /// while the notifier finishes its critical section and then takes the
    /// mutex as any arriving thread does (spinning for it if it may), while
    /// a requeued one waits for the mutex's own wake, which comes only at
    /// an unlock that finds no spinner. Measured with a bounded queue whose
    /// every push and pop notifies under the lock (`benches/condvar.rs`,
    /// 2-core AMD EPYC VM): 2 and 4 producer/consumer pairs ran 1.4 and 0.8
    /// M items/s with the requeue (also when it moved the waiter only
    /// behind mutex sleepers), 3.3 and 5.5 with the wake.
    pub(crate) fn notify_one(&self) -> bool {
        // Relaxed: a waiter that a notification must find registered
        // before it released the mutex, which the notifier (or a thread it
        // follows) took since; the CAS that takes the list acquires it.
        if self.word.load(Relaxed).is_null() {
            return false;
        }
        let oldest = self.lock_list();
        if oldest.is_null() {
            self.unlock_list(oldest);
            return false;
        }
        // SAFETY: we own the list and `oldest` is on it; its thread sleeps
        // until we wake it (and waits for that wake even if its deadline
        // passes meanwhile), so its node lives until our `unpark`.
        unsafe {
            let rest = unlink(oldest, oldest);
            P::record(Event::CondWoken);
            (*oldest).state.set(NOTIFIED);
            // Off the list, on no stack: ours to stamp until the wake.
            (*oldest).node.stamp_wake();
            self.unlock_list(rest);
            P::Parker::unpark((*oldest).node.parker());
        }
        true
    }

    /// Moves every waiter onto the mutex's waiter stack, oldest first, in
    /// one CAS while the mutex is held; with the mutex free, takes it for
    /// the oldest waiter, wakes that one owning it and moves the rest.
    /// Returns how many waiters there were.
    pub(crate) fn notify_all(&self) -> usize {
        // Relaxed: as in `notify_one`.
        if self.word.load(Relaxed).is_null() {
            return 0;
        }
        let oldest = self.lock_list();
        if oldest.is_null() {
            self.unlock_list(oldest);
            return 0;
        }
        // SAFETY: as in `notify_one`, for every waiter on the list, which
        // we take whole; all of them wait with the same mutex (`wait`
        // checks).
        unsafe {
            let newest = (*oldest).older.get();
            let lock = &*(*oldest).lock.get();
            // The chain for `push_chain`: each node linked to the next
            // older one.
            let mut n = 1;
            let mut w = newest;
            while w != oldest {
                let older = (*w).older.get();
                (*w).node.link_to(ptr::from_ref(&(*older).node).cast_mut());
                (*w).state.set(REQUEUED);
                w = older;
                n += 1;
            }
            (*oldest).state.set(REQUEUED);
            let mut top = ptr::from_ref(&(*newest).node).cast_mut();
            if P::FAULT == Fault::RequeueLosesNewest && oldest != newest {
                // Broken on purpose: the newest waiter is left behind.
                top = ptr::from_ref(&(*(*newest).older.get()).node).cast_mut();
            }
            let bottom = ptr::from_ref(&(*oldest).node).cast_mut();
            let mut handed = false;
            while !lock.push_chain(top, bottom) {
                // The mutex is free: take it for the oldest waiter, and
                // move the rest (if any) while we hold it.
                if lock.try_lock() {
                    P::record(Event::CondHanded);
                    (*oldest).state.set(HANDED);
                    // Not pushed (`push_chain` failed): ours to stamp.
                    (*oldest).node.stamp_wake();
                    if oldest != newest {
                        let second = ptr::from_ref(&(*(*oldest).newer.get()).node).cast_mut();
                        if !lock.push_chain(top, second) {
                            P::broken("a spinbit mutex held for a requeue was free");
                        }
                    }
                    handed = true;
                    break;
                }
            }
            self.unlock_list(ptr::null_mut());
            if handed {
                P::Parker::unpark((*oldest).node.parker());
            }
            n
        }
    }

    /// Takes the list's lock; returns the oldest waiter (or null).
    fn lock_list(&self) -> *mut Waiter<P> {
        let mut waits = 0;
        let mut s = self.word.load(Relaxed);
        loop {
            if s.addr() & LIST_LOCKED != 0 {
                // Its owner never blocks while it holds it.
                P::wait_for_stack(&mut waits);
                s = self.word.load(Relaxed);
                continue;
            }
            // Acquire: the list and its waiters' fields as the last owner
            // left them. Failure Relaxed: we read no waiter before we own
            // the list.
            match self.word.compare_exchange(s, s.map_addr(|a| a | LIST_LOCKED), Acquire, Relaxed) {
                Ok(_) => return s.cast(),
                Err(now) => s = now,
            }
        }
    }

    /// Gives the list's lock back, with `oldest` as its oldest waiter.
    fn unlock_list(&self, oldest: *mut Waiter<P>) {
        // Only the list's owner writes the word, so the CAS finds what the
        // owner last wrote. Release: our list edits and waiters' states,
        // for the next owner and for the waiter that reads its state after
        // a timeout.
        let mut s = self.word.load(Relaxed);
        loop {
            match self.word.compare_exchange(s, oldest.cast(), Release, Relaxed) {
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }
}

/// Takes `w` off the ring whose oldest waiter is `oldest`; returns the new
/// oldest (null if the ring is now empty).
///
/// # Safety
/// The caller owns the list, and `w` is on it.
unsafe fn unlink<P: Platform>(oldest: *mut Waiter<P>, w: *mut Waiter<P>) -> *mut Waiter<P> {
    // SAFETY: forwarded from the caller.
    unsafe {
        let newer = (*w).newer.get();
        if newer == w {
            return ptr::null_mut();
        }
        let older = (*w).older.get();
        (*older).newer.set(newer);
        (*newer).older.set(older);
        if w == oldest { newer } else { oldest }
    }
}

/// A condition variable for spinbit's mutexes: one machine word. Use it
/// through [`crate::Condvar`] (with [`crate::Mutex`]) or
/// [`crate::FairCondvar`] (with [`crate::FairMutex`]).
///
/// **No spurious wakeups**: a wait returns only after a notification took
/// it, or, for the timed waits, once its deadline has passed; so
/// `notify_one` returns whether it notified a waiter and `notify_all` how
/// many, exactly, and a waiter whose timed wait ran out is never counted
/// (its `WaitTimeoutResult` says it timed out).
///
/// **Requeue instead of a thundering herd**: `notify_all` moves the waiters
/// onto the mutex's own waiter stack in one step while the mutex is held;
/// its unlocks then wake them one at a time, as any other waiters, with the
/// same bound on waiting. With the mutex free, the oldest waiter is woken
/// owning it and the rest are moved. `notify_one` wakes its waiter, which
/// then takes the mutex as any arriving thread does.
///
/// **Notified while running**: after it unlocks the mutex, a waiter polls
/// its own node for its notification before it sleeps, while this
/// thread's notifications have been coming sooner than a wake from the OS
/// runs it, and for that long at most (its measured wake latency, never
/// past 50 µs, nor past a timed wait's deadline); a thread whose waits are
/// longer sleeps at once. A thread that answers at once (a ping-pong, a
/// consumer kept fed) is then notified with a store, not a system call.
///
/// Waiting with one mutex while other threads wait on the same condition
/// variable with another panics (before the wait unlocks anything); one
/// mutex after another is fine.
pub struct RawCondvar<M = crate::RawMutex> {
    cond: Cond<crate::platform::native::Native>,
    mutex: core::marker::PhantomData<M>,
}

const _: () = assert!(size_of::<RawCondvar>() == size_of::<usize>());

// Unwind safe, as the mutexes are (see `raw_mutex!`): a wait panics only
// before it is on the list (two mutexes at once), and gives the list back
// first; once on it, a wait aborts rather than unwind.
impl<M> core::panic::UnwindSafe for RawCondvar<M> {}
impl<M> core::panic::RefUnwindSafe for RawCondvar<M> {}

impl<M> RawCondvar<M> {
    /// A new condition variable with no waiters (the same as
    /// [`lock_api::RawCondvar::INIT`]).
    pub const fn new() -> Self {
        RawCondvar {
            cond: Cond { word: core::sync::atomic::AtomicPtr::new(ptr::null_mut()) },
            mutex: core::marker::PhantomData,
        }
    }
}

impl<M> Default for RawCondvar<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M> core::fmt::Debug for RawCondvar<M> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RawCondvar")
            .field("waiters", &!self.cond.word.load(Relaxed).is_null())
            .finish()
    }
}

/// The `lock_api` traits for a condition variable over `$mutex`.
macro_rules! raw_condvar {
    ($mutex:ty) => {
        // SAFETY: `wait` puts the waiter on the list before it unlocks the
        // mutex, and notifications take waiters off the list under the
        // list's lock, so a notification after the unlock finds it; it
        // returns holding the mutex again (locked by itself, or handed to
        // it), never unwinds once it unlocked (it aborts instead), and
        // panics (two mutexes) only before the unlock. Notifications count
        // exactly the waiters they took off the list, and a timed-out
        // waiter takes itself off before it returns.
        unsafe impl lock_api::RawCondvar for RawCondvar<$mutex> {
            #[allow(clippy::declare_interior_mutable_const)]
            const INIT: Self = Self::new();

            type RawMutex = $mutex;

            /// Unlocks `mutex`, sleeps until a notification, and holds
            /// `mutex` again. It never returns spuriously.
            ///
            /// # Panics
            ///
            /// If other threads wait on this condition variable with
            /// another mutex (the caller still holds `mutex` then).
            ///
            /// # Safety
            ///
            /// As for [`lock_api::RawCondvar::wait`].
            #[inline]
            unsafe fn wait(&self, mutex: &$mutex, guard: &mut lock_api::GuardSend) {
                // SAFETY: the caller holds `mutex`, which the closure
                // unlocks once.
                unsafe {
                    self.cond.wait(
                        mutex.raw_lock(),
                        || lock_api::RawMutex::unlock(mutex, lock_api::GuardSend::new()),
                        None,
                    );
                }
                *guard = lock_api::GuardSend::new();
            }

            /// Wakes the oldest waiter; returns whether there was one.
            #[inline]
            fn notify_one(&self) -> bool {
                self.cond.notify_one()
            }

            /// Moves every waiter onto the mutex's waiter stack (with the
            /// mutex free, the oldest is woken owning it); returns how many
            /// there were.
            #[inline]
            fn notify_all(&self) -> usize {
                self.cond.notify_all()
            }
        }

        // SAFETY: as for `wait`, with the deadline: a waiter whose sleep
        // runs out reports a timeout only if it took itself off the list.
        unsafe impl lock_api::RawCondvarTimed for RawCondvar<$mutex> {
            #[inline]
            fn checked_duration_to_instant(
                timeout: &std::time::Duration,
            ) -> Option<std::time::Instant> {
                std::time::Instant::now().checked_add(*timeout)
            }

            /// As `wait`, until `timeout` at the latest: `true` if the
            /// deadline ended the wait (never before it), `false` after a
            /// notification.
            ///
            /// # Safety
            ///
            /// As for [`lock_api::RawCondvar::wait`].
            #[inline]
            unsafe fn wait_until(
                &self,
                mutex: &$mutex,
                guard: &mut lock_api::GuardSend,
                timeout: &std::time::Instant,
            ) -> bool {
                // SAFETY: as in `wait`.
                let timed_out = unsafe {
                    self.cond.wait(
                        mutex.raw_lock(),
                        || lock_api::RawMutex::unlock(mutex, lock_api::GuardSend::new()),
                        Some(*timeout),
                    )
                };
                *guard = lock_api::GuardSend::new();
                timed_out
            }
        }
    };
}

raw_condvar!(crate::RawMutex);
raw_condvar!(crate::RawFairMutex);
