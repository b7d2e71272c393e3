//! The thread identity behind [`crate::ReentrantMutex`].

use core::num::NonZeroUsize;
use core::ptr::NonNull;

/// Identifies the current thread for [`crate::ReentrantMutex`]: the address
/// of a thread-local byte, as `parking_lot::RawThreadId` does.
///
/// The thread-local is `const`-initialised and has no destructor, so
/// reading its address allocates nothing, registers no thread-local
/// destructor, and works at any point of a thread's life, including in the
/// destructors of other thread-locals (a `ReentrantMutex` can be locked
/// from them).
///
/// ```
/// use spinbit::lock_api::GetThreadId;
///
/// let here = spinbit::RawThreadId.nonzero_thread_id();
/// assert_eq!(here, spinbit::RawThreadId.nonzero_thread_id());
/// let there = std::thread::spawn(|| spinbit::RawThreadId.nonzero_thread_id());
/// assert_ne!(here, there.join().unwrap());
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct RawThreadId;

impl RawThreadId {
    /// The current thread's identity.
    #[inline]
    pub(crate) fn current() -> NonZeroUsize {
        thread_local! {
            // One byte, not a zero-sized type, so that each thread's copy has
            // an address of its own. `const` and without `Drop`: no lazy
            // initialisation and no destructor, so `with` never fails.
            static KEY: u8 = const { 0 };
        }
        // The address of a live object is never null.
        KEY.with(|key| NonNull::from(key).addr())
    }
}

// SAFETY: each live thread has its own `KEY`, a distinct object of one byte,
// so no two live threads get the same address; a thread's `KEY` does not
// move while the thread lives, so the same thread gets the same address
// every time; and it is non-zero because it is a `NonNull`'s. An address may
// come back for a thread started after this one exited, which the trait
// allows.
unsafe impl lock_api::GetThreadId for RawThreadId {
    const INIT: Self = RawThreadId;

    #[inline]
    fn nonzero_thread_id(&self) -> NonZeroUsize {
        Self::current()
    }
}
