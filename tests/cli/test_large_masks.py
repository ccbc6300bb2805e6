"""Masks past 31x31 and the parametric masks, against the float64 oracle
(gftest.correlate: scipy.ndimage semantics), on awkward sizes. With
--backend cuda every result is also compared with --backend cpu."""

import math
import re

import numpy as np
import pytest

from gftest import (BORDERS, Mask, Matrix, _unrounded, apply_mask, as3d, assert_close,
                    assert_equal_image, correlate, format_matrix, random_image, rounding_ties)

U = 2.0**-24


def ties_within(img, mask, border, terms):
    """Where a float evaluation summing `terms` products may round to the
    other side of k + 1/2: the recursive-summation bound terms * u * size,
    size = sum |w x| / |scale| + |offset| + 1 (gftest.float_ties's, with
    the number of terms a separable or box method adds)."""
    m = mask.matrices[0]
    size = Mask([Matrix(np.abs(m.weights), abs(m.scale), abs(m.offset) + 1.0)])
    sizes, _ = _unrounded(img, size, border, False)
    return rounding_ties(img, mask, border, within=(terms + 8) * U * sizes)


def separable_values(img, column, row, scale, offset, border):
    """The exact values (float64 H x W x C) of the mask column x row / scale
    + offset: a row pass then a column pass, equal to the 2-D correlation
    (the border commutes with a pass along the other axis) and cheap for
    the largest masks, where the 2-D oracle runs out of memory."""
    img = as3d(img).astype(np.float64)
    filtered = img.shape[2] if img.shape[2] in (1, 3) else img.shape[2] - 1  # alpha passes
    out = np.empty(img.shape[:2] + (filtered,))
    for c in range(filtered):
        rows = correlate(img[:, :, c], np.asarray(row, np.float64)[None, :], border)
        out[:, :, c] = correlate(rows, np.asarray(column, np.float64)[:, None], border) / scale + offset
    return out


def rounded(img, values):
    out = as3d(img).copy()
    out[:, :, :values.shape[2]] = np.clip(np.rint(values), 0, 255).astype(np.uint8)
    return out


def write_mask(tmp_path, name, text):
    path = tmp_path / f"{name}.mask"
    path.write_text(text)
    return str(path)


def check(gf, tmp_path, check_cuda_matches_cpu, img, spec, want, border, ties=None, tag="x",
          extra=()):
    got = gf.apply(tmp_path, img, [spec], border, extra=extra, tag=tag)
    assert got.shape == as3d(img).shape
    check_cuda_matches_cpu(tmp_path, img, got, [spec], border, extra=extra, tag=tag, ties=ties)
    assert_close(got, want, what=f"{spec} border={border} vs oracle", ties=ties)
    return got


# ---------------------------------------------------------------------------
# mask files of any size

# (shape W x H, kind, image W x H, channels): every kind runs a different
# GPU method (random: direct; outer: separable; box: running sums)
LARGE_CASES = [
    ("33x33", "random", (70, 41), 1),
    ("40x34", "random", (9, 5), 4),        # even sizes, mask larger than the image
    ("63x1", "outer", (257, 3), 3),
    ("1x63", "outer", (5, 131), 2),
    ("101x3", "outer", (64, 64), 4),
    ("48x47", "integer", (53, 29), 3),
    ("45x39", "int-outer", (60, 33), 3),   # integer column x row: the CPU's exact passes
    ("65x65", "box", (7, 5), 1),           # larger than the image: several periods
    ("255x255", "box", (300, 40), 4),
    ("32x96", "box", (41, 200), 2),
    ("96x31", "box", (1000, 60), 1),       # whole-word loads, even scale: halves round to even
    ("129x65", "box", (517, 70), 4),       # the width no multiple of 4: a pixel's loads
    ("75x75", "box", (400, 50), 3),        # three words for four RGB pixels
    ("64x64", "box", (256, 48), 4),        # even scale on RGBA: halves round to even
    ("41x201", "box", (90, 520), 1),       # GPU: chunks start from band sums (100 rows a band)
    ("9x164", "box", (33, 700), 3),        # bands of 81 rows and one row past them, even height
    ("41x37", "box-scaled", (300, 50), 4),  # weight 2, scale, offset: finished in double
]


def large_mask_text(rng, shape, kind):
    w, h = (int(v) for v in shape.split("x"))
    if kind == "random":
        wt = rng.random((h, w)) - 0.3
        return format_matrix(wt / wt.sum(), scale=1, offset=2)
    if kind == "integer":
        return format_matrix(rng.integers(-3, 4, (h, w)).astype(float), scale=int(w * h / 4),
                             offset=128)
    if kind == "int-outer":
        column, row = rng.integers(1, 4, h), rng.integers(-2, 4, w)
        return format_matrix(np.outer(column, row).astype(float), scale=int(column.sum() * 4))
    if kind == "outer":
        column, row = rng.random(h) + 0.1, rng.random(w) - 0.2
        return format_matrix(np.outer(column, row) / (column.sum() * row.sum()), scale=1)
    if kind == "box-scaled":  # w x h odd: 2 sum / (3 w h) is never k + 1/2
        return format_matrix(np.full((h, w), 2.0), scale=3 * w * h, offset=5)
    return format_matrix(np.ones((h, w)), scale=w * h)


@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("shape,kind,size,channels", LARGE_CASES,
                         ids=[f"{c[0]}-{c[1]}-c{c[3]}" for c in LARGE_CASES])
def test_large_mask_file(gf, rng, tmp_path, check_cuda_matches_cpu, shape, kind, size, channels,
                         border):
    from gftest import parse_mask
    text = large_mask_text(rng, shape, kind)
    mask = parse_mask(text)
    img = random_image(rng, size[0], size[1], channels)
    if kind.startswith("box"):  # exact integer sums: the same bytes everywhere
        m = mask.matrices[0]
        want = rounded(img, separable_values(img, np.ones(mask.height), m.weights[0, 0] * np.ones(mask.width),
                                             m.scale, m.offset, border))
        ties = None
    else:
        want = apply_mask(img, mask, border)
        terms = mask.matrices[0].weights.size if kind in ("random", "outer") else 0
        ties = ties_within(img, mask, border, terms) if terms else None
    check(gf, tmp_path, check_cuda_matches_cpu, img, write_mask(tmp_path, kind, text), want,
          border, ties)


# the FFT's float error on these sizes stays far below this (its bound grows
# with log n, not with the taps); values this close to k + 1/2 may round
# either way
FFT_WITHIN = 0.01


@pytest.mark.reduce(4)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("shape,kind,size,channels", [c for c in LARGE_CASES if c[1] != "box"],
                         ids=[f"{c[0]}-{c[1]}-c{c[3]}" for c in LARGE_CASES if c[1] != "box"])
def test_large_mask_fft(gf, rng, tmp_path, check_cuda_matches_cpu, shape, kind, size, channels,
                        border):
    """--fft always: the same masks through cuFFT (on the CPU backend the
    option changes nothing)."""
    from gftest import parse_mask
    text = large_mask_text(rng, shape, kind)
    mask = parse_mask(text)
    img = random_image(rng, size[0], size[1], channels)
    check(gf, tmp_path, check_cuda_matches_cpu, img, write_mask(tmp_path, kind, text),
          apply_mask(img, mask, border), border, rounding_ties(img, mask, border, within=FFT_WITHIN),
          extra=["--fft", "always"])


def magnitude_mask_text(rng, w, h):
    a = rng.integers(-2, 3, (h, w)).astype(float)
    b = rng.integers(-2, 3, (h, w)).astype(float)
    return "combine magnitude\n" + format_matrix(a, scale=64) + format_matrix(b, scale=64)


@pytest.mark.parametrize("fft", [False, True], ids=["direct", "fft"])
def test_large_mask_several_matrices(gf, rng, tmp_path, check_cuda_matches_cpu, fft):
    """Two matrices and a magnitude: the combine of the direct and fft methods."""
    from gftest import parse_mask
    text = magnitude_mask_text(rng, 35, 33)
    mask = parse_mask(text)
    img = random_image(rng, 61, 44, 4)
    check(gf, tmp_path, check_cuda_matches_cpu, img, write_mask(tmp_path, "mag", text),
          apply_mask(img, mask, "wrap"), "wrap",
          rounding_ties(img, mask, "wrap", within=FFT_WITHIN if fft else 1e-3),
          extra=["--fft", "always" if fft else "never"])


def test_fft_gaussian(gf, rng, tmp_path, check_cuda_matches_cpu):
    """--fft always with a gaussian (which runs separable on its own)."""
    img = random_image(rng, 61, 44, 4)
    g = gaussian_taps(9.0)
    values = separable_values(img, g, g, 1.0, 0.0, "nearest")
    ties = np.zeros(as3d(img).shape, bool)
    ties[:, :, :values.shape[2]] = np.abs(values - np.floor(values) - 0.5) < FFT_WITHIN
    check(gf, tmp_path, check_cuda_matches_cpu, img, "gaussian:9", rounded(img, values), "nearest",
          ties, extra=["--fft", "always"])


def test_fft_option_checked(gf, rng, tmp_path):
    from gftest import write_png
    src = tmp_path / "in.png"
    write_png(src, random_image(rng, 4, 4, 1))
    r = gf.run("--fft", "sometimes", "-m", "box3", str(src), str(tmp_path / "out.png"))
    assert r.rc == 2 and "--fft takes auto, always or never" in r.err, r.describe()


def test_mask_size_limits(gf, tmp_path):
    """Width and height up to 4095; past them the message says so."""
    from gftest import parse_mask
    text = format_matrix(np.ones((1, 4095)), scale=4095)
    img = random_image(np.random.default_rng(1), 6, 4, 1)
    got = gf.apply(tmp_path, img, [write_mask(tmp_path, "wide", text)], "nearest")
    mask = parse_mask(text)
    assert_close(got, apply_mask(img, mask, "nearest"), what="1x4095 box",
                 ties=rounding_ties(img, mask, "nearest", within=1e-9))
    too_wide = write_mask(tmp_path, "too", "4096 1\n" + " ".join(["1"] * 4096) + "\n")
    r = gf.run("-m", too_wide, str(tmp_path / "in-x.png"), str(tmp_path / "o.png"))
    assert r.rc == 2 and "1 to 4095" in r.err, r.describe()


# ---------------------------------------------------------------------------
# parametric masks


def gaussian_taps(sigma, radius=None):
    radius = max(1, math.ceil(3 * sigma)) if radius is None else radius
    i = np.arange(-radius, radius + 1, dtype=np.float64)
    g = np.exp(-i * i / (2 * sigma * sigma))
    return g / g.sum()


def gaussian_mask(sigma, radius=None):
    g = gaussian_taps(sigma, radius)
    return Mask([Matrix(np.outer(g, g))])


@pytest.mark.reduce(2)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("sigma,size,channels", [(0.8, (31, 17), 1), (6, (80, 45), 3),
                                                 (12.5, (19, 101), 4), (40, (90, 60), 2)])
def test_gaussian_sigma(gf, rng, tmp_path, check_cuda_matches_cpu, sigma, size, channels, border):
    """gaussian:sigma=S: exp(-x^2/2S^2) on -ceil(3S)..ceil(3S), sum 1, column x row."""
    g = gaussian_taps(sigma)
    img = random_image(rng, size[0], size[1], channels)
    values = separable_values(img, g, g, 1.0, 0.0, border)
    # float sums of 2 x taps terms (the GPU's two passes) or double ones in
    # another order (the CPU's): either side of a tie within that error
    terms = 2 * g.size if g.size > 31 else g.size * g.size
    sizes = separable_values(img, g, g, 1.0, 1.0, border)
    ties = np.zeros(as3d(img).shape, bool)
    ties[:, :, :values.shape[2]] = np.abs(values - np.floor(values) - 0.5) < (terms + 8) * U * sizes
    check(gf, tmp_path, check_cuda_matches_cpu, img, f"gaussian:sigma={sigma}",
          rounded(img, values), border, ties)


def test_gaussian_radius_and_positional(gf, rng, tmp_path, check_cuda_matches_cpu):
    mask = gaussian_mask(5.0, radius=40)
    img = random_image(rng, 70, 33, 3)
    ties = ties_within(img, mask, "mirror", mask.width + mask.height)
    want = apply_mask(img, mask, "mirror")
    check(gf, tmp_path, check_cuda_matches_cpu, img, "gaussian:sigma=5,radius=40", want, "mirror",
          ties, tag="keyed")
    check(gf, tmp_path, check_cuda_matches_cpu, img, "gaussian:5,40", want, "mirror", ties,
          tag="positional")


@pytest.mark.reduce(2)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("radius", [0, 2, 20, 70])
def test_box_radius(gf, rng, tmp_path, check_cuda_matches_cpu, radius, border):
    """box:R: the mean of (2R+1)^2 pixels, exactly (integer sums)."""
    n = 2 * radius + 1
    img = random_image(rng, 61, 37, 4)
    # (2r+1)^2 is odd: a mean of integers is never k + 1/2, so no ties
    want = rounded(img, separable_values(img, np.ones(n), np.ones(n), n * n, 0.0, border))
    check(gf, tmp_path, check_cuda_matches_cpu, img, f"box:radius={radius}", want, border)


def unsharp_oracle(img, sigma, amount, threshold, border):
    """The expected bytes; the values at rounding ties (within the float
    error of the GPU's separable blur, scaled by 1 + amount); and those whose
    |s - blur| lies within that error of the threshold, where either side
    of the test is right."""
    img = as3d(img)
    blur, filtered = _unrounded(img, gaussian_mask(sigma), border, False)
    s = img[:, :, :filtered].astype(np.float64)
    d = s - blur
    v = np.where(np.abs(d) >= threshold, s + amount * d, s)
    out = img.copy()
    out[:, :, :filtered] = np.clip(np.rint(v), 0, 255).astype(np.uint8)
    terms = 2 * (2 * max(1, math.ceil(3 * sigma)) + 1)
    bound = (1 + amount) * (terms + 8) * U * 256 + 1e-9
    ties = np.zeros(img.shape, bool)
    ties[:, :, :filtered] = np.abs(v - np.floor(v) - 0.5) < bound
    either = np.zeros(img.shape, bool)
    either[:, :, :filtered] = np.abs(np.abs(d) - threshold) < bound
    return out, ties, either


@pytest.mark.parametrize("border", ["nearest", "reflect", "constant"])
@pytest.mark.parametrize("spec,params", [
    ("unsharp:sigma=2,amount=1.5,threshold=6", (2, 1.5, 6)),
    ("unsharp:15,0.8,0", (15, 0.8, 0)),
    ("sharpen:sigma=1.2,amount=2", (1.2, 2, 0)),
])
def test_unsharp(gf, backend, rng, tmp_path, spec, params, border):
    """s + amount (s - gaussian(s)) where |s - gaussian(s)| >= threshold, else s."""
    img = random_image(rng, 45, 38, 4)
    want, ties, either = unsharp_oracle(img, *params, border)
    runs = ["cpu", "cuda"] if backend == "cuda" else [backend]
    for run in runs:
        got = gf.apply(tmp_path, img, [spec], border, backend=run, tag=run)
        got[either] = want[either]
        assert_close(got, want, what=f"{spec} border={border} on {run} vs oracle", ties=ties)


def test_bare_sharpen_is_the_file_mask(gf, rng, tmp_path, check_cuda_matches_cpu):
    from gftest import load_mask
    img = random_image(rng, 20, 11, 3)
    check(gf, tmp_path, check_cuda_matches_cpu, img, "sharpen",
          apply_mask(img, load_mask("sharpen"), "nearest"), "nearest")


def test_unsharp_threshold_keeps_flat_areas(gf, rng, tmp_path):
    """A smooth ramp plus one spike: the threshold leaves the ramp exactly as it is."""
    ramp = np.tile(np.linspace(40, 200, 64).round().astype(np.uint8), (32, 1))
    img = ramp.copy()
    img[16, 32] = 250
    got = gf.apply(tmp_path, img, ["unsharp:sigma=1.5,amount=2,threshold=20"], "nearest")[:, :, 0]
    far = np.ones_like(img, bool)
    far[10:23, 26:39] = False
    assert_equal_image(got[far], img[far], what="ramp away from the spike")
    assert got[16, 32] == 255


@pytest.mark.parametrize("border", ["nearest", "wrap"])
def test_log_and_dog(gf, rng, tmp_path, check_cuda_matches_cpu, border):
    img = random_image(rng, 57, 44, 1)
    sigma = 2.5
    r = math.ceil(3 * sigma)
    y, x = np.mgrid[-r:r + 1, -r:r + 1].astype(np.float64)
    r2 = (x * x + y * y) / sigma**2
    g = np.exp(-r2 / 2)
    log = (2 - r2) * g / g.sum()
    log -= log.mean()
    mask = Mask([Matrix(log, 1.0, 100.0)])
    check(gf, tmp_path, check_cuda_matches_cpu, img, f"log:sigma={sigma},offset=100",
          apply_mask(img, mask, border), border, ties_within(img, mask, border, log.size),
          tag="log")
    g1, g2 = gaussian_taps(2.0, 18), gaussian_taps(6.0, 18)
    dog = Mask([Matrix(np.outer(g1, g1) - np.outer(g2, g2), 1.0, 128.0)])
    check(gf, tmp_path, check_cuda_matches_cpu, img, "dog:sigma=2,sigma2=6,offset=128",
          apply_mask(img, dog, border), border, ties_within(img, dog, border, 37 * 37), tag="dog")


def test_list_masks_shows_parametric(gf):
    r = gf.run("--list-masks")
    assert r.rc == 0, r.describe()
    out = r.out.decode()
    for usage in ["gaussian:sigma=1,radius=auto", "box:radius=1",
                  "unsharp:sigma=1,amount=1,threshold=0,radius=auto", "sharpen:sigma=1,amount=1",
                  "log:sigma=1,offset=0", "dog:sigma=1,sigma2=auto,offset=0"]:
        assert usage in out, f"--list-masks lacks {usage}\n{out}"


@pytest.mark.parametrize("channels", [2, 4])
def test_box_filter_alpha(gf, rng, tmp_path, check_cuda_matches_cpu, channels):
    """--filter-alpha: a large box filters the alpha channel too, exactly."""
    img = random_image(rng, 83, 29, channels)
    n = 41
    want = np.empty_like(img)
    for c in range(channels):
        rows = correlate(img[:, :, c].astype(np.float64), np.ones((1, n)), "reflect")
        want[:, :, c] = np.clip(np.rint(correlate(rows, np.ones((n, 1)), "reflect") / (n * n)), 0, 255)
    check(gf, tmp_path, check_cuda_matches_cpu, img, "box:radius=20", want, "reflect",
          extra=("--filter-alpha",))


def box_cascade_widths(sigma, n):
    """Kovesi's widths ("Fast almost-Gaussian filtering", 2010): odd wl and
    wl + 2 around sqrt(12 sigma^2 / n + 1), the first m of them wl."""
    wl = math.floor(math.sqrt(12 * sigma * sigma / n + 1))
    wl -= wl % 2 == 0
    m = math.floor((12 * sigma * sigma - n * wl * wl - 4 * n * wl - 3 * n) / (-4 * wl - 4) + 0.5)
    m = min(max(m, 0), n)
    return [wl] * m + [wl + 2] * (n - m)


@pytest.mark.parametrize("sigma", [0.4, 2, 7.5, 40, 250])
@pytest.mark.parametrize("n", [1, 3, 6])
def test_box_cascade_widths_match_sigma(sigma, n):
    """The cascade's variance sum (w^2 - 1) / 12 is sigma^2 to within what
    odd widths allow: the widths differ by 2 and the count of each is the
    best one."""
    widths = box_cascade_widths(sigma, n)
    assert all(w % 2 == 1 and w >= 1 for w in widths) and max(widths) - min(widths) <= 2
    var = sum((w * w - 1) / 12 for w in widths)
    if sigma >= 5:  # below, one step of 2 in a width moves sigma by more
        assert abs(math.sqrt(var) - sigma) / sigma < 0.05, (widths, math.sqrt(var))
    wl = min(widths)
    others = [sum(((wl if i < m else wl + 2) ** 2 - 1) / 12 for i in range(n)) for m in range(n + 1)]
    assert abs(var - sigma**2) <= min(abs(v - sigma**2) for v in others) + 1e-9


@pytest.mark.reduce(2)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("sigma,n,size", [(2, 3, (45, 31)), (7.5, 4, (61, 37)), (40, 3, (70, 90)),
                                         (1, 1, (9, 5))])
def test_gaussian_boxes(gf, rng, tmp_path, check_cuda_matches_cpu, sigma, n, size, border):
    """gaussian:sigma=S,boxes=N: N box blurs in turn (Kovesi's widths), each
    rounded to 8 bits as a chain of -m box masks, exactly (integer sums; a
    box mean is never k + 1/2)."""
    img = random_image(rng, size[0], size[1], 3)
    want = img
    for w in box_cascade_widths(sigma, n):
        want = rounded(want, separable_values(want, np.ones(w), np.ones(w), w * w, 0.0, border))
    check(gf, tmp_path, check_cuda_matches_cpu, img, f"gaussian:sigma={sigma},boxes={n}", want, border)
    r = gf.run("-v", "--backend", "cpu", "-m", f"gaussian:{sigma},boxes={n}", str(tmp_path / "in-x.png"),
               str(tmp_path / "v.png")).ok()
    shown = [int(m) for m in re.findall(r"box (\d+)x\1, \d of", r.err)]
    assert shown == box_cascade_widths(sigma, n), r.err


def test_gaussian_boxes_in_a_chain(gf, rng, tmp_path, backend):
    """A cascade between other masks runs in its place: the same bytes as
    its boxes written out in the chain."""
    img = random_image(rng, 40, 33, 3)
    radii = [(w - 1) // 2 for w in box_cascade_widths(3, 3)]
    got = gf.apply(tmp_path, img, ["box3", "gaussian:3,boxes=3", "sobel"], "reflect", tag="cascade")
    want = gf.apply(tmp_path, img, ["box3", *[f"box:{r}" for r in radii], "sobel"], "reflect",
                    tag="written")
    assert np.array_equal(got, want)
    assert not np.array_equal(got, gf.apply(tmp_path, img, ["box3", "sobel"], "reflect", tag="none"))


@pytest.mark.parametrize("spec,message", [
    ("gaussian:sigma=0", "sigma must be a number from"),
    ("gaussian:sigma=abc", "sigma must be a number from"),
    ("gaussian:sigma=2,sigma=3", "sigma given twice"),
    ("gaussian:size=3", "gaussian takes sigma, radius"),
    ("gaussian:sigma=2,5,6", "a value without its key"),
    ("box:1,2", "box takes radius"),
    ("box:radius=5000", "radius must be a whole number from 0 to 2047"),
    ("box:2.5", "radius must be a whole number from 0 to 2047"),
    ("gaussian:2,radius=7.5", "radius must be a whole number"),
    ("gaussian:5,boxes=7", "boxes must be a whole number from 0 to 6"),
    ("gaussian:sigma=5,radius=9,boxes=3", "radius and boxes exclude each other"),
    ("blur:3", "no parametric mask 'blur'"),
])
def test_parametric_errors(gf, rng, tmp_path, spec, message):
    src = tmp_path / "in.png"
    from gftest import write_png
    write_png(src, random_image(rng, 4, 4, 1))
    r = gf.run("-m", spec, str(src), str(tmp_path / "out.png"))
    assert r.rc == 2, r.describe()
    assert r.err.startswith("gpufilter: ") and message in r.err, r.describe()
    assert not (tmp_path / "out.png").exists()
