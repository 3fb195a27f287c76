"""make bench's profile: ftrace function_graph output of one registration (the "PROFILE" lines of
tests/bench/bench-vm.py) into a call tree, and the bench loop's calls parted by phase; and the
kprobe events on mutex_lock and mutex_unlock among those lines, into the time the registry's lock
was held in each phase. Used by report.py.
"""
import re


class Call:
    def __init__(self, name, ts=None):
        self.name, self.ts, self.us, self.children = name, ts, 0.0, []


def parse_profile(lines):
    """ftrace function_graph lines ("[TIMESTAMP |] CPU) DURATION | INDENT call", funcgraph-abstime
    optional) into a call tree; returns the roots."""
    roots, stack = [], []
    for line in lines:
        parts = line.split("|", 2)
        if len(parts) < 2:
            continue
        ts = None
        if len(parts) == 3:
            try:
                ts = float(parts[0]) * 1e6
            except ValueError:
                continue
            parts = parts[1:]
        dur, rest = parts
        m = re.search(r"([\d.]+) us", dur)
        text = rest.strip()
        name = re.sub(r"\s*\[[^]]*\]|\(\)|[{};]|/\*|\*/", "", text).strip()
        if text.endswith("{"):
            node = Call(name, ts)
            (stack[-1].children if stack else roots).append(node)
            stack.append(node)
        elif text.startswith("}"):
            if stack:
                stack.pop().us = float(m.group(1)) if m else 0.0
        elif text.endswith(";"):
            node = Call(name, ts)
            node.us = float(m.group(1)) if m else 0.0
            (stack[-1].children if stack else roots).append(node)
    return roots


# The fake ib_core's own steps around the client's calls (bench.c): their children are the
# client's callees and the core's lookup.
CORE_WRAPPERS = ("fake_client_acquire", "fake_client_release_ctx", "fake_client_put")


def loop_calls(roots):
    """The bench loop's calls from the ktime read just before the core's acquire, which starts
    the timed iteration (the reads before it, the run's start, are not phases); [] without a
    loop."""
    root = next((r for r in roots if r.name == "fake_bench"), None)
    if not root:
        return []
    first = next((i for i, c in enumerate(root.children) if c.name == "fake_client_acquire"), None)
    if first is None:
        return []
    while first > 0 and not root.children[first - 1].name.startswith("ktime_get"):
        first -= 1
    return root.children[max(first - 1, 0):]


def phase_bounds(roots):
    """The bench loop's phases as [(start, end)] timestamps (us), from its ktime reads (the
    reads before the core's acquire, the run's start, are not phases); [] without timestamps."""
    reads = [c.ts for c in loop_calls(roots) if c.name.startswith("ktime_get")]
    if any(t is None for t in reads):
        return []
    return list(zip(reads, reads[1:]))


# A kprobe event of bench-vm.py's profile: "nvpm_lock: (mutex_lock+0x0/...) lock=0x...".
LOCK_EVENT = re.compile(r"\bnvpm_(lock|unlock):.*\block=(0x[0-9a-f]+)")


def registry_lock(roots, lines, names):
    """{phase: [sections, us held]} of the registry's lock, or None without the lock events. The
    registry's lock is the first lock get_pages takes (its lookup comes before anything else);
    a section runs from mutex_lock's entry to mutex_unlock's, so the lock's uncontended taking
    and the tracer's own work inside the section count too."""
    events = []
    for line in lines:
        m = LOCK_EVENT.search(line)
        if m:
            try:
                events.append((float(line.split("|", 1)[0]) * 1e6, m.group(1), m.group(2)))
            except ValueError:
                continue
    bounds = dict(zip(names, phase_bounds(roots)))
    if not events or "get_pages" not in bounds:
        return None
    start, end = bounds["get_pages"]
    lock = next((a for t, k, a in events if k == "lock" and start <= t <= end), None)
    if lock is None:
        return None
    held, since = {name: [0, 0.0] for name in bounds}, None
    for t, kind, a in events:
        if a != lock:
            continue
        if kind == "lock":
            since = t
        elif since is not None:
            phase = next((n for n, (s, e) in bounds.items() if s <= since <= e), None)
            if phase:
                held[phase][0] += 1
                held[phase][1] += t - since
            since = None
    return held


def profile_phases(roots, names):
    """The bench loop's calls parted by its ktime reads into the phases NAMES:
    [(phase, {callee: [calls, us]}, phase us)]."""
    phases, cur, cur_us, start = [], None, 0.0, None
    for c in loop_calls(roots):
        if c.name.startswith("ktime_get"):
            if cur is not None:
                # With timestamps, the phase is the time between the ktime reads (its untraced
                # Rust code included); without, the sum of its traced calls.
                phases.append((cur, c.ts - start if c.ts is not None and start is not None else cur_us))
            cur, cur_us, start = {}, 0.0, c.ts
            continue
        if cur is None:
            continue
        cur_us += c.us
        for callee in (c.children if c.name in CORE_WRAPPERS else [c]):
            e = cur.setdefault(callee.name, [0, 0.0])
            e[0] += 1
            e[1] += callee.us
    return [(names[i], calls, us_) for i, (calls, us_) in enumerate(phases[:len(names)])]
