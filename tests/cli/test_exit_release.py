"""GPUFILTER_EARLY_EXIT=1: a call that used the GPU ends before the driver
releases its context, a child process holding the device until the call
has exited (exit_release.c). The call's output, standard streams and exit
status stay the call's own; without it, the call exits itself."""

import re

import pytest

from gftest import random_image, read_png, write_png

RELEASE = re.compile(r"^gpufilter: the GPU context's release left to process (\d+)$", re.M)
EARLY = {"GPUFILTER_EARLY_EXIT": "1"}


def no_sanitizer(gf):
    if gf.sanitizer:
        pytest.skip("under compute-sanitizer the call releases its context itself")


def test_a_cpu_call_exits_itself(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 40, 30, 3))
    r = gf.run("-v", "--backend", "cpu", "-m", "sobel", src, tmp_path / "out.png", env=EARLY).ok()
    assert not RELEASE.search(r.err), r.describe()


@pytest.mark.cuda_only
def test_a_gpu_call_exits_itself_by_default(gf, rng, tmp_path):
    no_sanitizer(gf)
    src = write_png(tmp_path / "in.png", random_image(rng, 40, 30, 3))
    r = gf.run("-v", "--backend", "cuda", "-m", "sobel", src, tmp_path / "out.png",
               env={"GPUFILTER_EARLY_EXIT": "0"}).ok()
    assert not RELEASE.search(r.err), r.describe()


@pytest.mark.cuda_only
def test_a_gpu_call_leaves_the_release_to_a_child(gf, rng, tmp_path):
    """The output goes through a pipe (stdout) and is the CPU's; -v names the
    child."""
    no_sanitizer(gf)
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 200, 3))
    gpu = gf.run("-v", "--backend", "cuda", "-f", "png", "-m", "sobel", src, "-", env=EARLY).ok()
    cpu = gf.run("--backend", "cpu", "-f", "png", "-m", "sobel", src, "-").ok()
    (tmp_path / "gpu.png").write_bytes(gpu.out)
    (tmp_path / "cpu.png").write_bytes(cpu.out)
    assert (read_png(tmp_path / "gpu.png") == read_png(tmp_path / "cpu.png")).all()
    found = RELEASE.findall(gpu.err)
    assert len(found) == 1 and int(found[0]) > 0, gpu.describe()


@pytest.mark.cuda_only
def test_a_gpu_batch_keeps_its_failure_status(gf, rng, tmp_path):
    """A batch on the GPU with one corrupt file: the other output written,
    exit 1, and the release still left to the child."""
    no_sanitizer(gf)
    good = write_png(tmp_path / "good.png", random_image(rng, 64, 48, 3))
    bad = tmp_path / "bad.png"
    bad.write_bytes(good.read_bytes()[:100])
    out = tmp_path / "out"
    out.mkdir()
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", out, good, bad, env=EARLY)
    assert r.rc == 1, r.describe()
    assert (out / "good.png").exists() and not (out / "bad.png").exists()
    assert len(RELEASE.findall(r.err)) == 1, r.describe()
