//! Linux futex parker: one 32-bit futex word per waiter node.

use core::sync::atomic::{AtomicU32, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};

use super::Parker;

const AWAKE: u32 = 0;
const PARKED: u32 = 1;

/// A futex word: PARKED while its thread must sleep, AWAKE once woken.
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

    fn park(&self) {
        // Acquire: pairs with the Release store in `unpark`.
        while self.word.load(Acquire) == PARKED {
            // The kernel compares the word with PARKED and sleeps in one
            // step, so a wake that lands between our load and the syscall
            // makes FUTEX_WAIT return EAGAIN instead of sleeping. EINTR and
            // spurious returns land here too; the loop re-checks the word.
            futex_wait(&self.word, PARKED);
        }
    }

    unsafe fn unpark(this: *const Self) {
        // SAFETY: the caller guarantees `this` is live until the store below.
        let word: *const AtomicU32 = unsafe { &raw const (*this).word };
        // SAFETY: `word` is live here (the thread is still blocked); after
        // this store the thread may return and free the node.
        unsafe { (*word).store(AWAKE, Release) };
        // Only the address is passed on: the kernel looks it up in its futex
        // table and never dereferences freed memory. If the node is already
        // gone, the wake finds nobody, or at worst wakes an unrelated futex
        // waiter on the reused address spuriously, which every futex user
        // must tolerate.
        futex_wake(word);
    }
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: FUTEX_WAIT on a live, aligned u32 with no timeout; the return
    // value (0, EAGAIN, EINTR) is deliberately ignored: the caller re-checks
    // the word.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            core::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: *const AtomicU32) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; it reads no memory.
    unsafe {
        libc::syscall(libc::SYS_futex, word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
}
