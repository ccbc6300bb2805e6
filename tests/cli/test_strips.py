"""Images over the GPU memory budget are processed in horizontal strips
(--gpu-memory caps the budget, so a small image takes the same path as one
larger than the device): results equal the CPU backend's, every border mode
reads the right halo rows, histograms and statistics are accumulated over
the strips. Device faults (no memory at all, a failing launch) end with one
clear message, exit 1 and no output."""

import pytest

import gftest
from gftest import random_image, write_png
from test_cli import check_error

pytestmark = pytest.mark.cuda_only

BORDERS = ["nearest", "constant", "reflect", "mirror", "wrap"]
# 300 x 211 RGBA is 253,200 bytes; 40K of GPU memory holds two buffers of
# 17 rows (1,200 bytes each), so a 7-row mask leaves bands of 11 rows.
WIDTH, HEIGHT, BUDGET = 300, 211, "40K"

OPS = [
    ["-m", "gaussian7"],
    ["-m", "sobel", "-m", "box9"],
    ["-m", "motion9"],
    ["--equalize"],
    ["--equalize=channels"],
    ["--normalize"],
    ["--auto-level"],
    ["-m", "sharpen", "--equalize", "--auto-level"],
]


def run_both(gf, tmp_path, img, ops, border, budget=BUDGET):
    src = write_png(tmp_path / "in.png", img)
    cpu = tmp_path / "cpu.png"
    cuda = tmp_path / "cuda.png"
    common = ["-b", border] + ops
    gf.run("--backend", "cpu", *common, src, cpu).ok()
    r = gf.run("--backend", "cuda", "-v", "--gpu-memory", budget, *common, src, cuda).ok()
    return gftest.read_png(cpu), gftest.read_png(cuda), r


@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("ops", OPS, ids=lambda o: "".join(o).replace("-", "_"))
def test_strips_match_cpu(gf, rng, tmp_path, ops, border):
    img = random_image(rng, WIDTH, HEIGHT, 4)
    want, got, r = run_both(gf, tmp_path, img, ops, border)
    assert "strips of up to 17 rows" in r.err, r.err
    gftest.assert_equal_image(got, want, what=f"cuda in strips vs cpu, {' '.join(ops)}")


@pytest.mark.parametrize("channels", [1, 2, 3])
def test_strips_other_channel_counts(gf, rng, tmp_path, channels):
    img = random_image(rng, 257, 131, channels)
    want, got, r = run_both(gf, tmp_path, img, ["-m", "gaussian5", "--equalize"], "reflect", "8K")
    assert "strips" in r.err, r.err
    gftest.assert_equal_image(got, want, what="cuda in strips vs cpu")


def test_strips_one_row_image_is_not_stripped_wrongly(gf, rng, tmp_path):
    """Whole image fits: the same answer without strips."""
    img = random_image(rng, 64, 1, 3)
    want, got, r = run_both(gf, tmp_path, img, ["-m", "box5"], "wrap", "1M")
    assert "over the GPU memory budget" not in r.err
    gftest.assert_equal_image(got, want)


def test_strip_statistics_match_cpu(gf, rng, tmp_path):
    img = random_image(rng, WIDTH, HEIGHT, 4)
    src = write_png(tmp_path / "in.png", img)
    cpu = gf.run("--backend", "cpu", "--stats=json", "-m", "box3", src).ok()
    cuda = gf.run("--backend", "cuda", "--gpu-memory", BUDGET, "--stats=json", "-m", "box3",
                  src).ok()
    assert cuda.out == cpu.out and b'"histogram"' in cpu.out


def test_mask_taller_than_a_strip(gf, rng, tmp_path):
    """A 31-row mask cannot run in strips of 17 rows: exit 1, one message
    naming the rows needed and --gpu-memory, no output."""
    mask = tmp_path / "tall.mask"
    mask.write_text("1 31 31\n" + "1\n" * 31)
    src = write_png(tmp_path / "in.png", random_image(rng, WIDTH, HEIGHT, 4))
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "--gpu-memory", BUDGET, "-m", mask, src, out)
    check_error(r, 1, [str(src), "31 rows", "--gpu-memory"])
    assert not out.exists()


def test_too_little_gpu_memory(gf, rng, tmp_path):
    """Not even one row fits: exit 1, the bytes needed, no output."""
    src = write_png(tmp_path / "in.png", random_image(rng, 1000, 4, 4))
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "--gpu-memory", "1K", "-m", "box3", src, out)
    check_error(r, 1, [str(src), "8000 bytes", "--gpu-memory"])
    assert not out.exists()


@pytest.mark.parametrize("fault,words", [
    ("alloc", ["allocating", "out of memory"]),
    ("launch", ["launching conv2d"]),
])
def test_device_faults(gf, rng, tmp_path, fault, words):
    """A real allocation failure (the device asked for more than it has) and
    a real failing launch: exit 1, one message, no output, input unchanged."""
    src = write_png(tmp_path / "in.png", random_image(rng, 64, 48, 3))
    before = src.read_bytes()
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-m", "box3", src, out, env={"GPUFILTER_TEST_FAULT": fault})
    check_error(r, 1, words + [str(src)])
    assert not out.exists() and src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.png"]


def test_device_fault_in_a_batch(gf, rng, tmp_path):
    """In a batch every file fails the same way, each is named, none written."""
    srcs = [write_png(tmp_path / f"in{i}.png", random_image(rng, 32, 32, 3)) for i in range(3)]
    outdir = tmp_path / "out"
    r = gf.run("--backend", "cuda", "--quiet", "-m", "box3", "-o", outdir, *srcs,
               env={"GPUFILTER_TEST_FAULT": "launch"})
    assert r.rc == 1, r.describe()
    for s in srcs:
        assert s.name in r.err
    assert not outdir.exists() or list(outdir.iterdir()) == []


# masks past 31x31 (kernels/conv2d_large.cu) in strips: 150K holds two
# buffers of 64 rows, so a 49-row mask leaves bands of 16 rows
LARGE_OPS = [
    (["-m", "box:20"], 0.0),                        # running sums: the same bytes
    (["-m", "gaussian:8"], 0.001),                  # float sums: at most 0.1% off by one
    (["-m", "unsharp:sigma=6,amount=1.5"], 0.001),
    (["--fft", "always", "-m", "gaussian:8"], 0.002),
]


@pytest.mark.parametrize("border", ["nearest", "reflect", "wrap"])
@pytest.mark.parametrize("ops,fraction", LARGE_OPS, ids=lambda o: "".join(o).replace("-", "_")
                         if isinstance(o, list) else None)
def test_large_masks_in_strips(gf, rng, tmp_path, ops, fraction, border):
    img = random_image(rng, WIDTH, HEIGHT, 4)
    want, got, r = run_both(gf, tmp_path, img, ops, border, "150K")
    assert "strips of up to 64 rows" in r.err, r.err
    gftest.assert_close(got, want, what=f"cuda in strips vs cpu, {' '.join(ops)}", fraction=fraction)
