"""How fast this guest runs, measured: the scenarios' deadlines follow it (issue 37,
item 7). Under TCG every guest instruction is emulated on the host, so a host busy with
other work runs the guest slower, and a deadline in fixed seconds fails a scenario that
was only slow - seqrand-pmtu and seqrand-offloads were killed at their limits on a busy
machine that passed on a quiet one.

calibrate() times a fixed CPU-bound workload (the interpreter's loop and SHA-256, what
the scenarios' own work is made of) once, when the runner starts; scale() divides it by
REFERENCE_SECONDS, the same workload's time in the guest on a quiet 2-core host, and
keeps the result between 1 (a guest never gets less time than its limit says) and
MAX_SCALE (a hung scenario is still killed). The runner multiplies each scenario's
TIME_LIMIT by it and exports it as TUSK_TIME_SCALE, which tests/kit.py's wait_until
applies to every wait of the scenarios."""
import hashlib
import time

# the workload's time in the guest (TCG, 2 vCPUs) on the 2-core host: the median of
# three smoke boots (0.43, 0.44, 0.51 s) with one host core busy (a benchmark's QEMU) -
# a little slower than quiet, so a scale above 1 means slower than that; with both
# cores busy besides it took 0.89 s (tests/vm/README.md says how to measure it again)
REFERENCE_SECONDS = 0.44
MAX_SCALE = 4.0          # tests/kit.py takes no more than this from the variable
VARIABLE = "TUSK_TIME_SCALE"


def workload():
    total = 0
    for number in range(300_000):
        total += number * number % 7
    digest = hashlib.sha256()
    block = bytes(1 << 20)
    for _ in range(16):
        digest.update(block)
    return total, digest.hexdigest()


def calibrate():
    """Seconds the workload takes here, the fastest of three runs (the first warms
    the interpreter's caches; a fluke of the host slows one run, not all three)."""
    times = []
    for _ in range(3):
        start = time.monotonic()
        workload()
        times.append(time.monotonic() - start)
    return min(times)


def scale(seconds, reference=REFERENCE_SECONDS):
    return round(min(MAX_SCALE, max(1.0, seconds / reference)), 2)

