"""pytest configuration for the gpufilter CLI suite.

    python3 -m pytest tests/cli -q --backend cpu            # CI, no GPU needed
    python3 -m pytest tests/cli -q -n 16 --backend cuda     # the GPU machine

Options: --backend {cpu,cuda} (the backend under test, default cpu),
--gpufilter PATH (default $GPUFILTER_BIN, else ../../build/gpufilter from here).
Inputs are random and fresh each run; the seed is printed in the header and
at the end; rerun with GPUFILTER_TEST_SEED=N to get the same data.
"""

import contextlib
import fcntl
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gftest  # noqa: E402
from groups import groups, member_rng, stable_nodeid  # noqa: E402,F401  (groups: a fixture)

DEFAULT_BIN = Path(__file__).resolve().parent.parent.parent / "build" / "gpufilter"
# compute-sanitizer's --error-exitcode: its exit status when it reported errors
SANITIZER_REPORT_EXIT = 86


def pytest_addoption(parser):
    group = parser.getgroup("gpufilter")
    group.addoption("--backend", choices=["cpu", "cuda"], default="cpu",
                    help="gpufilter backend under test (default cpu)")
    group.addoption("--gpufilter", metavar="PATH", default=None,
                    help="the binary (default $GPUFILTER_BIN or build/gpufilter)")
    group.addoption("--grid", choices=["full", "reduced"], default=None,
                    help="full (default, or $GPUFILTER_GRID): every parametrized case; "
                         "reduced: every k-th case of the big grids (tests marked "
                         "reduce(k)), a covering subset for a quick CUDA check, where "
                         "each run of the binary pays ~0.2 s of CUDA start-up")
    group.addoption("--sanitizer", choices=["memcheck", "racecheck", "synccheck", "initcheck"],
                    default=None,
                    help="run every CUDA invocation of the binary under compute-sanitizer "
                         "with this tool; a report fails the test (exit 86) and the "
                         "summary counts the processes checked")
    group.addoption("--part", metavar="I/N", default=None,
                    help="run only part I (0 <= I < N) of the collected tests, every N-th "
                         "from the I-th: splits a long CUDA run across commands")


def _binary_path(config):
    p = config.getoption("--gpufilter") or os.environ.get("GPUFILTER_BIN") or DEFAULT_BIN
    return Path(p).resolve()


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda_only: runs only with --backend cuda")
    config.addinivalue_line("markers", "reduce(k): with --grid reduced, keep every k-th case")
    config.addinivalue_line("markers", "batch_group(name): the test's run is one batch with its "
                                       "group's (groups.py)")
    workerinput = getattr(config, "workerinput", None)
    if workerinput and "gpufilter_seed" in workerinput:
        seed = int(workerinput["gpufilter_seed"])
    elif os.environ.get("GPUFILTER_TEST_SEED"):
        seed = int(os.environ["GPUFILTER_TEST_SEED"])
    else:
        seed = random.SystemRandom().randrange(2**32)
    config._gpufilter_seed = seed


    if config.getoption("--backend") == "cuda" and workerinput is None:
        _start_cuda_hold(config)
    if config.getoption("--sanitizer") and workerinput is None:
        # workers inherit the folder through the environment; a folder given
        # there already is kept, so that a run cut short can still be counted
        folder = os.environ.get("GPUFILTER_SANITIZER_LOGS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
        else:
            os.environ["GPUFILTER_SANITIZER_LOGS"] = tempfile.mkdtemp(prefix="gpufilter-sanitizer-")


def _start_cuda_hold(config):
    """With --backend cuda, keep one CUDA context open for the whole run
    (build/cuda-hold, next to the binary): without a persistence daemon every
    gpufilter start would otherwise initialise the GPU from cold."""
    helper = _binary_path(config).parent / "cuda-hold"
    config._cuda_hold = None
    if not helper.exists():
        return
    proc = subprocess.Popen([str(helper)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if proc.stdout.readline().strip() == b"ready":
        config._cuda_hold = proc
    else:
        proc.wait()


def pytest_unconfigure(config):
    proc = getattr(config, "_cuda_hold", None)
    if proc is not None:
        proc.stdin.close()
        proc.wait(timeout=30)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    # pytest-xdist: every worker uses the controller's seed.
    node.workerinput["gpufilter_seed"] = node.config._gpufilter_seed


def grid_mode(config):
    mode = config.getoption("--grid") or os.environ.get("GPUFILTER_GRID") or "full"
    if mode not in ("full", "reduced"):
        raise pytest.UsageError(f"--grid / GPUFILTER_GRID: unknown grid {mode!r}")
    return mode


def pytest_report_header(config):
    return [
        f"gpufilter: {_binary_path(config)}  backend: {config.getoption('--backend')}"
        f"  grid: {grid_mode(config)}",
        f"gpufilter: seed {config._gpufilter_seed} (rerun with GPUFILTER_TEST_SEED={config._gpufilter_seed})",
    ]


# A log's closing line: "ERROR SUMMARY: 3 errors" (memcheck, synccheck,
# initcheck), or racecheck's "RACECHECK SUMMARY: 2 hazards displayed (1 error,
# 1 warning)"; the word, plurals and "displayed" vary between releases. The
# count must be followed by errors or hazards, so memcheck's "LEAK SUMMARY: 0
# bytes leaked" is not taken for a process.
SUMMARY_RE = re.compile(r"\b(?P<kind>[A-Z]+) SUMMARY: (?P<count>\d+) (?P<unit>error|hazard)s?\b"
                        r"(?:\D*?\((?P<errors>\d+) errors?, (?P<warnings>\d+) warnings?\))?")


def sanitizer_summary(folder, pattern="*.log"):
    """From compute-sanitizer's logs (those in folder matching pattern): the
    processes checked and the counts of their summary lines, e.g. {"kind": "ERROR", "processes": 12, "errors": 0}
    or, for racecheck, {"kind": "RACECHECK", "processes": 12, "hazards": 3,
    "errors": 1, "warnings": 2}."""
    total = {"kind": None, "processes": 0, "errors": 0}
    for log in sorted(Path(folder).glob(pattern)):
        for line in log.read_text(errors="replace").splitlines():
            m = SUMMARY_RE.search(line)
            if not m:
                continue
            total["processes"] += 1
            total["kind"] = m["kind"]
            if m["unit"] == "hazard":
                for key, value in (("hazards", m["count"]), ("errors", m["errors"]),
                                   ("warnings", m["warnings"])):
                    total[key] = total.get(key, 0) + int(value or 0)
            else:
                total["errors"] += int(m["count"])
    return total


# compute-sanitizer's own failure, not a finding about the program. Seen with
# racecheck when 16 checked processes share one GPU ("Detected a failure to
# track a kernel launch"); the same run alone is clean.
INTERNAL_ERROR = "Internal Sanitizer Error"
SHARED_REPEATS = 2  # repeats of a run the tool failed, before one alone
# A checked run still going after this many seconds is hung: its process
# tree and gpufilter's thread stacks go to {id}.hang, the tree is killed and
# the run repeated like one the tool failed. (Under racecheck the slowest
# runs take ~30 s; 11 of 2353 never ended, all batch runs with several
# worker threads, every thread waiting on a lock inside libcuda.)
SANITIZER_HANG_S = float(os.environ.get("GPUFILTER_SANITIZER_HANG_S", 300))


def repeated_runs(folder):
    """How many attempts the tool failed internally and the harness repeated
    (their logs are kept as *.internal, outside the summary)."""
    return len({p.name.split("-")[0] for p in Path(folder).glob("*.internal")})


def hung_runs(folder):
    """How many attempts hung and were killed ({id}.hang says where)."""
    return len(list(Path(folder).glob("*.hang")))


def sanitizer_report(tool, folder):
    """The summary line of the runs logged in folder, with the repeats."""
    line = format_sanitizer_summary(tool, sanitizer_summary(folder))
    repeated, hung = repeated_runs(folder), hung_runs(folder)
    if repeated:
        line += f"; {repeated} runs repeated after an internal error of the tool"
    if hung:
        line += f"; {hung} runs hung, killed after {SANITIZER_HANG_S:.0f} s and repeated (*.hang)"
    return line


def process_tree(root):
    """root and its descendants' pids, parents first (from /proc)."""
    children = {}
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat_file.parent.name))
    tree = [root]
    for pid in tree:  # the list grows as it is read: each level after its parents
        tree += sorted(children.get(pid, []))
    return tree


def describe_process(pid):
    """A process's command and, per thread, its state and where the kernel
    has it wait (wchan); for gpufilter, its threads' stacks from gdb (or
    cuda-gdb) where one is installed."""
    base = Path(f"/proc/{pid}")
    try:
        argv = (base / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid}: gone\n"
    lines = [f"pid {pid}: {shlex.join(a.decode(errors='replace') for a in argv if a)}"]
    for task in sorted(base.glob("task/*"), key=lambda t: int(t.name)):
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            comm = (task / "comm").read_text().strip()
            wchan = (task / "wchan").read_text().strip()
        except OSError:
            continue
        lines.append(f"  thread {task.name} {comm}: state {state}, wchan {wchan or '-'}")
    debugger = shutil.which("gdb") or shutil.which("cuda-gdb")
    if argv and argv[0].endswith(b"gpufilter") and debugger:
        try:
            gdb = subprocess.run([debugger, "-batch", "-p", str(pid), "-ex", "thread apply all bt"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
            lines.append(gdb.stdout.decode(errors="replace"))
        except subprocess.TimeoutExpired:
            lines.append("  (gdb did not answer in 60 s)")
    return "\n".join(lines) + "\n"


def format_sanitizer_summary(tool, summary):
    """The closing line of a --sanitizer run, in the tool's own words."""
    line = f"compute-sanitizer {tool}: {summary['processes']} gpufilter processes checked, "
    if "hazards" in summary or tool == "racecheck":
        return line + (f"{summary['kind'] or 'RACECHECK'} SUMMARY: {summary.get('hazards', 0)} "
                       f"hazards ({summary['errors']} errors, {summary.get('warnings', 0)} warnings)")
    return line + f"{summary['kind'] or 'ERROR'} SUMMARY: {summary['errors']} errors"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    tool = config.getoption("--sanitizer")
    folder = os.environ.get("GPUFILTER_SANITIZER_LOGS")
    if tool and folder and getattr(config, "workerinput", None) is None:
        terminalreporter.write_line(f"{sanitizer_report(tool, folder)} (logs in {folder})")
    if exitstatus != 0:
        terminalreporter.write_line(
            f"gpufilter: inputs came from GPUFILTER_TEST_SEED={config._gpufilter_seed}")


# Under a sanitizer a test on a photo-sized image takes minutes where most
# take seconds; started last, one of them is the whole tail of a part. So
# they are started first (their durations are in durations.tsv).
SLOW_UNDER_SANITIZER = ("photo", "big")


def slow_under_sanitizer(test_name):
    return any(word in test_name.split("[")[0] for word in SLOW_UNDER_SANITIZER)


@pytest.hookimpl(tryfirst=True)  # before -k / -m, so a case keeps its place
def pytest_collection_modifyitems(config, items):
    if grid_mode(config) == "reduced":
        # Keep every k-th case of each test function marked reduce(k), in
        # collection order: a deterministic covering subset of the grid (the
        # same on every pytest-xdist worker).
        keep, drop, seen = [], [], {}
        for item in items:
            mark = item.get_closest_marker("reduce")
            if mark is None:
                keep.append(item)
                continue
            key = (item.nodeid.split("[")[0])
            index = seen.get(key, 0)
            seen[key] = index + 1
            (keep if index % int(mark.args[0]) == 0 else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    part = config.getoption("--part")
    if part:
        try:
            index, count = (int(v) for v in part.split("/"))
            assert 0 <= index < count
        except (ValueError, AssertionError):
            raise pytest.UsageError(f"--part {part!r} is not I/N with 0 <= I < N")
        drop = [item for i, item in enumerate(items) if i % count != index]
        config.hook.pytest_deselected(items=drop)
        items[:] = [item for i, item in enumerate(items) if i % count == index]
    if config.getoption("--sanitizer"):
        items.sort(key=lambda item: not slow_under_sanitizer(item.name))
    if config.getoption("--backend") == "cuda":
        return
    skip = pytest.mark.skip(reason="needs --backend cuda")
    for item in items:
        if "cuda_only" in item.keywords:
            item.add_marker(skip)


# ---------------------------------------------------------------------------
# running the binary


class Result:
    def __init__(self, args, proc):
        self.args = args
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr.decode("utf-8", "replace")

    @property
    def err_lines(self):
        return [line for line in self.err.splitlines() if line.strip()]

    def describe(self):
        return (f"$ {' '.join(str(a) for a in self.args)}\n"
                f"exit {self.rc}\nstderr: {self.err!r}\nstdout: {len(self.out)} bytes")

    def ok(self):
        assert self.rc == 0, "gpufilter failed\n" + self.describe()
        return self


def _runs_on_cpu(argv, default_backend):
    """Whether a run of the binary stays off the GPU (--backend cpu)."""
    backend = default_backend
    for i, a in enumerate(argv):
        if a == "--backend" and i + 1 < len(argv):
            backend = argv[i + 1]
        elif a.startswith("--backend="):
            backend = a.split("=", 1)[1]
    return backend == "cpu"


@contextlib.contextmanager
def gpu_turn(folder, alone):
    """Checked runs of all workers share the GPU; a run that must be alone
    waits for those in flight and holds back new ones. Two flock()s on files
    in the logs folder: 'gate', held briefly by every run on its way in and
    for the whole run by one that must be alone (so it is not starved), and
    'gpu', shared by ordinary runs and exclusive for one alone. Closing the
    files releases whatever is still held."""
    with open(Path(folder) / ".gate.lock", "a") as gate, open(Path(folder) / ".gpu.lock", "a") as gpu:
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(gpu, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        yield


class Gpufilter:
    """Runs the binary: gf.run(*args) returns a Result; gf.filter(...) runs
    one job on the backend under test and asserts success."""

    def __init__(self, path, backend, sanitizer=None):
        self.path = path
        self.backend = backend
        self.sanitizer = sanitizer

    def env(self, extra=None):
        env = dict(os.environ)
        env.pop("GPUFILTER_MASKS", None)  # hermetic: only the built-in masks
        if extra:
            env.update({k: str(v) for k, v in extra.items()})
        return env

    def run(self, *args, stdin=None, env=None, cwd=None, timeout=180):
        if not self.path.exists():
            pytest.fail(f"gpufilter binary not found at {self.path} "
                        "(build it with make, or pass --gpufilter / set GPUFILTER_BIN)")
        argv = [str(self.path)] + [str(a) for a in args]
        timeout *= 5 if self.sanitizer else 1
        if self.sanitizer and not _runs_on_cpu(argv, self.backend):
            proc = self._run_sanitized(argv, stdin, env, cwd, timeout)
        else:
            proc = subprocess.run(argv, input=stdin, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, env=self.env(env), cwd=cwd,
                                  timeout=timeout)
        return Result(argv, proc)

    def _run_sanitized(self, argv, stdin, env, cwd, timeout):
        """Runs argv under compute-sanitizer: fails the test on a report,
        else returns the finished process with gpufilter's own exit status.
        A run where the tool fails internally is repeated: first beside the
        other checked runs (SHARED_REPEATS times), then once with the GPU to
        itself; an internal error then fails the test. The shared repeats
        come first because a run alone waits for every run in flight, and
        under racecheck one of those may take minutes."""
        folder = Path(os.environ["GPUFILTER_SANITIZER_LOGS"])
        for attempt in range(SHARED_REPEATS + 2):
            alone = attempt > SHARED_REPEATS
            proc, recorded, run_id = self._sanitized_attempt(folder, argv, stdin, env, cwd,
                                                             min(timeout, SANITIZER_HANG_S), alone)
            files = sorted(folder.glob(f"{run_id}-*.log"))
            if proc is None and alone:
                pytest.fail(f"compute-sanitizer {self.sanitizer}: the run hung every time "
                            f"({SANITIZER_HANG_S:.0f} s each)\n$ {shlex.join(argv)}\n"
                            f"{(folder / f'{run_id}.hang').read_text()}", pytrace=False)
            if proc is None:
                for log in files:
                    log.rename(log.with_suffix(".hung"))
                continue
            logs = "".join(log.read_text(errors="replace") for log in files)
            if alone or INTERNAL_ERROR not in logs:
                break
            for log in files:
                log.rename(log.with_suffix(".internal"))
        # a report: the tool's error status (unless gpufilter's own), or
        # errors counted in this run's log, whatever the tool's status
        if ((proc.returncode == SANITIZER_REPORT_EXIT and recorded != str(SANITIZER_REPORT_EXIT))
                or sanitizer_summary(folder, f"{run_id}-*.log")["errors"]
                or INTERNAL_ERROR in logs):
            pytest.fail(f"compute-sanitizer {self.sanitizer} reported errors "
                        f"(exit {proc.returncode})\n{Result(argv, proc).describe()}\n{logs}",
                        pytrace=False)
        if recorded:
            # the shell reports a death by signal N as 128 + N; subprocess as -N
            status = int(recorded)
            proc.returncode = 128 - status if status > 128 else status
        # else the shell never finished (the tool failed): keep the tool's status
        return proc

    def _sanitized_attempt(self, folder, argv, stdin, env, cwd, timeout, alone):
        """One run under the tool; returns (process, gpufilter's status as
        the shell recorded it, the run's id: its logs are {id}-PID.log).
        A run that does not end within timeout seconds is hung: {id}.hang
        describes its processes, which are then killed; the process
        returned is None."""
        fd, status_file = tempfile.mkstemp(dir=folder, suffix=".status")
        os.close(fd)
        run_id = Path(status_file).stem
        # compute-sanitizer's exit status is not gpufilter's: with
        # --require-cuda-init no it is 0 when the program ends before
        # initialising CUDA (a usage error exits 2). So the tool starts a shell
        # that runs gpufilter, writes gpufilter's status to status_file ($0)
        # and exits with it; --target-processes all makes the tool check
        # gpufilter, the shell's child, and not the shell alone.
        # --require-cuda-init no: runs that end before touching the GPU
        # (usage errors, --help) are not reports.
        wrapper = ["compute-sanitizer", "--tool", self.sanitizer,
                   "--error-exitcode", str(SANITIZER_REPORT_EXIT), "--require-cuda-init", "no",
                   "--target-processes", "all", "--log-file", str(folder / f"{run_id}-%p.log")]
        if env and "GPUFILTER_TEST_FAULT" in env:
            # the failure is injected on purpose; the tool would report it as an API error
            wrapper += ["--report-api-errors", "no"]
        shell = ["sh", "-c", '"$@"; rc=$?; echo $rc > "$0"; exit $rc', status_file]
        # which test and command: in {id}.running while the run is in flight
        # (what is left of them says what a time limit cut), then one line of
        # durations.tsv (the slowest runs under this tool, for planning)
        what = f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}\t{shlex.join(argv)}"
        running = folder / f"{run_id}.running"
        running.write_text(what + "\n")
        started = time.monotonic()
        try:
            with gpu_turn(folder, alone):
                proc = self._run_or_describe_hang(wrapper + shell + argv, stdin, env, cwd,
                                                  timeout, folder / f"{run_id}.hang", what)
            recorded = Path(status_file).read_text().strip()
        finally:
            os.unlink(status_file)
            running.unlink()
        with open(folder / "durations.tsv", "a") as durations:
            hung = " (hung, killed)" if proc is None else ""
            durations.write(f"{time.monotonic() - started:.1f}\t{what}{hung}\n")
        return proc, recorded, run_id

    def _run_or_describe_hang(self, command, stdin, env, cwd, timeout, hang_file, what):
        """subprocess.run in a session of its own; past timeout, the
        session's processes are described into hang_file and killed, and
        None is returned."""
        with subprocess.Popen(command, stdin=None if stdin is None else subprocess.PIPE,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=self.env(env), cwd=cwd,
                              start_new_session=True) as proc:
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                tree = process_tree(proc.pid)
                hang_file.write_text(f"hung after {timeout:.0f} s: {what}\n" +
                                     "".join(describe_process(pid) for pid in tree))
                # the session, and each process of the tree in case one left it
                os.killpg(proc.pid, signal.SIGKILL)
                for pid in tree:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                proc.communicate()
                return None
        return subprocess.CompletedProcess(command, proc.returncode, out, err)

    def filter(self, src, dst, masks=(), border=None, backend=None, extra=(), **kw):
        args = ["--backend", backend or self.backend]
        for m in masks:
            args += ["-m", m]
        if border is not None:
            args += ["-b", border]
        args += list(extra) + [src, dst]
        return self.run(*args, **kw).ok()

    def apply(self, tmp_path, img, masks=(), border=None, backend=None, extra=(), tag="x"):
        """Write img to a PNG, filter it, return the decoded output."""
        src = gftest.write_png(tmp_path / f"in-{tag}.png", img)
        dst = tmp_path / f"out-{tag}-{backend or self.backend}.png"
        self.filter(src, dst, masks, border, backend, extra)
        return gftest.read_png(dst)


@pytest.fixture(scope="session")
def backend(pytestconfig):
    return pytestconfig.getoption("--backend")


@pytest.fixture(scope="session")
def gf(pytestconfig, backend):
    return Gpufilter(_binary_path(pytestconfig), backend, pytestconfig.getoption("--sanitizer"))


@pytest.fixture(scope="session")
def gpu_usable(gf):
    """Whether `gpufilter --list-devices` finds a usable GPU (exit 0)."""
    r = gf.run("--list-devices")
    assert r.rc in (0, 1), "--list-devices must exit 0 or 1\n" + r.describe()
    return r.rc == 0


@pytest.fixture
def rng(request):
    """A generator seeded from the run's seed and the test's id, so one test
    reproduces alone (GPUFILTER_TEST_SEED) and under pytest-xdist."""
    seed = request.config._gpufilter_seed
    stream = zlib.crc32(stable_nodeid(request.node.nodeid).encode())
    print(f"GPUFILTER_TEST_SEED={seed} (test stream {stream})")
    return member_rng(seed, request.node.nodeid)


@pytest.fixture
def check_cuda_matches_cpu(gf, backend):
    """With --backend cuda: run the same job on the CPU backend too and
    compare; with --backend cpu: nothing to do."""

    def check(tmp_path, img, got, masks=(), border=None, extra=(), tag="x", ties=None):
        if backend != "cuda":
            return
        ref = gf.apply(tmp_path, img, masks, border, backend="cpu", extra=extra,
                       tag=tag + "-cpuref")
        gftest.assert_close(got, ref, what="cuda vs cpu backend", ties=ties)

    return check
