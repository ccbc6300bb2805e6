"""Faults while writing: a full disk and an interrupt leave no partial file,
the input untouched, and one clear message."""

import os
import resource
import signal
import subprocess
import time

import numpy as np

from gftest import photo_with_channels, random_image, write_png
from test_cli import check_error


def leftovers(folder, keep):
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def test_full_disk(gf, rng, tmp_path):
    """The output cannot be written past 64 KiB (RLIMIT_FSIZE, as a full disk
    would): exit 1, a message naming the output, no file, no temporary."""
    img = random_image(rng, 300, 200, 3)  # noise: the PNG is ~180 KiB
    src = write_png(tmp_path / "in.png", img)
    before = src.read_bytes()
    out = tmp_path / "out.png"

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write then fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    argv = [str(gf.path), "--backend", gf.backend, "-m", "box3", str(src), str(out)]
    proc = subprocess.run(argv, capture_output=True, preexec_fn=limit_file_size, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpufilter: ") and str(out) in lines[0], lines
    assert leftovers(tmp_path, {"in.png"}) == []
    assert src.read_bytes() == before


def test_full_disk_keeps_the_old_output(gf, rng, tmp_path):
    img = random_image(rng, 300, 200, 3)
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    out.write_bytes(b"the previous result")

    def limit_file_size():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))

    argv = [str(gf.path), "--backend", gf.backend, "-m", "box3", str(src), str(out)]
    proc = subprocess.run(argv, capture_output=True, preexec_fn=limit_file_size, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert out.read_bytes() == b"the previous result"
    assert leftovers(tmp_path, {"in.png", "out.png"}) == []


def test_output_is_a_directory(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 8, 8, 3))
    out = tmp_path / "out.png"
    out.mkdir()
    r = gf.run("--backend", gf.backend, "-m", "box3", src, out)
    check_error(r, 1, [str(out)])
    assert out.is_dir() and list(out.iterdir()) == []
    assert leftovers(tmp_path, {"in.png", "out.png"}) == []


def test_interrupt_leaves_no_partial_file(gf, rng, tmp_path):
    """SIGINT while a large output is being encoded and written: the process
    ends by the signal and neither the output nor a temporary file remains."""
    from PIL import Image
    photo = Image.fromarray(photo_with_channels(rng, 4))
    src = tmp_path / "in.tga"
    # TGA: fast to decode, so the time goes to the PNG encode: a smooth
    # 3072^2 RGBA at --png-level 12 on one core (the encoder's threads
    # share it) takes seconds on any machine
    photo.resize((3072, 3072), Image.BILINEAR).save(src)
    out = tmp_path / "out.png"
    one_core = {min(os.sched_getaffinity(0))}
    proc = subprocess.Popen([str(gf.path), "--backend", gf.backend, "-m", "box3", "--png-level", "12",
                             str(src), str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.sched_setaffinity(0, one_core))
    time.sleep(0.5)  # decoded and filtered by now; the PNG encode takes seconds
    assert proc.poll() is None, "finished too soon to be interrupted"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGINT, proc.stderr.read()
    assert leftovers(tmp_path, {"in.tga"}) == []


def fsync_calls(gf, argv):
    """The fsync and fdatasync calls of one run, counted by strace."""
    import shutil
    import pytest
    if not shutil.which("strace"):
        pytest.skip("strace is not installed")
    # LeakSanitizer cannot run under ptrace (the sanitizer build)
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    proc = subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync", str(gf.path)] + argv,
                          capture_output=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return sum(1 for line in proc.stderr.decode().splitlines() if "fsync(" in line or "fdatasync(" in line)


def test_only_a_replacement_is_synced(gf, rng, tmp_path):
    """A new output is not synced (it replaces nothing, as cp does); one that
    replaces a file is synced once before the rename, so that a crash of
    the system cannot leave an empty file where the old one was."""
    src = write_png(tmp_path / "in.png", random_image(rng, 40, 30, 3))
    out = tmp_path / "out.png"
    argv = ["--backend", gf.backend, "-m", "box3", str(src), str(out)]
    assert fsync_calls(gf, argv) == 0 and out.exists()
    assert fsync_calls(gf, argv) == 1
    assert fsync_calls(gf, ["--backend", gf.backend, "-m", "box3", "-o", str(tmp_path / "d"), str(src)]) == 0
    assert fsync_calls(gf, ["--backend", gf.backend, "-m", "box3", "-o", str(tmp_path / "d"), str(src)]) == 1
