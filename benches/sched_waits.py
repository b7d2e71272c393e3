#!/usr/bin/env python3
"""Where the longest `lock()` calls spent their time, from a scheduler trace.

    cargo build --release -p spinbit-bench --features stats --bin contention_profile
    perf record -k CLOCK_MONOTONIC -e sched:sched_switch \\
        -e sched:sched_wakeup -o sched.data \\
        target/release/contention_profile 4 0 --sched 2> calls.txt
    perf script -i sched.data --ns -F tid,cpu,time,event,trace > sched.txt
    benches/sched_waits.py calls.txt sched.txt

`calls.txt` has the profile's `lock() over 10 us: tid T from A to B ns` lines
(on CLOCK_MONOTONIC, the clock the trace is stamped with). For each such call this splits its time into running,
runnable (woken or preempted, waiting for a CPU) and sleeping, and names
the threads that held the CPUs during its longest runnable stretch. Then,
for all the profile's threads, the runnable stretches by length: how long a
thread that could run waited for a CPU.
"""

import re
import sys
from collections import defaultdict

CALL = re.compile(r"lock\(\) over 10 us: tid (\d+) from (\d+) to (\d+) ns")
SLOW = 1_500_000
EVENT = re.compile(r"^\s*(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+sched:(\w+):\s+(.*)$")


def ns(stamp):
    sec, frac = stamp.split(".")
    return int(sec) * 1_000_000_000 + int(frac.ljust(9, "0")[:9])


def fmt(t):
    return f"{t / 1e6:.2f} ms" if t >= 100_000 else f"{t / 1e3:.1f} us"


def main(calls_path, trace_path):
    waits = [tuple(map(int, m.groups())) for m in map(CALL.search, open(calls_path)) if m]
    waiting = defaultdict(list)
    for tid, a, b in waits:
        waiting[tid].append((a, b))
    calls = [c for c in waits if c[2] - c[1] > SLOW]
    ours = set(waiting)
    # Every thread's state intervals: (start, end, state, cpu), state one of
    # "run", "runnable", "sleep"; and each CPU's occupants: (start, end, tid).
    state = {}  # tid -> (state, since, cpu)
    intervals = defaultdict(list)
    occupants = defaultdict(list)
    on_cpu = {}  # cpu -> (tid, since)
    comm = {}
    first = last = None
    for line in open(trace_path):
        m = EVENT.match(line)
        if not m:
            continue
        _, cpu, stamp, event, trace = m.groups()
        cpu, t = int(cpu), ns(stamp)
        first = t if first is None else first
        last = t

        def enter(tid, new, where):
            old = state.get(tid)
            if old is not None:
                intervals[tid].append((old[1], t, old[0], old[2]))
            state[tid] = (new, t, where)

        if event == "sched_switch":
            f = dict(re.findall(r"(\w+)=(\S+)", trace))
            prev, nxt = int(f["prev_pid"]), int(f["next_pid"])
            comm[prev], comm[nxt] = f["prev_comm"], f["next_comm"]
            enter(prev, "runnable" if f["prev_state"].startswith("R") else "sleep", cpu)
            enter(nxt, "run", cpu)
            if cpu in on_cpu:
                occupants[cpu].append((on_cpu[cpu][1], t, on_cpu[cpu][0]))
            on_cpu[cpu] = (nxt, t)
        elif event == "sched_wakeup":
            f = dict(re.findall(r"(\w+)=(\S+)", trace))
            tid = int(f["pid"])
            if state.get(tid, ("sleep",))[0] == "sleep":
                enter(tid, "runnable", int(f["target_cpu"]))

    def overlap(spans, a, b):
        return sum(max(0, min(e, b) - max(s, a)) for s, e in spans)

    def ran_between(a, b):
        """Who held each CPU between a and b, longest first: tid 0 is the
        idle task; for the lock threads, how much of it they spent inside
        a `lock()` call over 10 us (waiting) rather than outside (holding
        the lock, or between calls)."""
        out = {}
        for cpu, occ in occupants.items():
            share = defaultdict(lambda: [0, 0])
            for s, e, tid in occ:
                lo, hi = max(s, a), min(e, b)
                if hi > lo:
                    share[tid][0] += hi - lo
                    share[tid][1] += overlap(waiting.get(tid, ()), lo, hi)
            out[cpu] = sorted(share.items(), key=lambda x: -x[1][0])[:3]
        return out

    def who(tid, spent):
        if tid == 0:
            return f"idle {fmt(spent[0])}"
        if tid not in ours and comm.get(tid) not in names:
            return f"{comm.get(tid, tid)} {fmt(spent[0])}"
        return f"{tid} {fmt(spent[0])} ({fmt(spent[1])} of it in lock())"

    # The test's lock threads: named as the ones with waits.
    names = {comm.get(tid) for tid in ours}
    print(f"{len(calls)} lock() calls over 1.5 ms; trace {fmt(last - first)}")
    totals = defaultdict(int)
    for tid, a, b in sorted(calls, key=lambda c: c[1] - c[2]):
        split = defaultdict(int)
        longest = (0, None)
        for s, e, st, cpu in intervals[tid]:
            lo, hi = max(s, a), min(e, b)
            if hi <= lo:
                continue
            split[st] += hi - lo
            if st == "runnable" and hi - lo > longest[0]:
                longest = (hi - lo, (lo, hi, cpu))
        for k, v in split.items():
            totals[k] += v
        line = f"tid {tid}: {fmt(b - a)}: " + ", ".join(
            f"{k} {fmt(split[k])}" for k in ("run", "runnable", "sleep")
        )
        if longest[1]:
            lo, hi, cpu = longest[1]
            held = ran_between(lo, hi)
            line += f"; longest runnable {fmt(longest[0])} (queued on CPU {cpu}), CPUs held by: " + "; ".join(
                f"CPU {c}: " + ", ".join(who(t, d) for t, d in held[c]) for c in sorted(held)
            )
        print(line)
    all_calls = sum(b - a for _, a, b in calls) or 1
    print(
        "all calls over 1.5 ms: "
        + ", ".join(f"{k} {100 * totals[k] / all_calls:.0f} %" for k in ("run", "runnable", "sleep"))
    )
    process = {tid for tid in intervals if comm.get(tid) in names}
    buckets = [(1_000_000, ">=1 ms"), (100_000, "100us-1ms"), (10_000, "10-100us"), (0, "<10us")]
    counts = defaultdict(lambda: [0, 0])
    for tid in process:
        for s, e, st, _ in intervals[tid]:
            if st != "runnable":
                continue
            for floor, name in buckets:
                if e - s >= floor:
                    counts[name][0] += 1
                    counts[name][1] += e - s
                    break
    print(
        f"runnable stretches of the {len(process)} lock threads: "
        + ", ".join(f"{name}: {counts[name][0]} ({fmt(counts[name][1])})" for _, name in buckets)
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
