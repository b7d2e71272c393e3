//! A work queue: producers push jobs into a bounded `VecDeque` behind a
//! `spinbit::Mutex`, consumers take them, and two `spinbit::Condvar`s let
//! each side sleep until the other has made room or work.
//!
//! ```text
//! cargo run --release --example condvar
//! ```

use std::collections::VecDeque;
use std::thread;

use spinbit::{Condvar, Mutex};

const PRODUCERS: u64 = 4;
const CONSUMERS: u64 = 4;
const JOBS_PER_PRODUCER: u64 = 100_000;
const CAPACITY: usize = 64;

struct Queue {
    jobs: Mutex<(VecDeque<u64>, bool)>,
    not_empty: Condvar,
    not_full: Condvar,
}

fn main() {
    let q = Queue {
        jobs: Mutex::new((VecDeque::with_capacity(CAPACITY), false)),
        not_empty: Condvar::new(),
        not_full: Condvar::new(),
    };
    let total: u64 = thread::scope(|s| {
        let q = &q;
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                s.spawn(move || {
                    for i in 0..JOBS_PER_PRODUCER {
                        let mut g = q.jobs.lock();
                        // Sleeps until a consumer made room.
                        q.not_full.wait_while(&mut g, |(jobs, _)| jobs.len() == CAPACITY);
                        g.0.push_back(p * JOBS_PER_PRODUCER + i);
                        drop(g);
                        q.not_empty.notify_one();
                    }
                })
            })
            .collect();
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                s.spawn(move || {
                    let mut sum = 0;
                    loop {
                        let mut g = q.jobs.lock();
                        q.not_empty.wait_while(&mut g, |(jobs, done)| jobs.is_empty() && !*done);
                        // Empty and done: every job was taken.
                        let Some(job) = g.0.pop_front() else { return sum };
                        drop(g);
                        q.not_full.notify_one();
                        sum += job;
                    }
                })
            })
            .collect();
        producers.into_iter().for_each(|p| p.join().unwrap());
        // Every job is queued: the consumers stop once the queue runs dry.
        // `notify_all` moves the sleeping ones onto the mutex's waiter
        // stack, where its unlocks wake them one at a time, instead of
        // waking them all to fight over the mutex.
        q.jobs.lock().1 = true;
        let woken = q.not_empty.notify_all();
        println!("notify_all notified {woken} sleeping consumers");
        consumers.into_iter().map(|c| c.join().unwrap()).sum()
    });
    let n = PRODUCERS * JOBS_PER_PRODUCER;
    println!("{PRODUCERS} producers, {CONSUMERS} consumers: {n} jobs, sum {total}");
    assert_eq!(total, n * (n - 1) / 2);
}
