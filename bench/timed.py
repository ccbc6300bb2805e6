#!/usr/bin/env python3
"""Run a command; print its wall-clock seconds and the peak resident memory
(MiB) of its largest process, or 'failed: ...' with its first error line.

    python3 bench/timed.py COMMAND [ARG...]
"""
import resource
import subprocess
import sys
import time

start = time.perf_counter()
run = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
if run.returncode != 0:
    print("failed:", (run.stderr.strip().splitlines() or ["exit %d" % run.returncode])[0][:70])
else:
    print("%.3f %.0f" % (seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024))
