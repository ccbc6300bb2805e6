"""The --sanitizer harness itself, without a GPU: the parser of
compute-sanitizer's logs on sample logs, and the exit status a test sees when
gpufilter runs under a fake compute-sanitizer placed first on PATH."""

import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

import conftest

from conftest import (Gpufilter, format_sanitizer_summary, gpu_turn, hung_runs, repeated_runs,
                      sanitizer_report, sanitizer_summary)

# Logs as compute-sanitizer writes them (--log-file), one process each.
MEMCHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= ERROR SUMMARY: 0 errors
"""
MEMCHECK_ERRORS = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at conv2d_tiled(const unsigned char *, float *, int, int)+0x1f0 in conv2d.cu:88
=========     by thread (31,0,0) in block (7,3,0)
=========     Address 0x7f3a4c000400 is out of bounds
=========
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========
========= LEAK SUMMARY: 0 bytes leaked in 0 allocations
========= ERROR SUMMARY: 2 errors
"""
SYNCCHECK_ERROR = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in block
=========     at histogram_kernel(const unsigned char *, unsigned int *, int)+0x2c8 in histogram.cu:41
=========     by thread (16,0,0) in block (0,0,0)
=========
========= ERROR SUMMARY: 1 error
"""
RACECHECK_CLEAN = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
"""
RACECHECK_HAZARDS = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at scan_block(unsigned int *, int)+0x580 in scan.cu:25
=========     and Read access at scan_block(unsigned int *, int)+0x890 in scan.cu:31 [4080 hazards]
=========
========= Warning: Race reported between Read access at scan_block(unsigned int *, int)+0x610 in scan.cu:27
=========     and Write access at scan_block(unsigned int *, int)+0x700 in scan.cu:29 [2 hazards]
=========
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""
RACECHECK_SINGULAR = """\
========= COMPUTE-SANITIZER
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def write_logs(folder, *texts):
    folder.mkdir(exist_ok=True)
    for i, text in enumerate(texts):
        (folder / f"{1000 + i}.log").write_text(text)
    return folder


@pytest.mark.parametrize("tool, logs, want, line", [
    ("memcheck", [MEMCHECK_CLEAN, MEMCHECK_CLEAN, MEMCHECK_ERRORS],
     {"kind": "ERROR", "processes": 3, "errors": 2},
     "compute-sanitizer memcheck: 3 gpufilter processes checked, ERROR SUMMARY: 2 errors"),
    ("synccheck", [MEMCHECK_CLEAN, SYNCCHECK_ERROR],
     {"kind": "ERROR", "processes": 2, "errors": 1},
     "compute-sanitizer synccheck: 2 gpufilter processes checked, ERROR SUMMARY: 1 errors"),
    ("racecheck", [RACECHECK_CLEAN] * 3,
     {"kind": "RACECHECK", "processes": 3, "hazards": 0, "errors": 0, "warnings": 0},
     "compute-sanitizer racecheck: 3 gpufilter processes checked, "
     "RACECHECK SUMMARY: 0 hazards (0 errors, 0 warnings)"),
    ("racecheck", [RACECHECK_CLEAN, RACECHECK_HAZARDS, RACECHECK_SINGULAR],
     {"kind": "RACECHECK", "processes": 3, "hazards": 3, "errors": 2, "warnings": 1},
     "compute-sanitizer racecheck: 3 gpufilter processes checked, "
     "RACECHECK SUMMARY: 3 hazards (2 errors, 1 warnings)"),
    ("racecheck", [],
     {"kind": None, "processes": 0, "errors": 0},
     "compute-sanitizer racecheck: 0 gpufilter processes checked, "
     "RACECHECK SUMMARY: 0 hazards (0 errors, 0 warnings)"),
], ids=["memcheck", "synccheck", "racecheck-clean", "racecheck-hazards", "racecheck-no-logs"])
def test_summary_of_logs(tmp_path, tool, logs, want, line):
    folder = write_logs(tmp_path / "logs", *logs)
    (folder / "tmpx.status").write_text("0\n")  # the harness's side files are not logs
    got = sanitizer_summary(folder)
    assert got == want
    assert format_sanitizer_summary(tool, got) == line


# A stand-in for compute-sanitizer: takes the options before the command, runs
# the command, writes a summary to --log-file (%p: its pid), and exits as
# $FAKE_SANITIZER says. "lossy" is the bug seen with --require-cuda-init no: 0
# whatever the program's status; "faithful" passes the status on; "report"
# logs an error and exits with --error-exitcode; "report-unflagged" logs an
# error but exits 0; "hang-N" (or "hang-always") never ends its first N runs
# (every run). Its options are appended to $FAKE_SANITIZER_ARGS.
FAKE_SANITIZER = r"""#!/bin/sh
echo "$*" >> "$FAKE_SANITIZER_ARGS"
log=/dev/null tool=memcheck code=1
while [ $# -gt 0 ]; do
    case $1 in
        --log-file) log=$(printf %s "$2" | sed "s/%p/$$/") ;;
        --tool) tool=$2 ;;
        --error-exitcode) code=$2 ;;
        --*) ;;
        *) break ;;
    esac
    shift 2
done
marker=$(dirname "$log")/internal-done
case $FAKE_SANITIZER in
    hang-*)  # the first N runs (or all) never end, after the log's first line
        hung=$(cat "$marker-hangs" 2>/dev/null || echo 0)
        if [ "$FAKE_SANITIZER" = hang-always ] || [ "$hung" -lt "${FAKE_SANITIZER#hang-}" ]; then
            echo $((hung + 1)) > "$marker-hangs"
            echo "========= COMPUTE-SANITIZER" > "$log"
            # in a session of its own, as a tool's child may be: killing
            # the run's session alone would leave it
            setsid sleep "${FAKE_SANITIZER_SLEEP:-1000}"
        fi ;;
esac
"$@"
status=$?
errors=0 internal=0
case $FAKE_SANITIZER in report*) errors=1 ;; esac
case $FAKE_SANITIZER in
    internal-always) internal=1 ;;
    internal-[0-9]*)  # the first N runs fail internally
        failed=$(cat "$marker" 2>/dev/null || echo 0)
        [ "$failed" -lt "${FAKE_SANITIZER#internal-}" ] && { internal=1; echo $((failed + 1)) > "$marker"; } ;;
esac
{
    echo "========= COMPUTE-SANITIZER"
    if [ $internal = 1 ]; then
        echo "========= Internal Sanitizer Error: Detected a failure to track a kernel launch." \
             "Future records might be incomplete"
        errors=1
    fi
    if [ $errors = 1 ]; then
        echo "========= Invalid __global__ write of size 4 bytes"
        echo "=========     at conv2d_naive(const float *, float *, int, int)+0x90 in conv2d.cu:42"
    fi
    if [ "$tool" = racecheck ]; then
        echo "========= RACECHECK SUMMARY: $errors hazards displayed ($errors errors, 0 warnings)"
    else
        echo "========= ERROR SUMMARY: $errors errors"
    fi
} > "$log"
case $FAKE_SANITIZER in
    lossy|report-unflagged|internal*) exit 0 ;;
    faithful|hang-*) exit $status ;;
    report) exit $code ;;
esac
exit 99
"""


@pytest.fixture
def fake_sanitizer(tmp_path, monkeypatch):
    """compute-sanitizer first on PATH is the fake; returns the logs folder."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "compute-sanitizer"
    script.write_text(FAKE_SANITIZER)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    logs = tmp_path / "logs"
    logs.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("GPUFILTER_SANITIZER_LOGS", str(logs))
    monkeypatch.setenv("FAKE_SANITIZER_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("FAKE_SANITIZER", "lossy")
    return logs


@pytest.mark.parametrize("mode", ["lossy", "faithful"])
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_exit_status_under_sanitizer(gf, fake_sanitizer, monkeypatch, tmp_path, mode, tool):
    """gpufilter's own status reaches the test, whether or not the tool
    passes it on; each run leaves one log, with the tool's summary."""
    monkeypatch.setenv("FAKE_SANITIZER", mode)
    sanitized = Gpufilter(gf.path, "cuda", tool)
    r = sanitized.run("--no-such-option")  # a usage error, before any CUDA call
    assert r.rc == 2, r.describe()
    assert "unknown option '--no-such-option'" in r.err
    assert sanitized.run("--version").ok().out.startswith(b"gpufilter ")
    r = sanitized.run("-m", "no-such-mask", "in.png", "out.png")
    assert r.rc == 2, r.describe()
    summary = sanitizer_summary(fake_sanitizer)
    assert summary["processes"] == 3 and summary["errors"] == 0, summary
    assert ("hazards" in summary) == (tool == "racecheck")
    # no side files left (the lock files of gpu_turn aside), and one line
    # of durations per run: seconds, the test, the command
    assert sorted(p.suffix for p in fake_sanitizer.iterdir() if not p.name.startswith(".")) == \
        [".log"] * 3 + [".tsv"]
    durations = (fake_sanitizer / "durations.tsv").read_text().splitlines()
    assert len(durations) == 3, durations
    seconds, test, command = durations[0].split("\t")
    assert float(seconds) >= 0 and test.endswith(f"test_exit_status_under_sanitizer[{tool}-{mode}]")
    assert command.endswith("gpufilter --no-such-option")
    # the tool follows the shell's child, gpufilter, and was told to
    options = (tmp_path / "args").read_text().splitlines()
    assert all("--target-processes all" in line and f"--tool {tool}" in line for line in options)


def test_exit_status_by_signal(fake_sanitizer, tmp_path):
    """A gpufilter killed by a signal reads as subprocess reports it: -N."""
    crash = tmp_path / "crashing-gpufilter"
    crash.write_text("#!/bin/sh\nkill -TERM $$\n")
    crash.chmod(0o755)
    assert Gpufilter(crash, "cuda", "memcheck").run("--version").rc == -15


@pytest.mark.parametrize("mode", ["report", "report-unflagged"])
def test_report_fails_the_test(gf, fake_sanitizer, monkeypatch, mode):
    """A report fails the test with the log shown, even when the test expects
    a failure of gpufilter, and even when the tool's exit status is 0."""
    monkeypatch.setenv("FAKE_SANITIZER", mode)
    with pytest.raises(pytest.fail.Exception) as failed:
        Gpufilter(gf.path, "cuda", "memcheck").run("--no-such-option")
    message = str(failed.value)
    assert "compute-sanitizer memcheck reported errors" in message
    assert "Invalid __global__ write of size 4 bytes" in message
    assert "ERROR SUMMARY: 1 errors" in message


def test_cpu_runs_skip_the_sanitizer(gf, fake_sanitizer):
    r = Gpufilter(gf.path, "cuda", "memcheck").run("--backend", "cpu", "--no-such-option")
    assert r.rc == 2
    assert list(fake_sanitizer.iterdir()) == []


@pytest.fixture
def turns(monkeypatch):
    """Records, for each checked run, whether it had the GPU to itself."""
    recorded = []
    real = conftest.gpu_turn

    def recording_turn(folder, alone):
        recorded.append(alone)
        return real(folder, alone)
    monkeypatch.setattr(conftest, "gpu_turn", recording_turn)
    return recorded


@pytest.mark.parametrize("failures", [1, conftest.SHARED_REPEATS + 1])
def test_internal_error_is_repeated(gf, fake_sanitizer, monkeypatch, tmp_path, turns, failures):
    """The tool's own failure (not a finding) makes the harness run the
    command again, beside other runs first, then alone; a clean run passes,
    and is the one the summary counts."""
    monkeypatch.setenv("FAKE_SANITIZER", f"internal-{failures}")
    r = Gpufilter(gf.path, "cuda", "racecheck").run("-m", "no-such-mask", "in.png", "out.png")
    assert r.rc == 2, r.describe()
    assert len((tmp_path / "args").read_text().splitlines()) == failures + 1
    assert turns == [False] * min(failures + 1, conftest.SHARED_REPEATS + 1) + \
        [True] * (failures > conftest.SHARED_REPEATS)
    assert repeated_runs(fake_sanitizer) == failures
    summary = sanitizer_summary(fake_sanitizer)
    assert summary["processes"] == 1 and summary["errors"] == 0, summary


def test_internal_error_alone_fails(gf, fake_sanitizer, monkeypatch, tmp_path, turns):
    monkeypatch.setenv("FAKE_SANITIZER", "internal-always")
    with pytest.raises(pytest.fail.Exception) as failed:
        Gpufilter(gf.path, "cuda", "racecheck").run("--version")
    assert "Internal Sanitizer Error" in str(failed.value)
    assert len((tmp_path / "args").read_text().splitlines()) == conftest.SHARED_REPEATS + 2
    assert turns == [False] * (conftest.SHARED_REPEATS + 1) + [True]


def sleep_seconds(test):
    """The fake's sleep for one test (1000 s and more): its own number, so
    that a sleep of another test or another run on the machine does not
    count."""
    return 1000 + 2 * (os.getpid() % 100000) + test


def sleepers(seconds):
    """Processes still running the fake's sleep of that many seconds (none
    once killed)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() == f"sleep\0{seconds}\0".encode():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


def test_hung_run_is_described_killed_and_repeated(gf, fake_sanitizer, monkeypatch, turns):
    """A run that never ends is cut at SANITIZER_HANG_S: its processes are
    described in {id}.hang and killed, its partial log leaves the summary,
    and it runs again; the summary line says so."""
    monkeypatch.setenv("FAKE_SANITIZER", "hang-1")
    seconds = sleep_seconds(0)
    monkeypatch.setenv("FAKE_SANITIZER_SLEEP", str(seconds))
    monkeypatch.setattr(conftest, "SANITIZER_HANG_S", 2.0)
    started = time.monotonic()
    r = Gpufilter(gf.path, "cuda", "racecheck").run("-m", "no-such-mask", "in.png", "out.png")
    assert r.rc == 2, r.describe()
    assert time.monotonic() - started < 30
    assert turns == [False, False]
    assert hung_runs(fake_sanitizer) == 1 and not sleepers(seconds)
    hang = next(fake_sanitizer.glob("*.hang")).read_text()
    assert hang.startswith("hung after 2 s: ") and "gpufilter -m no-such-mask in.png out.png" in hang
    assert "compute-sanitizer --tool racecheck" in hang  # the tree, from the tool down
    assert "pid " in hang and f"sleep {seconds}" in hang and "state S" in hang
    assert len(list(fake_sanitizer.glob("*.hung"))) == 1
    summary = sanitizer_summary(fake_sanitizer)
    assert summary["processes"] == 1 and summary["errors"] == 0, summary
    assert sanitizer_report("racecheck", fake_sanitizer).endswith(
        "; 1 runs hung, killed after 2 s and repeated (*.hang)")
    lines = (fake_sanitizer / "durations.tsv").read_text().splitlines()
    assert len(lines) == 2 and lines[0].endswith(" (hung, killed)") and not lines[1].endswith(")")


def test_run_hung_every_time_fails(gf, fake_sanitizer, monkeypatch, tmp_path, turns):
    monkeypatch.setenv("FAKE_SANITIZER", "hang-always")
    seconds = sleep_seconds(1)
    monkeypatch.setenv("FAKE_SANITIZER_SLEEP", str(seconds))
    monkeypatch.setattr(conftest, "SANITIZER_HANG_S", 1.0)
    with pytest.raises(pytest.fail.Exception) as failed:
        Gpufilter(gf.path, "cuda", "racecheck").run("--version")
    assert "the run hung every time (1 s each)" in str(failed.value)
    assert f"sleep {seconds}" in str(failed.value)
    assert turns == [False] * (conftest.SHARED_REPEATS + 1) + [True]
    assert hung_runs(fake_sanitizer) == conftest.SHARED_REPEATS + 2
    assert not sleepers(seconds)


def test_gpu_turn_alone_waits_for_runs_in_flight(tmp_path):
    """A run that must be alone starts only when the shared runs have ended,
    and holds back runs that come after it."""
    events = []
    shared_in = threading.Event()
    release_shared = threading.Event()

    def shared(name, started=None):
        with gpu_turn(tmp_path, alone=False):
            events.append(f"{name} in")
            if started:
                started.set()
            release_shared.wait(5)
            events.append(f"{name} out")

    def alone():
        with gpu_turn(tmp_path, alone=True):
            events.append("alone in")
            time.sleep(0.2)
            events.append("alone out")

    first = threading.Thread(target=shared, args=("first", shared_in))
    first.start()
    assert shared_in.wait(5)
    lone = threading.Thread(target=alone)
    lone.start()
    time.sleep(0.2)
    later = threading.Thread(target=shared, args=("later",))
    later.start()
    time.sleep(0.2)
    assert events == ["first in"]  # the alone run waits, and so does the later one
    release_shared.set()
    for t in (first, lone, later):
        t.join(5)
    assert events == ["first in", "first out", "alone in", "alone out", "later in", "later out"]


def test_runs_in_flight_are_listed(gf, fake_sanitizer, monkeypatch):
    """While a run is in flight its test and command are in {id}.running,
    so that a run cut by a time limit says which tests it was waiting on."""
    seen = []
    real_popen = subprocess.Popen

    def popen_and_look(*args, **kw):
        seen.extend(p.read_text() for p in fake_sanitizer.glob("*.running"))
        return real_popen(*args, **kw)
    monkeypatch.setattr(subprocess, "Popen", popen_and_look)
    Gpufilter(gf.path, "cuda", "memcheck").run("--version").ok()
    assert len(seen) == 1 and "test_runs_in_flight_are_listed" in seen[0], seen
    assert seen[0].rstrip().endswith("gpufilter --version")
    assert not list(fake_sanitizer.glob("*.running"))


def test_slow_tests_start_first_under_a_sanitizer():
    """The order under --sanitizer: photo-sized tests first, the rest as
    collected (a stable sort, the same on every xdist worker)."""
    class Item:
        def __init__(self, name):
            self.name = name
            self.keywords = {}

    class Config:
        def __init__(self, sanitizer):
            self.options = {"--grid": "full", "--part": None, "--sanitizer": sanitizer,
                            "--backend": "cuda"}

        def getoption(self, name):
            return self.options[name]

    names = ["test_a[1]", "test_cuda_big_photo[tiled]", "test_b", "test_stats_photo",
             "test_c[photo]"]
    items = [Item(n) for n in names]
    conftest.pytest_collection_modifyitems(Config("racecheck"), items)
    assert [i.name for i in items] == ["test_cuda_big_photo[tiled]", "test_stats_photo",
                                       "test_a[1]", "test_b", "test_c[photo]"]
    items = [Item(n) for n in names]
    conftest.pytest_collection_modifyitems(Config(None), items)
    assert [i.name for i in items] == names
