"""The operations at 16 bits a sample: -m (every border, channel count,
combine and the large-mask paths), --equalize, --normalize, --auto-level
and --stats on 16-bit PNGs, on the reference backend and the one chosen
(--backend cpu: the cpu backend; --backend cuda: the CUDA one).

Oracles are independent of the project: scipy.ndimage.correlate in float64
(gftest.correlate) rounded half to even and clipped to 0..65535;
cv2.cvtColor on uint16 for the YCrCb luminance round trip; numpy for the
equalize, normalize, auto-level and statistics formulas of src/tone.h.
Inputs are written by OpenCV (BGR order; gray+alpha, which OpenCV cannot
write, by pngmaker), outputs read by OpenCV.

The rule, as at 8 bits: the reference and cpu backends equal the oracle
except by one where the exact value lies within 1e-6 of k + 1/2 (their
double sums and scipy's add in other orders); the cpu backend gives the
reference's bytes under that same rule; a float evaluation (CUDA) is
excused by one within its summation bound, (taps + 8) 2^-24 of the sum's
size, as test_large_masks.py allows.

    python3 -m pytest tests/cli/test_depth16_ops.py -q --backend cpu
"""

import json
import math
import zlib

import cv2
import numpy as np
import pytest

from gftest import (BORDERS, Mask, Matrix, _unrounded, as3d, assert_close, assert_equal_image,
                    load_mask, parse_mask, read_deep, rounding_ties)
from pngmaker import png_file

NAMES = {1: ["gray"], 2: ["gray", "alpha"], 3: ["red", "green", "blue"],
         4: ["red", "green", "blue", "alpha"]}
U = 2.0**-24


@pytest.fixture(params=["reference", "chosen"])
def backend16(request, gf):
    """The reference backend, and the one the run chose (--backend)."""
    return "reference" if request.param == "reference" else gf.backend


def n_colour(channels):
    return 1 if channels <= 2 else 3


def random16(rng, width, height, channels):
    """Uniform samples, with runs at 0 and 65535 (the clamps) and a few near them."""
    img = rng.integers(0, 65536, size=(height, width, channels), dtype=np.uint16)
    flat = img.reshape(-1)
    k = max(1, flat.size // 8)
    flat[rng.integers(0, flat.size, k)] = 65535
    flat[rng.integers(0, flat.size, k)] = 0
    flat[rng.integers(0, flat.size, k)] = rng.integers(65500, 65536, k)
    return img


def write16(path, img):
    """A 16-bit PNG of H x W x C samples in RGB(A) order."""
    img = as3d(img)
    c = img.shape[2]
    if c == 2:  # OpenCV writes no gray+alpha: colour type 4 by hand
        rows = b"".join(b"\0" + row.astype(">u2").tobytes() for row in img)
        path.write_bytes(png_file(img.shape[1], img.shape[0], 4, 16, zlib.compress(rows)))
        return path
    bgr = img[:, :, 0] if c == 1 else img[:, :, [2, 1, 0, 3][:c]]
    assert cv2.imwrite(str(path), np.ascontiguousarray(bgr))
    return path


def run16(gf, tmp_path, img, args, backend, tag="x"):
    src = write16(tmp_path / f"in-{tag}.png", img)
    dst = tmp_path / f"out-{tag}-{backend}.png"
    gf.run("--backend", backend, *args, str(src), str(dst)).ok()
    got = read_deep(dst)
    assert got.dtype == np.uint16, f"{args}: the result is {got.dtype}, not 16 bits"
    return got


# ---------------------------------------------------------------------------
# convolution


def expect_conv(img, mask, border):
    """The oracle: exact values, rounded half to even, clipped to 0..65535,
    unsharp's threshold and amount on the 16-bit source; alpha kept."""
    img = as3d(img)
    out = img.copy()
    if mask.combine == "unsharp":
        values, filtered = _unrounded(img, Mask(mask.matrices), border, False)
        s = img[:, :, :filtered].astype(np.float64)
        d = s - values
        values = np.where(np.abs(d) >= mask.threshold, s + mask.amount * d, s)
    else:
        values, filtered = _unrounded(img, mask, border, False)
    out[:, :, :filtered] = np.clip(np.rint(values), 0, 65535).astype(np.uint16)
    return out, values


def ties_for(img, mask, values, backend):
    """Where a backend may round the other way: within 1e-6 of k + 1/2 (every
    backend sums 16-bit samples in double, or exactly in integers)."""
    img = as3d(img)
    ties = np.zeros(img.shape, bool)
    f = values.shape[2]
    ties[:, :, :f] = np.abs(values - np.floor(values) - 0.5) < 1e-6
    return ties


def check_conv(gf, tmp_path, img, spec, mask, border, backend):
    got = run16(gf, tmp_path, img, ["-m", spec, "-b", border], backend)
    check_conv_output(img, got, spec, mask, border, backend)
    return got


def check_conv_output(img, got, spec, mask, border, backend):
    assert got.dtype == np.uint16, f"{spec}: the result is {got.dtype}, not 16 bits"
    want, values = expect_conv(img, mask, border)
    assert_close(got, want, what=f"{spec} border={border} on {backend} vs oracle",
                 fraction=0.0, ties=ties_for(img, mask, values, backend))


def mask_file(tmp_path, name, weights, scale=1.0, offset=0.0):
    h, w = weights.shape
    rows = "\n".join(" ".join(repr(float(v)) for v in row) for row in weights)
    path = tmp_path / f"{name}.mask"
    path.write_text(f"{w} {h} {scale!r} {offset!r}\n{rows}\n")
    return str(path)


def builtin_input(rng, channels, **_):
    return random16(rng, 23, 17, channels)


# a (mask, border) group is one batch run a backend (groups.py)
@pytest.mark.parametrize("name,border", [
    pytest.param(n, b, id=f"{n}-{b}", marks=pytest.mark.batch_group(f"{n}-{b}"))
    for n in ["sobel", "gaussian5", "sharpen", "laplacian", "box3"] for b in BORDERS])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_builtin_masks(gf, groups, request, backend16, name, channels, border):
    member = groups.run(request, builtin_input, ["-m", name, "-b", border],
                        backends=("reference", gf.backend), write=write16)
    check_conv_output(read_deep(member.source), read_deep(member.outputs[backend16]), name,
                      load_mask(name), border, backend16)


@pytest.mark.reduce(2)  # the border turns fastest: each shape and weights keep two or three
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("shape", ["4x2", "2x4", "1x7", "7x1", "6x6", "9x9-larger"])
@pytest.mark.parametrize("weights", ["integer", "fractional"])
def test_mask_files(gf, rng, tmp_path, backend16, shape, weights, border):
    """Odd, even, 1xN, Nx1 masks and one larger than the 5x4 image."""
    w, h = (int(v) for v in shape.split("-")[0].split("x"))
    if weights == "integer":
        wt, scale, offset = rng.integers(-3, 5, (h, w)).astype(float), float(w * h), 100.0
    else:
        wt, scale, offset = rng.random((h, w)) - 0.3, 0.75, -20.5
    img = random16(rng, 5, 4, 3) if "larger" in shape else random16(rng, 19, 13, 4)
    path = mask_file(tmp_path, "m", wt, scale, offset)
    check_conv(gf, tmp_path, img, path, parse_mask(open(path).read()), border, backend16)


STREAM_MASKS = ["box3", "gaussian3", "sharpen", "laplacian"]
STREAM_SIZES = ["72x37", "136x150", "8x1"]


# the border cycles with the case; a (mask, border) group is one batch run
STREAM_CASES = [(n, c, s, BORDERS[i % len(BORDERS)]) for i, (n, c, s) in enumerate(
    (n, c, s) for n in STREAM_MASKS for c in [1, 2, 3, 4] for s in STREAM_SIZES)]


def streamed_input(rng, channels, size, **_):
    w, h = (int(v) for v in size.split("x"))
    return random16(rng, w, h, channels)


@pytest.mark.parametrize("name,channels,size,border", [
    pytest.param(*case, id="{}-c{}-{}-{}".format(*case),
                 marks=pytest.mark.batch_group(f"{case[0]}-{case[3]}"))
    for case in STREAM_CASES])
def test_streamed_3x3(gf, groups, request, backend16, name, channels, size, border):
    """Widths whose rows are whole words (a multiple of 8 pixels), so the
    CUDA backend's 3x3 integer masks stream down rows in float: several
    warps and blocks, a last band cut short, a one-row image."""
    member = groups.run(request, streamed_input, ["-m", name, "-b", border],
                        backends=("reference", gf.backend), write=write16)
    check_conv_output(read_deep(member.source), read_deep(member.outputs[backend16]), name,
                      load_mask(name), border, backend16)


# integer weights: every exact value is a multiple of 1/scale, so a half
# is a true tie, and rint(sum / scale + offset) settles it (to even)
TIE_MASKS = {
    "1x2-scale2-offset1": (np.array([[1, 1]]), 2.0, 1.0),
    "3x3-scale16-offset1": (np.array([[1, 2, 1], [2, 4, 2], [1, 2, 1]]), 16.0, 1.0),
    "3x3-scale16-offset-3": (np.array([[0, 3, 0], [2, 6, 2], [0, 3, 0]]), 16.0, -3.0),
    "3x3-scale6-offset7": (np.array([[1, 1, 1], [0, 0, 0], [1, 1, 1]]), 6.0, 7.0),
    "3x3-scale9-offset-5": (np.array([[1, 1, 1], [1, 1, 1], [1, 1, 1]]), 9.0, -5.0),
}


@pytest.mark.reduce(3)
@pytest.mark.parametrize("alpha", ["kept", "filtered"])
@pytest.mark.parametrize("size", ["70x37", "33x20"])
@pytest.mark.parametrize("name", list(TIE_MASKS))
def test_integer_ties_to_even(gf, rng, tmp_path, backend16, name, size, alpha):
    """Exact: no value is excused at a tie. RGBA at an even width takes the
    CUDA backend's streaming 3x3 kernel (power-of-two and odd scales), an odd
    width and the scale 6 its direct one."""
    weights, scale, offset = TIE_MASKS[name]
    w, h = (int(v) for v in size.split("x"))
    img = random16(rng, w, h, 4)
    img[: h // 2] = rng.integers(0, 8, (h // 2, w, 4))  # small values: many ties
    path = mask_file(tmp_path, "t", weights.astype(float), scale, offset)
    extra = ["--filter-alpha"] if alpha == "filtered" else []
    got = run16(gf, tmp_path, img, ["-m", path, "-b", "reflect", *extra], backend16)
    values, filtered = _unrounded(img, parse_mask(open(path).read()), "reflect", alpha == "filtered")
    want = as3d(img).copy()
    want[:, :, :filtered] = np.clip(np.rint(values), 0, 65535).astype(np.uint16)
    frac = values - np.floor(values)
    if scale % 2 == 0:
        assert np.count_nonzero(frac == 0.5) > 50, "the image must hold ties"
    assert_equal_image(got, want, what=f"{name} {size} alpha {alpha} on {backend16}")


@pytest.mark.parametrize("combine", ["max", "min", "sum"])
def test_combines(gf, rng, tmp_path, backend16, combine):
    a = rng.integers(-2, 3, (3, 3)).astype(float)
    b = rng.integers(-2, 3, (3, 3)).astype(float)
    text = (f"combine {combine}\n3 3 2 50\n" + "\n".join(" ".join(str(v) for v in r) for r in a)
            + "\n3 3 1 -30\n" + "\n".join(" ".join(str(v) for v in r) for r in b) + "\n")
    path = tmp_path / "c.mask"
    path.write_text(text)
    img = random16(rng, 21, 15, 3)
    check_conv(gf, tmp_path, img, str(path), parse_mask(text), "reflect", backend16)


def unsharp_mask(sigma, amount, threshold):
    """unsharp:sigma,amount,threshold as the oracle needs it: the gaussian
    (radius ceil(3 sigma), normalized) and the combine's parameters."""
    g = gaussian_taps(sigma)
    m = Mask([Matrix(np.outer(g, g))], combine="unsharp")
    m.amount, m.threshold = amount, threshold
    return m


@pytest.mark.parametrize("threshold", [0, 200, 3000])
def test_unsharp(gf, rng, tmp_path, backend16, threshold):
    """s + amount (s - blur) where |s - blur| >= threshold (in levels), else s;
    clamped to 0..65535 (values near both ends)."""
    img = random16(rng, 30, 20, 4)
    spec = f"unsharp:sigma=1,amount=1.5,threshold={threshold}"
    mask = unsharp_mask(1.0, 1.5, threshold)
    got = run16(gf, tmp_path, img, ["-m", spec, "-b", "mirror"], backend16)
    want, values = expect_conv(img, mask, "mirror")
    assert_close(got, want, what=f"{spec} on {backend16}", fraction=0.0,
                 ties=near_half(img, values, 1e-6 if backend16 != "cuda" else 1e-3))


def near_half(img, values, within):
    """Values within 'within' of k + 1/2, as a mask over the image's channels."""
    ties = np.zeros(as3d(img).shape, bool)
    ties[:, :, :values.shape[2]] = np.abs(values - np.floor(values) - 0.5) < within
    return ties


def gaussian_taps(sigma):
    """exp(-i^2 / 2 sigma^2), i = -r..r, r = ceil(3 sigma), normalized (docs/masks.md)."""
    r = max(1, int(math.ceil(3 * sigma)))
    x = np.arange(-r, r + 1, dtype=np.float64)
    g = np.exp(-x * x / (2 * sigma * sigma))
    return g / g.sum()


def separable_values(img, column, row, border):
    img = as3d(img).astype(np.float64)
    from gftest import correlate
    f = n_colour(img.shape[2])
    out = np.empty(img.shape[:2] + (f,))
    for c in range(f):
        rows = correlate(img[:, :, c], np.asarray(row)[None, :], border)
        out[:, :, c] = correlate(rows, np.asarray(column)[:, None], border)
    return out


@pytest.mark.parametrize("border", ["nearest", "constant", "reflect", "wrap"])
@pytest.mark.parametrize("spec", ["gaussian:sigma=20", "box:radius=40", "box:radius=100"])
def test_large_masks(gf, rng, tmp_path, backend16, spec, border):
    """Large masks run their fast paths (-v names them) and match the oracle."""
    img = random16(rng, 90, 61, 3)
    radius = int(spec.split("=")[1])
    if spec.startswith("gaussian"):
        taps = gaussian_taps(float(radius))
    else:
        taps = np.full(2 * radius + 1, 1.0 / (2 * radius + 1))
    values = separable_values(img, taps, taps, border)
    want = img.copy()
    want[:, :, :3] = np.clip(np.rint(values), 0, 65535).astype(np.uint16)
    ties = near_half(img, values, 1e-6 if backend16 != "cuda" else (len(taps) * 2 + 8) * U * 65536)
    src = write16(tmp_path / "in.png", img)
    dst = tmp_path / f"out-{backend16}.png"
    r = gf.run("--backend", backend16, "-v", "-m", spec, "-b", border, str(src), str(dst)).ok()
    if backend16 == "cpu":
        text = r.err.decode() if isinstance(r.err, bytes) else r.err
        assert "separable" in text, f"{spec}: not on a separable path:\n{text}"
    assert_close(read_deep(dst), want, what=f"{spec} border={border} on {backend16}",
                 fraction=0.0, ties=ties)


def test_cpu_equals_reference(gf, rng, tmp_path):
    """The chosen backend gives the reference's samples, mask after mask."""
    img = random16(rng, 64, 40, 4)
    chain = ["-m", "sobel", "-m", "gaussian:sigma=12", "-m", "sharpen", "-m", "box:radius=20"]
    ref = run16(gf, tmp_path, img, chain, "reference")
    got = run16(gf, tmp_path, img, chain, gf.backend)
    if gf.backend == "cuda":
        assert_close(got, ref, what="cuda vs reference")
    else:
        assert_equal_image(got, ref, what=f"{gf.backend} vs reference")


# ---------------------------------------------------------------------------
# tone operations


def luma(img):
    r, g, b = (img[:, :, k].astype(np.int64) for k in range(3))
    return (4899 * r + 9617 * g + 1868 * b + 8192) >> 14


def equalize_lut(values):
    """tone.h at 16 bits: round((cdf(v) - cdf(vmin)) * 65535 / (N - hist[vmin]))
    in double, half to even; identity for a constant image."""
    hist = np.bincount(values.reshape(-1), minlength=65536).astype(np.int64)
    cdf = np.cumsum(hist)
    n = int(cdf[-1])
    first = int(np.nonzero(hist)[0][0])
    if hist[first] == n:
        return np.arange(65536, dtype=np.uint16)
    lut = np.rint((cdf - cdf[first]).astype(np.float64) * 65535.0 / float(n - hist[first]))
    lut[:first + 1] = 0
    return np.clip(lut, 0, 65535).astype(np.uint16)


def expect_equalize(img, mode):
    img = as3d(img)
    out = img.copy()
    nc = n_colour(img.shape[2])
    if mode == "channels" or nc == 1:
        for k in range(nc):
            out[:, :, k] = equalize_lut(img[:, :, k])[img[:, :, k]]
        return out
    ycc = cv2.cvtColor(np.ascontiguousarray(img[:, :, :3]), cv2.COLOR_RGB2YCrCb)
    assert np.array_equal(ycc[:, :, 0].astype(np.int64), luma(img))  # the same luma
    ycc[:, :, 0] = equalize_lut(ycc[:, :, 0])[ycc[:, :, 0]]
    out[:, :, :3] = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)
    return out


def stretch(img, lo, hi):
    img = as3d(img)
    out = img.copy()
    if hi <= lo:
        return out
    nc = n_colour(img.shape[2])
    x = img[:, :, :nc].astype(np.float64)
    out[:, :, :nc] = np.clip(np.rint((x - lo) * 65535.0 / (hi - lo)), 0, 65535).astype(np.uint16)
    return out


def expect_normalize(img, black, white):
    img = as3d(img)
    lum = (luma(img) if img.shape[2] >= 3 else img[:, :, 0].astype(np.int64)).reshape(-1)
    n = lum.size
    cdf = np.cumsum(np.bincount(lum, minlength=65536)).astype(np.int64)
    lo = int(np.nonzero(cdf.astype(np.float64) * 100 > black * n)[0][0])
    above = n - np.concatenate([[0], cdf[:-1]])
    hi = int(np.nonzero(above.astype(np.float64) * 100 > white * n)[0][-1])
    return stretch(img, lo, hi)


def skewed16(rng, width, height, channels):
    """Beta-distributed colour samples (so the operations do something),
    alpha uniform."""
    img = np.empty((height, width, channels), dtype=np.uint16)
    for c in range(channels):
        if channels in (2, 4) and c == channels - 1:
            img[:, :, c] = rng.integers(0, 65536, size=(height, width))
        else:
            a, b = rng.uniform(0.6, 6.0, size=2)
            img[:, :, c] = np.clip(rng.beta(a, b, (height, width)) * 65536, 0, 65535)
    return img


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["luminance", "channels"])
def test_equalize(gf, rng, tmp_path, backend16, channels, mode):
    img = skewed16(rng, 57, 33, channels)
    got = run16(gf, tmp_path, img, [f"--equalize={mode}"], backend16)
    assert_equal_image(got, expect_equalize(img, mode), what=f"--equalize={mode}")


def test_equalize_constant(gf, tmp_path, backend16):
    img = np.full((4, 5, 3), 40000, np.uint16)
    img[:, :, 1] = 123
    got = run16(gf, tmp_path, img, ["--equalize"], backend16)
    assert_equal_image(got, img, what="a constant image stays")


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("limits", [(2.0, 1.0), (0.0, 0.0), (10.0, 25.0)])
def test_normalize(gf, rng, tmp_path, backend16, channels, limits):
    img = skewed16(rng, 61, 29, channels)
    arg = f"--normalize={limits[0]:g},{limits[1]:g}"
    got = run16(gf, tmp_path, img, [arg], backend16)
    assert_equal_image(got, expect_normalize(img, *limits), what=arg)


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_auto_level(gf, rng, tmp_path, backend16, channels):
    img = rng.integers(20000, 30001, size=(31, 27, channels), dtype=np.uint16)
    if channels in (2, 4):
        img[:, :, -1] = rng.integers(0, 65536, size=(31, 27))
    nc = n_colour(channels)
    got = run16(gf, tmp_path, img, ["--auto-level"], backend16)
    col = img[:, :, :nc]
    want = stretch(img, int(col.min()), int(col.max()))
    assert_equal_image(got, want, what="--auto-level")
    assert int(got[:, :, :nc].min()) == 0 and int(got[:, :, :nc].max()) == 65535


# ---------------------------------------------------------------------------
# statistics


def channel_stats(ch, name):
    hist = np.bincount(ch.reshape(-1).astype(np.int64), minlength=65536).astype(np.int64)
    n = int(hist.sum())
    v = np.arange(65536, dtype=np.int64)
    s = int((hist * v).sum())
    ss = sum(int(h) * int(x) * int(x) for x, h in zip(np.nonzero(hist)[0], hist[hist > 0]))
    var_num = n * ss - s * s
    cdf = np.cumsum(hist)
    nz = np.nonzero(hist)[0]
    return {"name": name, "min": int(nz[0]), "max": int(nz[-1]), "mean": s / n,
            "std": math.sqrt(var_num / (n * n)) if var_num else 0.0,
            "median": int(np.nonzero(2 * cdf >= n)[0][0]), "histogram": hist}


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_stats_json(gf, rng, tmp_path, backend16, channels):
    img = random16(rng, 45, 38, channels)
    src = write16(tmp_path / "in.png", img)
    r = gf.run("--backend", backend16, "--stats=json", str(src)).ok()
    got = json.loads(r.out)
    assert set(got) == {"file", "width", "height", "depth", "channels"}, sorted(got)
    assert (got["width"], got["height"], got["depth"]) == (45, 38, 16)
    for k, g in enumerate(got["channels"]):
        e = channel_stats(img[:, :, k], NAMES[channels][k])
        assert g["name"] == e["name"]
        for key in ("min", "max", "median"):
            assert g[key] == e[key], f"{e['name']}.{key} = {g[key]}, expected {e[key]}"
        assert len(g["histogram"]) == 65536
        assert np.array_equal(np.array(g["histogram"], np.int64), e["histogram"])
        for key in ("mean", "std"):
            assert math.isclose(g[key], e[key], rel_tol=1e-9), f"{e['name']}.{key}"


def test_stats_8bit_has_no_depth_key(gf, rng, tmp_path):
    img = rng.integers(0, 256, size=(5, 4, 3), dtype=np.uint8)
    src = tmp_path / "in8.png"
    assert cv2.imwrite(str(src), img)
    got = json.loads(gf.run("--backend", gf.backend, "--stats=json", str(src)).ok().out)
    assert set(got) == {"file", "width", "height", "channels"}
    assert len(got["channels"][0]["histogram"]) == 256


def test_stats_table(gf, rng, tmp_path, backend16):
    img = np.array([[[0], [65535]], [[1000], [65535]]], np.uint16)
    src = write16(tmp_path / "in.png", img)
    out = gf.run("--backend", backend16, "--stats", str(src)).ok().out
    text = out.decode() if isinstance(out, bytes) else out
    row = [line.split() for line in text.splitlines() if line.startswith("gray")][0]
    assert row[1:3] == ["0", "65535"] and row[5] == "1000", text
    assert float(row[3]) == pytest.approx(33017.5)


def test_summary(gf, rng, tmp_path):
    a, b = random16(rng, 6, 5, 3), random16(rng, 4, 7, 3)
    pa, pb = write16(tmp_path / "a.png", a), write16(tmp_path / "b.png", b)
    r = gf.run("--backend", gf.backend, "--stats=json", "--summary", str(pa), str(pb)).ok()
    text = r.out.decode() if isinstance(r.out, bytes) else r.out
    last = json.loads(text[text.rindex('{"summary"'):])
    assert last["summary"] == {"files": 2, "pixels": 58, "depth": 16}
    red = last["channels"][0]
    both = np.concatenate([a[:, :, 0].reshape(-1), b[:, :, 0].reshape(-1)])
    e = channel_stats(both, "red")
    assert red["name"] == "red" and red["min"] == e["min"] and red["max"] == e["max"]
    assert red["median"] == e["median"] and len(red["histogram"]) == 65536
    assert np.array_equal(np.array(red["histogram"], np.int64), e["histogram"])


def test_summary_refuses_mixed_depths(gf, rng, tmp_path):
    p16 = write16(tmp_path / "a.png", random16(rng, 3, 3, 1))
    p8 = tmp_path / "b.png"
    assert cv2.imwrite(str(p8), rng.integers(0, 256, size=(3, 3), dtype=np.uint8))
    r = gf.run("--backend", gf.backend, "--stats", "--summary", str(p16), str(p8))
    err = r.err.decode() if isinstance(r.err, bytes) else r.err
    assert r.rc == 2 and "mix 8 and 16 bits" in err, r.describe()


# ---------------------------------------------------------------------------
# the GPU in strips (--gpu-memory under two image buffers): the CPU's bytes

STRIP_OPS = [
    ["-m", "gaussian5"],
    ["-m", "sobel", "-m", "box3"],
    ["-m", "gaussian:sigma=6"],
    ["-m", "unsharp:sigma=3,amount=1.5"],
    ["--equalize"],
    ["--equalize=channels"],
    ["--normalize"],
    ["--auto-level"],
]


@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", ["nearest", "constant", "reflect", "wrap"])
@pytest.mark.parametrize("ops", STRIP_OPS, ids=lambda o: "".join(o).replace("-", "_"))
def test_strips_at_16_bits(gf, rng, tmp_path, ops, border):
    img = random16(rng, 300, 211, 4)
    src = write16(tmp_path / "in.png", img)
    cpu, cuda = tmp_path / "cpu.png", tmp_path / "cuda.png"
    gf.run("--backend", "cpu", "-b", border, *ops, str(src), str(cpu)).ok()
    r = gf.run("--backend", "cuda", "-v", "--gpu-memory", "300K", "-b", border, *ops,
               str(src), str(cuda)).ok()
    assert "strips of up to" in r.err, r.err
    want, got = read_deep(cpu), read_deep(cuda)
    assert got.dtype == np.uint16 and want.dtype == np.uint16
    assert np.array_equal(got, want), f"{ops} in strips: {np.count_nonzero(got != want)} samples differ"


@pytest.mark.cuda_only
def test_statistics_in_strips_at_16_bits(gf, rng, tmp_path):
    img = random16(rng, 300, 211, 3)
    src = write16(tmp_path / "in.png", img)
    whole = gf.run("--backend", "cpu", "--stats=json", str(src)).ok()
    strips = gf.run("--backend", "cuda", "--gpu-memory", "300K", "--stats=json", str(src)).ok()
    assert json.loads(strips.out) == json.loads(whole.out)
