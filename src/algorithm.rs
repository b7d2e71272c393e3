//! How the mutex works: the word, each operation, starvation mode and the
//! bound on waiting, fair and timed locking, why no wakeup is lost, and the
//! spin budget. This module has no items; it is documentation.
//!
//! # The algorithm
//!
//! A classic adaptive mutex lets every waiter spin before it sleeps. With many
//! threads they all spin at once: the lock's cache line bounces between cores,
//! the holder is slowed down and CPU time explodes. spinbit lets **at most one
//! waiter spin**; every other waiter yields the CPU and sleeps (but for a
//! thread that has just handed the lock over with a fair unlock, which
//! yields for a while without sleeping), and an unlocker that sees
//! a spinner wakes nobody, because the spinner will take the lock.
//!
//! The whole mutex is one word: a pointer to the most recently pushed sleeping
//! waiter, tagged in its five low bits.
//!
//! | bit | name | meaning |
//! |---|---|---|
//! | 0 | `LOCKED` | the mutex is held |
//! | 1 | `SPINNING` | one waiter has the right to spin; other waiters sleep |
//! | 2 | `STACK_LOCKED` | one thread owns the waiter stack; only it removes nodes |
//! | 3 | `STARVING` | starvation mode: every unlock hands the lock to the oldest sleeper (or, if it is asleep, nudges it once) |
//! | 4 | `BACKLOG` | more than 4 sleepers per CPU: unlocks wake one even beside a spinner |
//! | 5.. | head | the top of the stack of sleeping waiters, or null |
//!
//! The waiter nodes live on the waiting threads' own stacks (no allocation, no
//! global table) and each holds the word its thread sleeps on: a futex word on
//! Linux, a `std::thread::park` handle elsewhere.
//!
//! **lock.** The fast path is one `fetch_or(LOCKED)`. If the lock was held,
//! the slow path loops: take the lock whenever `LOCKED` is clear (keeping the
//! other bits; a spinner that paused first watches a free lock for one look
//! gap, below); else try to set `SPINNING` and, if that succeeds, spin for the
//! spin budget, yield the CPU once, and look again; if another thread spins,
//! yield the CPU and look again (on arrival, and after a wake past the
//! spinner that handed it nothing, below: once, and up to 8 times
//! in all while each yield runs other threads and, unless sleepers are
//! backed up, the waiter's starvation threshold has not passed); else sleep: link a node to
//! the current head and, in one CAS that only succeeds while `LOCKED` is still
//! set, publish it as the new head and drop `SPINNING` if we held it. Before
//! it sleeps in the OS, a pushed waiter polls its own node for its wake (no
//! look at the lock word) for as long as its wakes from the OS have been
//! taking to run it, if its waits on the stack have been shorter than that
//! (both measured per thread, a running average), unless that latency is
//! over 50 µs (then it was a wait for a CPU, which a poll would take):
//! polling as long as a sleep would cost keeps a wait within twice the
//! better choice's cost, and a thread woken while it polls is running, so
//! the `SPINNING` its wake hands it does not leave the lock free while it
//! waits for a CPU. A woken
//! thread competes for the lock again (it may barge past no one: the lock is
//! free or held); if it was the oldest waiter it may spin once even beside the
//! spinner. A thread that was handed the lock (below) returns at once. In
//! starvation mode a waiter does not spin: it yields while its yields run
//! other threads, as above, and then sleeps. A thread whose own
//! `unlock_fair` handed the lock to a sleeper less than 200 µs ago yields
//! and looks again instead of sleeping until that time is up (see Fair
//! unlocking).
//! A spinner looks at the word at gaps that double up to about 200 ns; a
//! thread that took the lock by spinning within its ping-pong window (500 ns
//! to 10 µs, adapted per thread) and finds it held again pauses 1.5 µs
//! before its first look, so that two busy threads alternate in batches
//! instead of trading the lock on every acquisition.
//! These are timing choices only: the argument below does not depend on
//! them.
//!
//! **unlock.** One CAS that clears `LOCKED`, from the word the unlock
//! expects: the word its thread's latest plain unlock found, if that
//! unlock needed no slow path and found no sleepers (a guess per thread,
//! so an uncontended unlock waits for no load first; an `unlock_fair`
//! that hands the lock over leaves it as it was), else the word loaded. A
//! wrong guess costs one failed CAS, and the unlock decides from the
//! value it returned, as from a load; the thread's next 8 releases then
//! load the word first (a miss beside a polling waiter is a cache-line
//! round trip, a hit saves one load). If the CAS from a loaded or
//! returned value fails, the word changed, and the unlock decides again
//! out of line. The guess is a hint: a CAS that succeeds from it replaced
//! a word with no wake to do, as a load would have shown. If the word
//! shows sleepers, no spinner and no stack owner, that CAS also takes
//! `STACK_LOCKED`, so the unlocker owns the stack from the instant the
//! lock is free; it unlinks the oldest waiter, releases `STACK_LOCKED` in
//! the same CAS that publishes the new head, and wakes the waiter. That CAS
//! also sets `SPINNING` if it was clear and hands it to the woken thread:
//! until it runs and either takes the lock or sleeps again, it is the spinner,
//! so the unlocks in between wake nobody else (without this, a holder that
//! re-takes the lock at once would wake the whole stack before the first
//! woken thread even runs). If the word shows `STARVING`, the unlock does not
//! release the lock at all: it hands it over (below).
//!
//! So an unlock touches the word only while it holds the lock or the
//! stack. After a release that leaves it neither, it touches nothing; and
//! while it owns the stack, the sleepers on it cannot return from `lock`.
//! A thread that takes the lock after the release, finds that it is the
//! mutex's last user and frees it therefore frees memory that no unlock
//! still uses, as POSIX allows for an unlocked mutex and as `std`'s and
//! `parking_lot`'s mutexes support (`model::freed_by_its_last_user`).
//!
//! **Backed-up sleepers.** A stack owner that unlinks a waiter (or looks at
//! the oldest one, below) counts the sleepers it leaves and sets `BACKLOG`
//! if there are more than 4 per CPU, clearing it otherwise. With more
//! sleepers than CPUs can serve, the thread handed `SPINNING` waits for a
//! CPU, often for milliseconds, and skipping wakes for it would leave
//! every sleeper to the starvation hand-offs. So while `BACKLOG` is set,
//! unlocks wake the oldest sleeper even when a thread holds `SPINNING`;
//! that woken thread is handed nothing and competes like an arrival. While
//! the flag is clear and a thread spins, unlocks skip their wakes, so no
//! wake comes to set it: so a waiter that pushes itself on other sleepers
//! in that state takes `STACK_LOCKED` if nobody holds it, counts the stack
//! the same way (a census, as the holder's look is), and gives it back as
//! a timed waiter that leaves does (below). The count is a hint kept in
//! the nodes by the stack owners; a stale flag costs a wake too many or
//! too few, and the argument below holds with it set or clear.
//!
//! **Which waiter.** The oldest (the stack keeps an amortised O(1) cached
//! tail with back links): a sleeping waiter is never passed over by a wake
//! or a hand-off. Outside starvation mode a woken waiter competes with running
//! threads that arrive at the same moment, as with `parking_lot` and `std`.
//!
//! # Starvation mode and direct hand-off
//!
//! Under oversubscription a spinner nearly always exists, so unlocks would
//! almost never wake anyone, and a woken waiter can lose the lock to running
//! threads again and again. So every sleeper *judges itself*: its sleep has a
//! timeout 1 ms after its starvation clock started in this `lock` call, or
//! 2 ms if its latest push found sleepers backed up (`BACKLOG`: many sleepers, where
//! each hand-off to a sleeping thread costs the others more). If the timeout
//! fires while its node is still on the stack, the thread takes
//! `STACK_LOCKED`, marks its node starving, moves it to the bottom of the
//! stack (the sleepers that marked themselves earlier, and a requeued
//! condition variable waiter judged starving, stay below it: it goes right
//! above them), sets
//! `STARVING`, and gives the stack back as a timed waiter that leaves does
//! (if the lock is free by then, it takes it back and hands it over itself).
//! Then it spins for up to 10 µs for the hand-off (a recipient that is
//! running spares the lock the wake latency), and sleeps again, without a
//! timeout, until the hand-off wakes it. No other thread has to notice it.
//! The clock starts when the waiter first yields (on arrival, beside a
//! spinner or in starvation mode, or after its own `unlock_fair`) or, if it
//! did not yield, when it first pushes itself: on an oversubscribed CPU one
//! yield can take milliseconds, and a waiter whose yields took longer than
//! its threshold marks itself as soon as it sleeps. If its first push finds
//! sleepers backed up, the clock starts again at that push.
//! The deadline holds across wakes: it counts from that start in the
//! `lock` call, so a sleeper that a wake pops before its deadline, or whose
//! deadline finds it popped already, and that loses the lock again, sleeps
//! again with a deadline from that same start, and once that has passed,
//! its parker returns at once instead of sleeping, and it marks itself
//! (unless a stack owner pops it first again). (The kernel ends a timed futex wait whose deadline has passed
//! only at a later timer interrupt, up to the thread's timer slack later:
//! a sleeper that every unlock popped was woken first every time and
//! never marked itself, until the parker looked at the clock itself.)
//!
//! Other threads judge too, by age, as a backstop (a sleeper whose timer
//! has fired but which has not run yet): every thread that owns the stack
//! to wake a sleeper (it reads the clock before its futex wake), and every
//! thread that has just taken the lock by spinning, at most once per 250 µs
//! per thread, treat an oldest sleeper that has waited over twice the
//! longer threshold (4 ms) as starving.
//!
//! A condition variable's waiter that `notify_all` moved onto the stack
//! sleeps on in the condition variable's wait, with no starvation timer of
//! its own until its first wake. So the requeue flags its node as
//! requeued, its clock started at the requeue, and other threads judge
//! such a node starving at 2 ms, the longer of a sleeper's two thresholds
//! (its own timer, once it has one, fires at 1 ms unless sleepers are
//! backed up), rather than at the backstop's 4 ms; its thread's next push
//! of its own clears the flag. A sleeper that marks itself walks up from
//! the bottom of the stack through the sleepers that starve, marked or
//! judged, and goes right above the highest that marked itself earlier or
//! is a requeued waiter; a mutex sleeper judged starving but not marked
//! (its timer fired and it has not run yet) is passed, unless a requeued
//! waiter judged starving sits above it: it marks itself once it runs,
//! and served before the marks it would be nudged and hold up their
//! hand-offs until then
//! (`model::a_mark_passes_a_sleeper_judged_starving_but_not_marked`). So
//! once a requeued waiter starves, no later mark passes it as soon as
//! every sleeper below it starves too: at once if those whose timers have
//! fired have marked themselves, and 4 ms after the requeue at the latest,
//! since each of them is older (a requeue whose push finds a newer top
//! starts its clock again) and judged by the backstop by then
//! (`model::condvar::a_later_mark_stays_above_a_requeued_waiter_judged_starving`).
//! From then on it is served like a sleeper that marked itself at that
//! moment, once a wake, a holder's look or a later mark sets `STARVING`.
//!
//! While `STARVING` is set, every unlock **hands the lock directly** to the
//! oldest sleeper if that sleeper's thread is running: it takes
//! `STACK_LOCKED` while still holding `LOCKED`, unlinks the oldest node,
//! marks it as owning the lock, releases the stack with `LOCKED` still set
//! and wakes it; the woken thread returns from `lock` without touching the
//! word. `LOCKED` is never clear in between, so no barging `fetch_or`,
//! spinner or newcomer can take the lock first. An unlock that finds the
//! stack owned by another thread (a sleeper marking itself, a timed waiter
//! leaving, a waker) waits for that owner with `LOCKED` still set: stack
//! owners never wait for the lock and give the stack back after a bounded
//! number of steps. The hand-off judges the next oldest sleeper and leaves
//! `STARVING` set only if it starves too; once nobody starves, the spin
//! bit's normal behaviour resumes. A waker that finds the oldest sleeper
//! starving while the lock is free takes `LOCKED` back and hands it over;
//! if somebody took the lock first, it sets `STARVING` and that holder's
//! unlock hands over.
//!
//! **Nudges: in starvation mode, no hand-off to a sleeping thread but
//! once.** Each waiter's futex word says where it is: armed and not
//! committed to a sleep (polling its node, or on its way to sleep), asleep
//! (the waiter sets this itself, with a CAS, just before the OS sleep),
//! nudged, or woken. A hand-off to a thread asleep in the OS keeps the lock
//! held by nobody who runs for a whole wake-up, milliseconds when every CPU
//! is busy, while more sleepers pass their threshold: starvation mode fed
//! itself, a convoy (measured at 8x the CPUs: docs/benchmarks.md, "The
//! nudge"). So an unlock in starvation mode (or a waker's retake) that
//! finds the oldest sleeper asleep *nudges* it instead: one CAS moves its
//! word from asleep to nudged, and the same CAS that gives the stack back
//! releases the lock and clears `STARVING`; then a futex wake. The node
//! stays linked, at the bottom. Until the nudged thread has marked itself
//! anew the lock is a plain one, and an unlock or retake that finds the
//! nudge pending gives the stack back (and the lock, if it holds it) at
//! once, whether or not the word is in starvation mode: a plain wake
//! never pops a thread that owes a new mark. A wake has nothing to do
//! meanwhile, so the nudge's release hands the nudged thread `SPINNING` at
//! once if nobody holds it, as a wake hands it to the thread it runs, and
//! then clears `BACKLOG`: unlocks skip their wakes for it instead of each
//! taking the stack to find the nudge pending (on one CPU, where the nudged
//! thread waits for the running one's time slice, that took a quarter of
//! the CPU at 32-64 threads). It clears the bit when it next owns the
//! stack, to mark itself. Once it runs, the nudged thread moves its word
//! back to running and marks itself anew: it takes `STACK_LOCKED`, sets
//! `STARVING` and gives the stack back as a marking sleeper does, which
//! hands the lock to the bottom sleeper (itself) if it is free; then it
//! waits awake for its hand-off as after its first mark, and the unlock
//! that finds it not yet asleep again hands it over. (`unlock_fair` and
//! `bump` hand the lock to the oldest sleeper whatever its state, as
//! before.) A sleeper is nudged once per `lock` call: found asleep again
//! after its nudge (its awake wait saw the lock held throughout, critical
//! sections longer than that wait), it is handed the lock asleep. So the
//! lock waits for a sleeper's wake-up at most once per `lock` call, and
//! only after that sleeper's awake wait saw the lock held throughout; where
//! the convoy formed (short critical sections, every CPU busy) it waits for
//! none.
//!
//! **The bound.** A sleeper that has waited 2 ms (1 ms with few sleepers)
//! marks itself starving as soon as it runs: at its timer wake, or at its
//! next sleep after a wake (a wake that pops it first gives it the lock or
//! another sleep past the deadline). From then on the unlocks serve the
//! marked sleepers bottom up and ours is never passed over: each hand-off
//! takes the bottom sleeper and keeps `STARVING` set while the next one up
//! starves, and each nudge goes to the bottom sleeper, which stays at
//! the bottom until it is handed the lock (later marks move above the
//! earlier ones). With `m` sleepers below it once it has marked itself (those
//! marked before it, and any requeued waiter judged starving that it
//! stopped above with the sleepers below that one), it waits for at most
//! `m + 1` turns, each of which is a critical section handed over, or a
//! nudge: then other threads may hold the lock while the nudged thread
//! wakes up and marks itself anew (one wake-up), and then it is handed the
//! lock at the next unlock, asleep at worst after one more wake-up. So the
//! bound counts `m + 1` critical sections plus, per nudged sleeper, the
//! critical sections of one wake-up and an awake wait (the models check
//! the order; the count of critical sections holds where no sleeper is
//! found asleep, and the models of it run without nudges). The first turn
//! comes at the current holder's unlock, except when that unlock read the
//! word just before `STARVING` was set; then that unlock takes the lock back
//! for the bottom sleeper, or the one thread that took the lock first hands
//! it over at its own unlock (it acquired after `STARVING` was set, so its
//! unlock sees it). Each of these steps needs only the holder to run, and
//! at most a bounded number of steps of a thread that owns the stack; what
//! the bound cannot include is time the OS keeps a runnable holder, stack
//! owner or recipient off the CPU. The price of a hand-off to a running
//! thread is that the lock stays held while the recipient sees its word;
//! to a sleeping one (after its nudge), a wake-up. An unlock in starvation
//! mode yields its CPU right after its hand-off or nudge, as Go's
//! `sync.Mutex` does after a hand-off: with more threads than CPUs the
//! recipient (or the nudged thread) may otherwise wait for a scheduler
//! slice (not the hand-offs of `unlock_fair` or of a stack
//! owner's retake, where it measured no gain).
//!
//! **Fair unlocking** ([`lock_api::RawMutexFair`]): `MutexGuard::unlock_fair`
//! hands the lock directly to the oldest sleeper if one exists (a waiter
//! that has not gone to sleep yet, e.g. the spinner, is not served), and is
//! a normal unlock otherwise. `MutexGuard::bump` and `unlocked_fair` hand the
//! lock to the oldest sleeper if one exists and then wait for it again like
//! any other arrival; with no sleeper, `bump` keeps the lock. A
//! [`FairMutex`](crate::FairMutex) unlocks this way every time its guard is dropped.
//!
//! A hand-off leaves the lock held by a thread that is not running yet, so
//! the thread that handed it over does not sleep if it waits for the lock
//! again within 200 µs (`bump`, or the next `lock`): it yields the CPU and
//! looks again until then. Had it slept, it would join the stack that the
//! next fair unlocks hand from, and once every waiter sleeps, each
//! acquisition waits for a wake while the CPUs idle (a tenth of the
//! throughput at 8 threads with fair unlocks: docs/benchmarks.md,
//! `HAND_OFF_AWAKE_NS`). So fair unlocks find sleepers less often: the
//! fairness they guarantee is towards waiters that sleep; waiters that
//! are awake compete as they do at a normal unlock.
//!
//! # Why no wakeup is lost
//!
//! A thread sleeps only after a CAS that saw `LOCKED` set and published its
//! node, so some holder exists whose `unlock` will see a non-empty stack:
//! its release is a CAS from the word it decides on, so it cannot miss a
//! push that came before the release. That unlock skips the wake in two
//! cases, each covered by someone else:
//!
//! * `SPINNING` was set (and `STARVING` was not): the spinner leaves that
//!   role only by taking the lock (its own unlock then sees the stack) or by
//!   pushing itself, which clears `SPINNING` and succeeds only while the lock
//!   is held (that holder's unlock sees the stack). A woken thread that was
//!   handed the bit is a spinner like any other. A nudged thread handed
//!   the bit (above) clears it only while it owns the stack, and then
//!   gives the stack back deciding as an unlock would, or while it holds
//!   the lock (a fair unlock's pop handed it over); no plain wake pops it
//!   before that. (`BACKLOG` only makes
//!   unlocks skip fewer wakes; a thread woken past the spinner holds
//!   nothing, so exactly one thread holds `SPINNING` while it is set.)
//! * `STACK_LOCKED` was set: it has one owner (every CAS that takes the
//!   stack expects the bit clear, which the model and debug builds
//!   assert), and that owner is committed to serving the stack
//!   before it gives it back (an owner that does not hold `LOCKED`, i.e. a
//!   timed waiter that leaves, a sleeper that marks itself starving or a
//!   pusher that counts the stack, decides as this unlock would have, on
//!   the word as it finds it then): it wakes one waiter (who takes the lock or
//!   sleeps again while it is held, so a later unlock looks at the stack), or
//!   hands the lock to one (whose unlock looks at the stack), or, if the lock
//!   was re-taken, sets `STARVING` in the same CAS that gives the stack back,
//!   so that the holder's unlock hands over; if that holder unlocked in the
//!   meantime the CAS fails and the owner takes the lock back itself; or,
//!   if the oldest sleeper's nudge is pending, it gives the stack back as
//!   it was: that thread, already woken, takes the stack to mark itself
//!   and then decides as this unlock would have (above). A
//!   holder that owns the stack to judge the oldest sleeper has not unlocked,
//!   so no unlock skipped anything for it.
//!
//! A hand-off never makes the lock free, so no unlock happens between the
//! hand-off and the recipient's own unlock. A wake that lands between a
//! waiter's push and its sleep is not lost either: the futex wait compares
//! the node's word and does not sleep once it was changed. The test suite
//! model-checks exactly these interleavings with loom.
//!
//! # Timed locking
//!
//! [`lock_api::RawMutexTimed`]: `Mutex::try_lock_for(Duration)` and
//! `try_lock_until(Instant)`. The fast path is `try_lock`'s; the clock is
//! read only when the mutex is held by someone else. `Duration::ZERO` and a deadline in the
//! past make one attempt, as `try_lock`; a timeout that does not fit an
//! `Instant` (e.g. `Duration::MAX`) waits as `lock`. Otherwise the waiter
//! spins and sleeps as in `lock`, and sleeps until the deadline at most:
//! on Linux with `FUTEX_WAIT_BITSET` and an absolute `CLOCK_MONOTONIC`
//! deadline, so signals (`EINTR`) and spurious returns do not stretch the
//! wait; elsewhere with `std::thread::park_timeout` in a loop that re-reads
//! the clock. It never returns `None` before the deadline. After it, the
//! slack is the kernel's: its timer slack (50 µs by default, see
//! `prctl(PR_SET_TIMERSLACK)`) and the time the thread waits for a CPU; a
//! waiter past its deadline while it spins adds at most the 2 µs spin
//! budget and one yield (a poll of its node for a wake that would outlast
//! its deadline does not start), and one
//! whose starvation deadline came just before its own adds at most the
//! 10 µs it stays awake for a hand-off (`STARVED_AWAKE_NS`). docs/design.md gives measured figures.
//!
//! A waiter whose sleep timed out must leave the stack without a trace. It
//! takes `STACK_LOCKED` like any stack owner (owners never block while
//! they hold it, and each gives it back after a walk and a few CASes, which
//! bounds this wait), and looks for its node:
//!
//! * Still linked: it unlinks it (the stack is doubly linked from the top
//!   down to the tail once the owner has walked it) and gives the stack
//!   back. Unlocks that found the stack owned meanwhile left their wakes to
//!   it, so it serves as an unlocker would: if the word shows sleepers, the
//!   lock free and no spinner (or `STARVING` or `BACKLOG`), it wakes the
//!   oldest sleeper or hands it the lock. Then it returns `None`.
//! * Not linked: a stack owner popped it before it took the stack, and that
//!   owner's wake is on its way. The waiter waits for it (the owner does not
//!   block between its pop and the wake) and goes on as any woken waiter: if
//!   it was handed the lock, it returns it; if it was handed `SPINNING`, it
//!   takes the lock if it is free, or else clears `SPINNING` in a CAS that
//!   sees the lock held, so the holder's unlock wakes the next sleeper.
//!
//! A timed waiter that holds `SPINNING` when its deadline passes before it
//! sleeps gives the bit up the same way. So every wake aimed at a timed
//! waiter is either used (it takes the lock) or passed on, which the loom
//! models check, with negative controls that drop each step.
//!
//!
//! # The spin budget
//!
//! The spinner busy-waits for 2 µs, measured with the CPU's own counter (the
//! TSC on x86_64, `CNTVCT_EL0` on aarch64), not in iterations: one `PAUSE`
//! costs 10 to 140 cycles depending on the core. A futex sleep and wake costs
//! the sleeper several microseconds before it runs again, so spinning longer
//! than that does not pay. Between two looks at the word the spinner backs
//! off (1, 2, 4, ... spin hints, up to about 200 ns), so its polling does not
//! keep pulling the cache line away from the holder. A waiter that finds
//! another spinner yields the CPU before it sleeps: with more threads than
//! cores, the lock is often free by the time it runs again. It yields again,
//! up to 8 times, only while its yields run other threads (each takes 5 µs
//! or more): then the CPU is oversubscribed, and a waiter that stays
//! runnable gets its share of the CPU, and with it its turn at the lock,
//! while a sleeper waits for a wake. A yield that returns at once means
//! nobody else wanted the CPU, and yielding again would be a busy wait.
//! A waiter whose yields have taken its starvation threshold (1 ms, see
//! Starvation mode) stops yielding and sleeps: its sleep's deadline has
//! passed, so it marks itself starving at once. Not while sleepers are
//! backed up (`BACKLOG`): there each waiter that marks itself costs the
//! lock a hand-off to a sleeping thread, and counting the yields cost
//! throughput (64 threads with 100 ns of think time, the queue at 32).
//!
//! One more rule keeps two busy threads from the 1-2 thread regression of
//! Go's version: a thread that took the lock by spinning less than its
//! ping-pong window ago and finds it taken again spins lazily: it waits
//! 1.5 µs before its first look. Without it, two threads that re-take the
//! lock as soon as they release it hand it over on every acquisition (a
//! cross-core transfer each time); with it, they alternate in batches. The
//! window starts at 500 ns and adapts per thread to what its pauses find
//! when they end: the lock held (usually: the other thread was running a
//! batch) doubles it, up to 10 µs; the lock free, and still free one look gap
//! later (a hand-over that the pause delayed), halves it.
