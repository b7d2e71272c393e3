//! Unit tests that need the crate's internals: slow-path counters, the
//! alternative parker and wake policy, stack inspection.

use std::cell::Cell;

use crate::platform::Event;

thread_local! {
    static PARKED: Cell<u64> = const { Cell::new(0) };
    static SPUN: Cell<u64> = const { Cell::new(0) };
}

pub(crate) fn record(event: Event) {
    let c = match event {
        Event::Parked => &PARKED,
        Event::Spun => &SPUN,
        _ => return,
    };
    c.with(|c| c.set(c.get() + 1));
}

/// This thread's (parked, spun) counts.
fn counts() -> (u64, u64) {
    (PARKED.with(Cell::get), SPUN.with(Cell::get))
}
