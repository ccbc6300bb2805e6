"""The CPU backends and --backend auto's choice.

The cpu backend (cpu_conv.c: integer sums, 1-D passes, running sums, bands
of rows on threads) must give the reference's bytes on every mask, border
and channel count, whatever the number of threads; the reference is checked
against scipy here too. --backend auto must not load the GPU driver for
small work: a fake libcuda.so.1 records whether it was loaded."""

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gftest
from gftest import random_image, read_png, to_pil, write_png

BORDERS = ["nearest", "constant", "reflect", "mirror", "wrap"]

# name -> mask text: each CPU path (integer, separable with running sums or
# weights, double) and the awkward shapes
CUSTOM_MASKS = {
    "box31": "31 31 961 0\n" + "\n".join(["1 " * 31] * 31) + "\n",
    "box-even": "4 2 8 0\n1 1 1 1\n1 1 1 1\n",
    "row5": "5 1 16 0\n1 4 6 4 1\n",
    "column5": "1 5 16 0\n1\n4\n6\n4\n1\n",
    "separable-signed": "7 3 -3 0.5\n" + "\n".join(["2 -4 6 -8 10 -12 14"] * 3) + "\n",
    "separable-scaled": "3 3 24 3\n2 4 2\n3 6 3\n1 2 1\n",
    "fractional": "3 3 1.5 0\n0.5 1 0.25\n1 2 0.5\n-0.5 1 0.3\n",
    "over-32-bits": "9 9 0.1 3\n" + "\n".join(["1 -2 3 10000000 5 -6 7 8 9"] * 9) + "\n",
    "wide-random": None,  # filled per test: 15x9 random integers
    "max": "combine max\n3 3 1 0\n1 2 1\n0 0 0\n-1 -2 -1\n3 3 2 0\n1 0 -1\n2 0 -2\n1 0 -1\n",
    "min": "combine min\n3 3 1 0\n1 2 1\n0 0 0\n-1 -2 -1\n3 3 2 0\n1 0 -1\n2 0 -2\n1 0 -1\n",
    "sum": "combine sum\n3 3 1.3 0\n1 2 1\n0 0 0\n-1 -2 -1\n3 3 2 7\n1 0 -1\n2 0 -2\n1 0 -1\n",
    "magnitude-scaled": "combine magnitude\n3 3 3 1\n1 0 -1\n2 0 -2\n1 0 -1\n"
                        "3 3 2 -1\n1 2 1\n0 0 0\n-1 -2 -1\n",
}

# (width, height, channels): every channel count, a mask larger than the image
IMAGES = [(53, 41, 1), (37, 29, 2), (61, 47, 3), (45, 33, 4), (5, 3, 3)]


def mask_file(tmp_path, rng, name):
    text = CUSTOM_MASKS[name]
    if text is None:
        weights = rng.integers(-9, 10, size=(9, 15))
        text = "15 9 37 128\n" + "\n".join(" ".join(map(str, r)) for r in weights) + "\n"
    path = tmp_path / f"{name}.mask"
    path.write_text(text)
    return path


def run_backend(gf, backend, src, dst, mask, border, *extra):
    gf.run("--backend", backend, "--force", "-b", border, "-m", mask, *extra, src, dst).ok()
    return read_png(dst)


def check_cpu_equals_reference(gf, tmp_path, rng, mask, extra=()):
    for width, height, channels in IMAGES:
        src = write_png(tmp_path / f"in{channels}-{width}.png",
                        random_image(rng, width, height, channels))
        for border in BORDERS:
            want = run_backend(gf, "reference", src, tmp_path / "ref.png", mask, border, *extra)
            for jobs in ("1", "3"):
                got = run_backend(gf, "cpu", src, tmp_path / "cpu.png", mask, border,
                                  "-j", jobs, *extra)
                assert np.array_equal(got, want), (
                    f"cpu (-j {jobs}) differs from the reference: {mask}, {border}, "
                    f"{width}x{height}x{channels}, {extra}: "
                    f"{np.count_nonzero(got != want)} values")


@pytest.mark.parametrize("name", gftest.builtin_mask_names())
def test_cpu_equals_reference_builtin(gf, tmp_path, rng, name):
    check_cpu_equals_reference(gf, tmp_path, rng, name)


@pytest.mark.parametrize("name", sorted(CUSTOM_MASKS))
def test_cpu_equals_reference_custom(gf, tmp_path, rng, name):
    check_cpu_equals_reference(gf, tmp_path, rng, mask_file(tmp_path, rng, name))


def test_cpu_equals_reference_filtering_alpha(gf, tmp_path, rng):
    check_cpu_equals_reference(gf, tmp_path, rng, "gaussian5", extra=("--filter-alpha",))


def test_cpu_equals_reference_chained(gf, tmp_path, rng):
    """Several operations in a row, on a large enough image for many bands."""
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 211, 3))
    args = ["-m", "sobel", "-m", "gaussian5", "--equalize", "-m", "sharpen"]
    gf.run("--backend", "reference", "--force", *args, src, tmp_path / "ref.png").ok()
    gf.run("--backend", "cpu", "--force", "-j", "5", *args, src, tmp_path / "cpu.png").ok()
    assert np.array_equal(read_png(tmp_path / "cpu.png"), read_png(tmp_path / "ref.png"))


@pytest.mark.parametrize("name", ["gaussian5", "sobel", "emboss"])
def test_reference_against_scipy(gf, tmp_path, rng, name):
    img = random_image(rng, 47, 31, 3)
    src = write_png(tmp_path / "in.png", img)
    for border in BORDERS:
        got = run_backend(gf, "reference", src, tmp_path / "out.png", name, border)
        want = gftest.apply_mask(img, gftest.load_mask(name), border)
        ties = gftest.rounding_ties(img, gftest.load_mask(name), border)
        gftest.assert_close(got, want, what=f"reference {name} {border}", ties=ties)


@pytest.mark.parametrize("name, path", [
    ("gaussian5", "separable integer"), ("box9", "separable integer"),
    ("sobel", "integer"), ("emboss", "integer"),
    ("fractional", "double"), ("over-32-bits", "double"),
])
def test_cpu_path_is_reported(gf, tmp_path, rng, name, path):
    mask = name if name in gftest.builtin_mask_names() else mask_file(tmp_path, rng, name)
    src = write_png(tmp_path / "in.png", random_image(rng, 20, 10, 3))
    r = gf.run("--backend", "cpu", "-v", "--force", "-m", mask, src, tmp_path / "o.png").ok()
    assert re.search(rf"cpu: .*: {path} sums", r.err), r.err


# ---- --backend auto: which backend, and the driver left alone -------------------


FAKE_DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
/* Records that the process loaded the driver; every entry point fails. */
__attribute__((constructor)) static void loaded(void)
{
    const char *log = getenv("FAKE_DRIVER_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    if (f) {
        fputs("loaded\n", f);
        fclose(f);
    }
}
int cuInit(unsigned int flags) { (void)flags; return 100; }
int cuDriverGetVersion(int *version) { *version = 0; return 100; }
int cuGetProcAddress(const char *s, void **p, int v, unsigned long long f) {
    (void)s; (void)v; (void)f; *p = 0; return 500; }
int cuGetProcAddress_v2(const char *s, void **p, int v, unsigned long long f, void *st) {
    (void)s; (void)v; (void)f; (void)st; *p = 0; return 500; }
"""


@pytest.fixture
def fake_driver(tmp_path):
    """Environment that puts a recording libcuda.so.1 first, and its log."""
    folder = tmp_path / "driver"
    folder.mkdir()
    source = folder / "fake.c"
    source.write_text(FAKE_DRIVER)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", folder / "libcuda.so.1", source], check=True)
    log = tmp_path / "driver.log"
    env = {"LD_LIBRARY_PATH": f"{folder}:{os.environ.get('LD_LIBRARY_PATH', '')}",
           "FAKE_DRIVER_LOG": log}
    return env, log


def one_core():
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def run_pinned(gf, env, *args):
    """gpufilter on one core: the estimates then do not depend on the machine."""
    argv = [str(gf.path)] + [str(a) for a in args]
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=gf.env(env), preexec_fn=one_core, timeout=300)
    return proc.returncode, proc.stderr.decode()


def test_fake_driver_is_what_cuda_loads(gf, tmp_path, rng, fake_driver):
    """The check below means something: --backend cuda loads the fake."""
    env, log = fake_driver
    src = write_png(tmp_path / "in.png", random_image(rng, 16, 16, 3))
    rc, err = run_pinned(gf, env, "--backend", "cuda", "-m", "sobel", src, tmp_path / "o.png")
    assert rc == 1 and "no usable GPU" in err, err
    assert log.read_text() == "loaded\n"


@pytest.mark.parametrize("size, mask", [((512, 512), "sobel"), ((1024, 768), "gaussian5"),
                                        ((2000, 1500), "box9")])
def test_small_work_never_loads_the_driver(gf, tmp_path, rng, fake_driver, size, mask):
    env, log = fake_driver
    img = random_image(rng, size[0], size[1], 3)
    src = write_png(tmp_path / "in.png", img)
    rc, err = run_pinned(gf, env, "-v", "-m", mask, src, tmp_path / "o.png")
    assert rc == 0, err
    assert re.search(r"auto: the CPU \(estimates: cpu [0-9.]+ ms on 1 cores; gpu [0-9.]+ ms", err), err
    assert not log.exists(), "the driver was loaded for small work"
    assert "on cpu:" in err


def cpu_estimate(err):
    """The CPU's estimate and the part of its work beside the decode, from -v."""
    m = re.search(r"estimates: cpu ([0-9.]+) ms on 1 cores(?: \(([0-9]+) ms more beside the decode\))?;", err)
    assert m, err
    return float(m.group(1)), float(m.group(2) or 0)


def test_estimate_leaves_out_the_decode_the_cpu_hides(gf, tmp_path, rng, fake_driver):
    """On a JPEG whose first operation is a convolution, the CPU filters
    beside the decode: its estimate is the PNG's less the hidden part. Not
    with --gray (decoded whole) or from a PNG."""
    env, log = fake_driver
    img = random_image(rng, 1000, 800, 3)
    jpg = tmp_path / "in.jpg"
    to_pil(img).save(jpg, quality=90)
    png = write_png(tmp_path / "in.png", img)
    runs = {}
    for name, src, extra in [("jpeg", jpg, []), ("png", png, []), ("gray", jpg, ["--gray"])]:
        rc, err = run_pinned(gf, env, "-v", *extra, "-m", "gaussian:sigma=10", src, tmp_path / "o.png")
        assert rc == 0 and "auto: the CPU" in err, err
        runs[name] = cpu_estimate(err)
    (jpeg_ms, hidden), (png_ms, png_hidden), (_, gray_hidden) = runs["jpeg"], runs["png"], runs["gray"]
    assert hidden > 0 and png_hidden == 0 and gray_hidden == 0, runs
    assert abs(jpeg_ms + hidden - png_ms) <= 1.0, runs
    assert not log.exists()


def gpu_estimate(err):
    """The GPU's estimate and its exit term, from -v."""
    m = re.search(r"; gpu ([0-9.]+) ms = .* \+ exit ([0-9]+) ms\)", err)
    assert m, err
    return float(m.group(1)), float(m.group(2))


def test_estimate_counts_the_exit_unless_a_child_pays_it(gf, tmp_path, rng, fake_driver):
    """The GPU's estimate counts the context's teardown at the exit, and
    leaves it out, by that much, with GPUFILTER_EARLY_EXIT=1."""
    env, log = fake_driver
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 200, 3))
    runs = {}
    for early in ("0", "1"):
        rc, err = run_pinned(gf, {**env, "GPUFILTER_EARLY_EXIT": early}, "-v", "-m", "sobel", src,
                             tmp_path / "o.png")
        assert rc == 0 and "auto: the CPU" in err, err
        runs[early] = gpu_estimate(err)
    (late_ms, late_exit), (early_ms, early_exit) = runs["0"], runs["1"]
    assert late_exit > 0 and early_exit == 0, runs
    assert abs(late_ms - early_ms - late_exit) <= 0.1, runs
    assert not log.exists()


def test_large_work_tries_the_gpu_then_runs_on_the_cpu(gf, tmp_path, rng, fake_driver):
    """Work the model gives to the GPU starts it (beside the decode); with no
    usable GPU the CPU takes the job, and says why under -v."""
    env, log = fake_driver
    weights = rng.uniform(-1, 1, size=(31, 31)).round(3)
    mask = tmp_path / "wide.mask"
    mask.write_text("31 31 1 128\n" + "\n".join(" ".join(map(str, r)) for r in weights) + "\n")
    # ~6 Mpx x 961 double taps: ~0.6 s on one core, against the GPU's ~0.3 s start
    src = write_png(tmp_path / "in.png", random_image(rng, 2400, 2400, 1))
    rc, err = run_pinned(gf, env, "-m", mask, src, tmp_path / "o.png")
    assert rc == 0 and err == "", err  # without -v, not a word
    rc, err = run_pinned(gf, env, "-v", "--force", "-m", mask, src, tmp_path / "o.png")
    assert rc == 0, err
    why = [line for line in err.splitlines() if "running on the CPU" in line]
    assert "auto: the GPU" in err and len(why) == 1 and "no usable GPU" in why[0], err
    assert log.read_text() == "loaded\nloaded\n"
    gf.run("--backend", "cpu", "-m", mask, src, tmp_path / "cpu.png").ok()
    assert np.array_equal(read_png(tmp_path / "o.png"), read_png(tmp_path / "cpu.png"))


def test_backend_names_in_help_and_errors(gf):
    assert "reference" in gf.run("--help").out.decode()
    r = gf.run("--backend", "gpu", "a.png", "b.png")
    assert r.rc == 2 and "auto, cuda, cpu, reference" in r.err
