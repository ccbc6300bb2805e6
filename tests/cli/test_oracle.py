"""Convolution results against an independent float64 oracle (gftest.apply_mask:
scipy.ndimage correlation, numpy rint, clip). With --backend cuda every result
is also compared with the same binary's --backend cpu output."""

import functools
import math
import os
import re
import subprocess

import numpy as np
import pytest
import scipy.ndimage as ndi

from gftest import (BORDERS, REPO, apply_mask, apply_masks, assert_close, assert_equal_image,
                    builtin_mask_names, correlate, float_ties, format_matrix, load_mask,
                    parse_mask, parse_paths, photo_with_channels, random_image, read_png,
                    rounding_ties, write_png)

MASKS = builtin_mask_names()
CHANNELS = [1, 2, 3, 4]
SIZES = [(1, 1), (1, 7), (7, 1), (2, 3), (257, 131), "photo"]  # W x H


def size_id(size):
    return size if isinstance(size, str) else f"{size[0]}x{size[1]}"


def make_input(rng, size, channels):
    if size == "photo":
        return photo_with_channels(rng, channels)
    w, h = size
    return random_image(rng, w, h, channels)


def run_and_check(gf, tmp_path, rng_img, masks, border, check_cuda, extra=(),
                  filter_alpha=False, want=None, tag="x", ties=None):
    """Filter img with the backend under test; compare with the CPU backend
    (cuda runs) and with the oracle, a difference of one allowed where ties
    marks an exact rounding boundary. Returns the output."""
    img = rng_img
    got = gf.apply(tmp_path, img, masks, border, extra=extra, tag=tag)
    check_shape_and_alpha(img, got, filter_alpha)
    check_cuda(tmp_path, img, got, masks, border, extra=extra, tag=tag, ties=ties)
    if want is None:
        want = apply_masks(img, masks, border or "nearest", filter_alpha)
    assert_close(got, want, what=f"{' '.join(masks)} border={border} vs oracle", ties=ties)
    return got


def check_shape_and_alpha(img, got, filter_alpha=False):
    assert got.shape == img.shape, f"output shape {got.shape}, input {img.shape}"
    if img.shape[2] in (2, 4) and not filter_alpha:
        assert_equal_image(got[:, :, -1], img[:, :, -1], what="alpha (must pass through)")


def batch_and_check(gf, tmp_path, imgs, masks, border, wants, ties):
    """run_and_check for several images, one batch run a backend."""
    sources = [write_png(tmp_path / f"in{i}.png", img) for i, img in enumerate(imgs)]
    backends = [gf.backend] + (["cpu"] if gf.backend == "cuda" else [])
    for backend in backends:
        gf.run("--backend", backend, *[a for m in masks for a in ("-m", m)], "-b", border,
               "-o", tmp_path / backend, *sources).ok()
    for img, source, want, tie in zip(imgs, sources, wants, ties):
        got = read_png(tmp_path / gf.backend / source.name)
        check_shape_and_alpha(img, got)
        if gf.backend == "cuda":
            assert_close(got, read_png(tmp_path / "cpu" / source.name), what="cuda vs cpu backend",
                         ties=tie)
        assert_close(got, want, what=f"{' '.join(masks)} border={border} vs oracle", ties=tie)


# ---------------------------------------------------------------------------
# the oracle itself


def test_oracle_selfcheck():
    """The padded correlation equals scipy.ndimage (1-D extension everywhere,
    n-D for masks up to 9x9), so the oracle has scipy's semantics."""
    rng = np.random.default_rng(12345)
    for n in range(1, 8):
        x = rng.integers(0, 256, n).astype(np.float64)
        for k in range(1, 32):
            w = rng.random(k)
            for border in BORDERS:
                want = ndi.correlate1d(x, w, mode=border, cval=0.0)
                got = correlate(x[None, :], w[None, :], border)[0]
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9,
                                           err_msg=f"n={n} k={k} {border}")
    for h, w in [(1, 1), (7, 1), (1, 7), (3, 2), (5, 7), (13, 11)]:
        x = rng.integers(0, 256, (h, w)).astype(np.float64)
        for kh, kw in [(1, 1), (3, 3), (2, 2), (6, 4), (9, 9), (1, 5), (5, 1)]:
            wt = rng.random((kh, kw)) - 0.3
            for border in BORDERS:
                want = ndi.correlate(x, wt, mode=border, cval=0.0)
                got = correlate(x, wt, border)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9,
                                           err_msg=f"{h}x{w} mask {kh}x{kw} {border}")


def test_builtin_masks_parse():
    assert len(MASKS) == 18, MASKS
    for name in MASKS:
        m = load_mask(name)
        assert m.description, name
        assert all(mt.weights.shape == (m.height, m.width) for mt in m.matrices)


# ---------------------------------------------------------------------------
# every built-in mask x border x channels x size


def grid_id(mask, border, channels, size):
    return f"{mask}-{border}-c{channels}-{size_id(size)}"


# with --backend cuda a (mask, border) group is one batch run a backend
# (groups.py): 90 starts of the binary for the grid instead of 2160
GRID = [pytest.param(m, b, c, s, id=grid_id(m, b, c, s), marks=pytest.mark.batch_group(f"{m}-{b}"))
        for m in MASKS for b in BORDERS for c in CHANNELS for s in SIZES]


def grid_input(rng, size, channels, **_):
    return make_input(rng, size, channels)


@pytest.mark.reduce(11)  # 11 is prime to 6 sizes and 4 channel counts: a covering subset
@pytest.mark.parametrize("mask,border,channels,size", GRID)
def test_builtin_mask(gf, groups, backend, request, rng, tmp_path, check_cuda_matches_cpu, mask,
                      border, channels, size):
    img = make_input(rng, size, channels)
    if backend != "cuda":
        run_and_check(gf, tmp_path, img, [mask], border, check_cuda_matches_cpu)
        return
    member = groups.run(request, grid_input, ["--quiet", "-m", mask, "-b", border],
                        backends=("cuda", "cpu"))
    assert_equal_image(read_png(member.source), img, what="the group's input (its test's rng stream)")
    got, ref = (read_png(member.outputs[b]) for b in ("cuda", "cpu"))
    check_shape_and_alpha(img, got)
    assert_close(got, ref, what="cuda vs cpu backend")
    assert_close(got, apply_masks(img, [mask], border), what=f"{mask} border={border} vs oracle")


@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"c{c}")
@pytest.mark.parametrize("mask", ["gaussian5", "sobel", "motion9"])
def test_default_border_is_nearest(gf, rng, tmp_path, check_cuda_matches_cpu, mask, channels):
    img = random_image(rng, 37, 23, channels)
    got = run_and_check(gf, tmp_path, img, [mask], None, check_cuda_matches_cpu)
    assert_close(got, apply_mask(img, load_mask(mask), "nearest"))


# ---------------------------------------------------------------------------
# chains


# the last: five 3x3 masks on three of the CUDA backend's paths and modes,
# each back after another two (its host keeps what it learnt of the last two
# masks' weights: a mask must never run on another's)
CHAINS = [("gaussian5", "sharpen"), ("sharpen", "gaussian5"),
          ("sobel-x", "box3", "emboss"), ("box9", "identity", "laplacian"),
          ("gaussian3", "box3", "sharpen", "gaussian3", "box3")]
CHAIN_INPUTS = [(1, (257, 131)), (4, (257, 131)), (3, "photo"), (2, (2, 3))]


@pytest.mark.reduce(7)
@pytest.mark.parametrize("channels,size", CHAIN_INPUTS, ids=lambda v: size_id(v) if not isinstance(v, int) else f"c{v}")
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("chain", CHAINS, ids=lambda ch: "+".join(ch))
def test_chain(gf, rng, tmp_path, check_cuda_matches_cpu, chain, border, channels, size):
    img = make_input(rng, size, channels)
    run_and_check(gf, tmp_path, img, list(chain), border, check_cuda_matches_cpu)


def test_chain_rounds_between_masks(gf, rng, tmp_path):
    """Each mask rounds and clamps to uint8 before the next one: laplacian
    (clamps negatives to 0) then sobel-x differs from any float pipeline."""
    img = random_image(rng, 64, 48, 1)
    got = gf.apply(tmp_path, img, ["laplacian", "sobel-x"], "reflect")
    step = apply_mask(img, load_mask("laplacian"), "reflect")
    assert (step == 0).any() and (step == 255).any()  # clamping did happen
    assert_close(got, apply_mask(step, load_mask("sobel-x"), "reflect"))


# ---------------------------------------------------------------------------
# --filter-alpha


@pytest.mark.reduce(3)
@pytest.mark.parametrize("channels", [2, 4], ids=lambda c: f"c{c}")
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("mask", ["box3", "sobel", "sharpen", "gaussian7"])
def test_filter_alpha(gf, rng, tmp_path, check_cuda_matches_cpu, mask, border, channels):
    img = random_image(rng, 257, 131, channels)
    got = run_and_check(gf, tmp_path, img, [mask], border, check_cuda_matches_cpu,
                        extra=["--filter-alpha"], filter_alpha=True)
    assert not np.array_equal(got[:, :, -1], img[:, :, -1]), "alpha was not filtered"


@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"c{c}")
def test_filter_alpha_photo(gf, rng, tmp_path, check_cuda_matches_cpu, channels):
    img = photo_with_channels(rng, channels)
    run_and_check(gf, tmp_path, img, ["gaussian5", "sobel"], "mirror", check_cuda_matches_cpu,
                  extra=["--filter-alpha"], filter_alpha=True)


# ---------------------------------------------------------------------------
# user mask files


def int_weights(rng, h, w, lo=-4, hi=4):
    while True:
        wt = rng.integers(lo, hi + 1, size=(h, w)).astype(np.float64)
        if np.count_nonzero(wt) >= min(2, wt.size) and (wt.size == 1 or len(np.unique(wt)) > 1):
            return wt


def user_mask_text(rng, kind):
    """Mask text for one odd shape (kind = 'WxH')."""
    w, h = (int(v) for v in kind.split("x"))
    if kind == "1x1":
        return format_matrix([[float(rng.integers(2, 6))]], scale=int(rng.integers(3, 7)),
                             offset=int(rng.integers(-30, 31)))
    if w * h >= 31:  # random fractional weights, summing to about 1
        wt = rng.random((h, w))
        wt = wt / wt.sum() * rng.uniform(0.8, 1.2)
        return "# random fractional weights\n" + format_matrix(wt)
    wt = int_weights(rng, h, w)
    scale = max(1.0, float(np.abs(wt).sum()) / 2)
    return format_matrix(wt, scale=scale, offset=int(rng.integers(0, 129)))


USER_SHAPES = ["1x1", "1x5", "5x1", "2x2", "4x6", "6x4", "31x31", "31x1", "1x31"]
USER_INPUTS = [(3, (257, 131)), (4, (2, 3)), (1, (1, 7)), (2, (40, 1))]


@pytest.mark.reduce(7)
@pytest.mark.parametrize("channels,size", USER_INPUTS,
                         ids=lambda v: size_id(v) if not isinstance(v, int) else f"c{v}")
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("shape", USER_SHAPES)
def test_user_mask_shapes(gf, rng, tmp_path, check_cuda_matches_cpu, shape, border, channels, size):
    text = user_mask_text(rng, shape)
    path = tmp_path / f"user{shape}.mask"
    path.write_text(text)
    mask = parse_mask(text)
    w, h = (int(v) for v in shape.split("x"))
    assert (mask.width, mask.height) == (w, h)
    img = make_input(rng, size, channels)
    want = apply_mask(img, mask, border)
    # fractional weights: the float path may round the other way within its error
    weights = mask.matrices[0].weights
    ties = float_ties(img, mask, border) if np.any(weights != np.round(weights)) else None
    run_and_check(gf, tmp_path, img, [str(path)], border, check_cuda_matches_cpu, want=want,
                  ties=ties)


@pytest.mark.reduce(3)
@pytest.mark.parametrize("channels", CHANNELS, ids=lambda c: f"c{c}")
@pytest.mark.parametrize("border", BORDERS)
def test_mask_larger_than_image(gf, rng, tmp_path, check_cuda_matches_cpu, border, channels):
    """A 31x31 mask on a 7x5 image: the border extends over several periods."""
    wt = rng.random((31, 31)) - 0.25
    text = format_matrix(wt / wt.sum(), scale=1, offset=3)
    path = tmp_path / "big.mask"
    path.write_text(text)
    img = random_image(rng, 7, 5, channels)
    mask = parse_mask(text)
    want = apply_mask(img, mask, border)
    # 961 float taps: within their error of k + 1/2 either rounding is right
    # (an exact value of 141.4999885 came out 142 on the GPU, 141 on the CPU)
    run_and_check(gf, tmp_path, img, [str(path)], border, check_cuda_matches_cpu, want=want,
                  ties=float_ties(img, mask, border))


def test_even_mask_anchor(gf, rng, tmp_path):
    """2x2 mask, anchor (1, 1): a one-hot weight at (row r, col c) reads pixel
    (y + r - 1, x + c - 1). Checked with plain slicing, not scipy."""
    img = random_image(rng, 9, 6, 1)[:, :, 0]
    for r in range(2):
        for c in range(2):
            wt = np.zeros((2, 2))
            wt[r, c] = 1
            path = tmp_path / f"d{r}{c}.mask"
            path.write_text(format_matrix(wt))
            got = gf.apply(tmp_path, img, [str(path)], "nearest", tag=f"d{r}{c}")[:, :, 0]
            padded = np.pad(img, 1, mode="edge")
            want = padded[r:r + 6, c:c + 9]
            assert_equal_image(got, want, what=f"one-hot 2x2 at row {r} col {c}")


def test_correlation_not_convolution(gf, rng, tmp_path):
    """'0 0 0 / 0 0 1 / 0 0 0' reads the right neighbour: out[y, x] = in[y, x + 1]."""
    img = random_image(rng, 11, 7, 1)[:, :, 0]
    path = tmp_path / "right.mask"
    path.write_text("3 3\n0 0 0\n0 0 1\n0 0 0\n")
    got = gf.apply(tmp_path, img, [str(path)], "wrap", tag="r")[:, :, 0]
    assert_equal_image(got, np.roll(img, -1, axis=1), what="right neighbour (wrap)")
    path.write_text("3 3\n0 1 0\n0 0 0\n0 0 0\n")
    got = gf.apply(tmp_path, img, [str(path)], "constant", tag="u")[:, :, 0]
    want = np.zeros_like(img)
    want[1:] = img[:-1]
    assert_equal_image(got, want, what="upper neighbour (constant)")


# ---------------------------------------------------------------------------
# scale, offset, negative weights, rounding, clamping


SIGNED_MASKS = {
    "neg-scale4-off128": "3 3 4 128\n-1 -2 0\n-2 0 2\n0 2 1\n",
    "invert": "# 255 - pixel\n3 3 1 255\n0 0 0\n0 -1 0\n0 0 0\n",
    "neg-sum-off255": "3 3 2 255\n-1 -1 -1\n-1 -2 -1\n-1 -1 -1\n",
    "frac-offset": "3 3 3 0.5\n1 -1 1\n-1 2 -1\n1 -1 1\n",
    "frac-scale": "3 1 0.5 -100\n-1 1 0.5\n",
    "header-wh-only": "3 3\n0 -1 0\n-1 4 -1\n0 -1 0\n",
    "header-no-offset": "3 3 2\n1 0 -1\n2 0 -2\n1 0 -1\n",
    "magnitude-one-matrix": "combine magnitude\n3 3 2 0\n1 0 -1\n2 0 -2\n1 0 -1\n",
}


@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("name", list(SIGNED_MASKS))
def test_signed_masks(gf, rng, tmp_path, check_cuda_matches_cpu, name, border):
    text = SIGNED_MASKS[name]
    path = tmp_path / f"{name}.mask"
    path.write_text(text)
    img = random_image(rng, 61, 17, 3)
    want = apply_mask(img, parse_mask(text), border)
    run_and_check(gf, tmp_path, img, [str(path)], border, check_cuda_matches_cpu, want=want)


def test_invert_exact(gf, rng, tmp_path):
    img = random_image(rng, 33, 9, 4)
    path = tmp_path / "inv.mask"
    path.write_text(SIGNED_MASKS["invert"])
    got = gf.apply(tmp_path, img, [str(path)], "constant")
    assert_equal_image(got[:, :, :3], 255 - img[:, :, :3], what="255 - pixel")
    assert_equal_image(got[:, :, 3], img[:, :, 3], what="alpha")


def test_float_ties_selfcheck():
    """float_ties marks a value within the float error bound of k + 1/2,
    a bound that grows with the taps, and nothing far from one."""
    img = np.full((1, 1, 1), 1, np.uint8)  # every tap reads the one pixel
    def single(taps, total):
        n = int(round(taps ** 0.5))
        return parse_mask(f"{n} {n} 1 0\n" + ("\n".join([" ".join([repr(total / taps)] * n)] * n)) + "\n")
    near = 141.5 - 1e-5  # the value that came out 142 on the GPU, 141 on the CPU
    assert float_ties(img, single(961, near))[0, 0, 0]
    assert float_ties(img, single(1, near))[0, 0, 0]  # 9 u 142.5: 7.6e-5
    assert float_ties(img, single(961, 141.5 - 1e-3))[0, 0, 0]  # 969 u 142.5: 8.2e-3
    assert not float_ties(img, single(1, 141.5 - 1e-3))[0, 0, 0]
    assert not float_ties(img, single(961, 141.5 - 0.05))[0, 0, 0]
    assert not float_ties(img, single(961, 141.0))[0, 0, 0]
    assert np.array_equal(apply_mask(img, single(961, near)), [[[141]]])


def test_rounding_ties_selfcheck():
    """rounding_ties marks exactly the values on k + 1/2, and assert_close
    excuses a difference of one there and nowhere else."""
    img = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
    half = parse_mask("1 1 2 0\n1\n")  # v / 2: odd v are ties
    ties = rounding_ties(img, half)
    assert_equal_image(ties[:, :, 0], img[:, :, 0] % 2 == 1)
    thirds = parse_mask("combine sum\n1 1 3 0\n1\n1 1 6 0\n1\n")  # v/3 + v/6 = v/2
    assert_equal_image(rounding_ties(img, thirds), ties)
    want = apply_mask(img, half)
    other = want.copy()
    other[ties] += 1
    assert_close(other, want, fraction=0.0, ties=ties)
    with pytest.raises(AssertionError, match="at rounding ties"):
        assert_close(other, want, fraction=0.0, ties=ties & (img > 4))
    other[0, 0, 0] += 1  # 0 is no tie
    with pytest.raises(AssertionError, match="1 of 12 values differ"):
        assert_close(other, want, fraction=0.0, ties=ties)
    other = want.copy()
    other[0, 1, 0] += 2  # a tie, but off by two
    with pytest.raises(AssertionError, match=r"max \|diff\| 2"):
        assert_close(other, want, fraction=0.0, ties=ties)


def test_round_half_to_even(gf, tmp_path):
    """v / 2 for every pixel value: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, 3.5 -> 4 ..."""
    img = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    path = tmp_path / "half.mask"
    path.write_text("1 1 2 0\n1\n")
    got = gf.apply(tmp_path, img, [str(path)])[:, :, 0].astype(int).ravel()
    assert list(got[:8]) == [0, 0, 1, 2, 2, 2, 3, 4]
    for v in range(256):
        q, r = divmod(v, 2)
        want = q if r == 0 else (q if q % 2 == 0 else q + 1)
        assert got[v] == want, f"{v}/2 gave {got[v]}, expected {want} (half to even)"


def test_round_half_to_even_with_offset(gf, tmp_path):
    """v / 4 + 0.25: (v % 4 == 1) -> .5 ties, half to even."""
    img = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    path = tmp_path / "q.mask"
    path.write_text("1 1 4 0.25\n1\n")
    got = gf.apply(tmp_path, img, [str(path)])[:, :, 0].astype(int).ravel()
    assert list(got[:10]) == [0, 0, 1, 1, 1, 2, 2, 2, 2, 2]
    assert_equal_image(got, np.rint(np.arange(256) / 4 + 0.25).astype(int))


@pytest.mark.parametrize("offset,value", [(-300, 0), (300, 255), (-255.6, 0), (255.4, 255)])
def test_clamp(gf, rng, tmp_path, offset, value):
    img = random_image(rng, 20, 10, 3)
    path = tmp_path / "c.mask"
    path.write_text(f"1 1 1 {offset}\n1\n")
    got = gf.apply(tmp_path, img, [str(path)])
    assert (got == value).all(), f"offset {offset}: values {np.unique(got)[:10]}, expected all {value}"


# ---------------------------------------------------------------------------
# several matrices: combine max / min / sum / magnitude


def combine_text(rng, combine, count, w, h):
    parts = [f"# {combine} of {count} random {w}x{h} matrices", f"combine {combine}"]
    for k in range(count):
        wt = int_weights(rng, h, w, -3, 3)
        scale = max(1.0, float(np.abs(wt).sum()) / 2)
        parts.append(format_matrix(wt, scale=scale, offset=int(rng.integers(-20, 100))).rstrip())
    return "\n".join(parts) + "\n"


COMBINE_CASES = [("max", 2, 3, 3), ("min", 2, 3, 3), ("sum", 2, 3, 3),
                 ("max", 3, 5, 5), ("min", 4, 3, 5), ("sum", 3, 1, 3),
                 ("magnitude", 3, 3, 3), ("magnitude", 2, 5, 1)]


@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("combine,count,w,h", COMBINE_CASES,
                         ids=[f"{c}{n}-{w}x{h}" for c, n, w, h in COMBINE_CASES])
def test_combine(gf, rng, tmp_path, combine, count, w, h, border):
    text = combine_text(rng, combine, count, w, h)
    path = tmp_path / f"{combine}.mask"
    path.write_text(text)
    mask = parse_mask(text)
    assert len(mask.matrices) == count
    imgs = [make_input(rng, size, channels) for channels, size in [(3, (257, 131)), (2, (2, 3))]]
    # several matrices, each with its own scale: some sums are exact ties
    batch_and_check(gf, tmp_path, imgs, [str(path)], border,
                    [apply_mask(img, mask, border) for img in imgs],
                    [rounding_ties(img, mask, border) for img in imgs])


def test_combine_differs_from_first_matrix(gf, rng, tmp_path):
    """max and min of two different matrices give different images."""
    a, b = "3 3 1 0\n0 0 0\n1 0 0\n0 0 0\n", "3 3 1 0\n0 0 0\n0 0 1\n0 0 0\n"
    img = random_image(rng, 30, 20, 1)
    outs = {}
    for combine in ("max", "min", "sum"):
        path = tmp_path / f"{combine}.mask"
        path.write_text(f"combine {combine}\n{a}{b}")
        outs[combine] = gf.apply(tmp_path, img, [str(path)], "wrap", tag=combine)[:, :, 0].astype(int)
    left, right = np.roll(img[:, :, 0], 1, axis=1).astype(int), np.roll(img[:, :, 0], -1, axis=1).astype(int)
    assert_equal_image(outs["max"], np.maximum(left, right), "max")
    assert_equal_image(outs["min"], np.minimum(left, right), "min")
    assert_equal_image(outs["sum"], np.minimum(left + right, 255), "sum")


# ---------------------------------------------------------------------------
# CUDA only: tile shapes and kernel versions against the CPU backend


TILES = ["32x8", "16x16", "8x8", "32x32", "64x4", "128x1", "1x32", "7x3", "1x1", "auto"]
KERNELS = ["naive", "tiled", "blocked", "separable", "direct", "auto"]
# (tile, kernel) pairs: every tile on the seed versions; the register-blocked
# ones on tiles they run and one they refuse
TILE_KERNELS = ([(t, k) for t in TILES for k in ("naive", "tiled")] +
                [(t, k) for t in ("32x8", "16x16", "7x3", "auto")
                 for k in ("blocked", "separable", "direct", "auto")] +
                [("64x64", "direct"), ("8x8", "direct")])
SMALL_TILE_KERNELS = ([(t, k) for t in ("32x8", "16x16", "7x3", "1x32") for k in ("naive", "tiled")] +
                      [(t, k) for t in ("32x8", "7x3") for k in ("blocked", "separable", "direct", "auto")])
SWEEP = [("gaussian5", 1), ("sobel", 2), ("box9", 3), ("sharpen", 4), ("motion9", 4),
         ("gaussian7", 4), ("gaussian5", 3), ("prewitt", 4), ("laplacian", 3), ("scharr", 1)]
SEPARABLE = {"gaussian3", "gaussian5", "gaussian7", "box3", "box5", "box9", "identity"}
# the register-blocked versions compute several pixels per thread: a tile is
# a multiple of 8 wide and of 4 (blocked) or 8 (separable, direct) high; the
# direct version's RGBA 5x5, 7x7 and gradient pairs: 16 high (direct_rows)
BLOCKED_TILES = {"blocked": {"32x8", "16x16", "8x8", "32x32", "64x4", "auto"},
                 "separable": {"32x8", "16x16", "8x8", "32x32", "auto"},
                 "direct": {"32x8", "16x16", "8x8", "32x32", "64x64", "auto"}}
GRADIENT_PAIRS = {"sobel", "prewitt", "scharr"}
LAYOUTS = {1: "gray", 2: "gray+alpha", 3: "RGB", 4: "RGBA"}


@functools.lru_cache(maxsize=None)
def listed_paths(binary):
    """`gpufilter --list-paths`: {path name: [(masks, {layout: [sizes]})]}."""
    r = subprocess.run([str(binary), "--list-paths"], capture_output=True, check=True)
    paths = {}
    for name, masks, sizes in parse_paths(r.stdout.decode()):
        paths.setdefault(name, []).append((masks, sizes))
    return paths


def direct_runs(gf, mask_name, channels):
    """Whether the direct version runs a built-in mask on this layout (alpha
    copied), as --list-paths says: one matrix or a gradient pair at a size
    its float path lists, or a box of ones at a size a path of ones lists."""
    if mask_name not in MASKS and mask_name not in GRADIENT_PAIRS:
        return False
    paths, layout = listed_paths(gf.path), LAYOUTS[channels]
    m = load_mask(mask_name)
    size = m.matrices[0].weights.shape
    if size[0] != size[1]:
        return False
    if mask_name in GRADIENT_PAIRS or (len(m.matrices) == 1 and m.combine != "magnitude"):
        if size[0] in paths["float"][0][1].get(layout, []):
            return True
    ones = len(m.matrices) == 1 and (m.matrices[0].weights == 1).all()
    return ones and any(size[0] in sizes.get(layout, []) for name in paths
                        for masks, sizes in paths[name] if "ones" in masks)


def direct_rows(mask_name, channels):
    """Output rows per thread of the direct version for a built-in mask."""
    size = 3 if mask_name in GRADIENT_PAIRS else load_mask(mask_name).matrices[0].weights.shape[0]
    return direct_rows_of(size, channels, mask_name in GRADIENT_PAIRS)


def direct_rows_of(size, channels, pair=False):
    """Output rows per thread of the direct version: 32 from 9x9 on, 16 for
    RGBA 5x5, 7x7 and gradient pairs, else 8."""
    if size > 7:
        return 32
    return 16 if channels == 4 and (size >= 5 or pair) else 8


def refused(gf, kernel, tile, mask_name, channels=4):
    """Whether this kernel version must refuse the tile (or the mask)."""
    if kernel == "separable" and mask_name not in SEPARABLE:
        return True
    if kernel == "direct" and not direct_runs(gf, mask_name, channels):
        return True
    if (kernel == "direct" and tile in BLOCKED_TILES["direct"] and tile != "auto" and
            int(tile.split("x")[1]) % direct_rows(mask_name, channels)):
        return True
    # auto falls back to a version that runs the tile
    return kernel in BLOCKED_TILES and tile not in BLOCKED_TILES[kernel]


def apply_or_refused(gf, tmp_path, img, masks, border, kernel, tile, mask_name, extra, tag="cuda"):
    """The CUDA output, or None after checking that the version refused the
    tile or mask as bad usage (exit 2, one message naming it, no output)."""
    if not refused(gf, kernel, tile, mask_name, img.shape[2]):
        return gf.apply(tmp_path, img, masks, border, backend="cuda", extra=extra, tag=tag)
    src = write_png(tmp_path / "in-refused.png", img)
    out = tmp_path / "refused.png"
    r = gf.run("--backend", "cuda", *[a for m in masks for a in ("-m", m)], "-b", border, *extra,
               src, out)
    assert r.rc == 2 and r.err.startswith("gpufilter: ") and not out.exists(), r.describe()
    assert tile in r.err or kernel in r.err, r.describe()
    return None


@pytest.mark.cuda_only
@pytest.mark.reduce(37)  # under the 50 cases of a (tile, kernel): one or two each
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("mask,channels", SWEEP, ids=[f"{m}-c{c}" for m, c in SWEEP])
@pytest.mark.parametrize("tile,kernel", TILE_KERNELS, ids=[f"{t}-{k}" for t, k in TILE_KERNELS])
def test_cuda_tiles(gf, rng, tmp_path, tile, kernel, mask, channels, border):
    img = random_image(rng, 257, 131, channels)
    extra = ["--tile", tile, "--kernel", kernel]
    got = apply_or_refused(gf, tmp_path, img, [mask], border, kernel, tile, mask, extra)
    if got is None:
        return
    ref = gf.apply(tmp_path, img, [mask], border, backend="cpu", tag="cpu")
    assert_close(got, ref, what=f"cuda {tile} {kernel} vs cpu")
    assert_close(got, apply_mask(img, load_mask(mask), border), what="cuda vs oracle")


@pytest.mark.cuda_only
@pytest.mark.reduce(23)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", [(1, 1), (1, 7), (7, 1), (2, 3), (33, 9)], ids=size_id)
@pytest.mark.parametrize("tile,kernel", SMALL_TILE_KERNELS,
                         ids=[f"{t}-{k}" for t, k in SMALL_TILE_KERNELS])
def test_cuda_tiles_small_images(gf, rng, tmp_path, tile, kernel, size, border):
    """Images smaller than the halo: every tap goes through the border."""
    img = random_image(rng, size[0], size[1], 4)
    extra = ["--tile", tile, "--kernel", kernel]
    got = apply_or_refused(gf, tmp_path, img, ["gaussian7"], border, kernel, tile, "gaussian7", extra)
    if got is None:
        return
    assert_close(got, apply_mask(img, load_mask("gaussian7"), border),
                 what=f"cuda {tile} {kernel} {border} vs oracle")


@pytest.mark.cuda_only
@pytest.mark.reduce(7)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("tile", ["32x8", "16x16", "auto"])
def test_cuda_large_mask(gf, rng, tmp_path, tile, kernel, border):
    wt = rng.random((31, 31))
    text = format_matrix(wt / wt.sum())
    path = tmp_path / "big.mask"
    path.write_text(text)
    img = random_image(rng, 257, 131, 3)
    extra = ["--tile", tile, "--kernel", kernel]
    got = apply_or_refused(gf, tmp_path, img, [str(path)], border, kernel, tile, "random31", extra)
    if got is None:
        return
    ref = gf.apply(tmp_path, img, [str(path)], border, backend="cpu", tag="cpu")
    assert_close(got, ref, what=f"cuda {tile} {kernel} vs cpu")
    assert_close(got, apply_mask(img, parse_mask(text), border), what="cuda vs oracle")


# version 4 has three arithmetic paths on gray and RGBA: integer weights of
# -128..127 (DP4A), 7x7 of 16-bit integer weights whose sums stay below 2^22
# (DP2A; other sizes: float) and every other weight (float); each on the
# ends of its range, with a scale that is a power of two (folded) and one
# that is not. DP4A 3x3 divided by an odd integer with no offset rounds t / d
# with one FFMA (MODE_DIV_ODD): t / 15 comes within 1/30 of a half-integer
DIRECT_WEIGHTS = {
    "byte-ends": ([-128, 127, -1, 0, 1, 2], 64, 128),        # DP4A, prescaled, offset
    "byte-ends-div": ([-128, 127, 3, -5], 100, 0),           # DP4A, divided
    "byte-ends-odd": ([-128, 127, 3, -5, 1], 15, 0),         # DP4A, odd divisor (3x3: one FFMA)
    "byte-ends-odd-neg": ([-128, 127, 3, -5, 1], -7, 0),     # the same, negative
    "byte-ends-odd-offset": ([-128, 127, 3, -5], 9, 5),      # DP4A, odd divisor, offset: divided
    "fractional": ([0.5, -0.25, 1.75, 0.125], 3, 10),        # float
    "past-a-byte": ([-129, 128, 200, -7, 1], 512, 0),        # 7x7: DP2A, else float
    "shorts-div": ([-1000, 1000, 300, -7, 0, 1], 1000, 3),   # 7x7: DP2A (sums < 2^22), divided
    "shorts-big": ([-32768, 32767, 1, 0], 65536, 0),         # float: sums past 2^22
}


def assert_direct_refuses(gf, tmp_path, img, mask_path, border):
    """--kernel direct with a mask it does not run: bad usage (exit 2), a
    message naming the direct kernel, no output."""
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "refused.png"
    r = gf.run("--backend", "cuda", "-m", str(mask_path), "-b", border, "--kernel", "direct", src,
               out)
    assert r.rc == 2 and "direct kernel" in r.err and not out.exists(), r.describe()


# image widths: 203 (rows not 16-byte aligned: the direct version gathers
# each row through the border) and 208 (aligned: its ring of rows copied
# with cp.async)
DIRECT_WIDTHS = [203, 208]


@pytest.mark.cuda_only
@pytest.mark.reduce(13)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("border", ["nearest", "constant"])
@pytest.mark.parametrize("size", [3, 5, 7])
@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("weights", list(DIRECT_WEIGHTS))
def test_cuda_direct_weight_paths(gf, rng, tmp_path, weights, channels, size, border, width):
    values, scale, offset = DIRECT_WEIGHTS[weights]
    wt = rng.choice(values[2:], size=(size, size))
    wt[0, 0], wt[-1, -1] = values[0], values[1]  # both ends of the range
    text = format_matrix(wt, scale, offset)
    path = tmp_path / "w.mask"
    path.write_text(text)
    img = random_image(rng, width, 77, channels)
    got = gf.apply(tmp_path, img, [str(path)], border, backend="cuda",
                   extra=["--kernel", "direct"], tag="cuda")
    ref = gf.apply(tmp_path, img, [str(path)], border, backend="cpu", tag="cpu")
    assert_close(got, ref, what=f"cuda direct {weights} vs cpu")
    assert_close(got, apply_mask(img, parse_mask(text), border), what="cuda direct vs oracle")
    if weights != "fractional":  # integer sums: exactly the CPU's bytes
        assert_equal_image(got, ref, f"cuda direct {weights} vs cpu")


# version 4's separable integer path: 5x5 to 15x15 masks that factor as a
# column of integers times a row of -128..127, sums below 2^22; the others
# that factor go to its DP4A, DP2A or float paths up to 7x7, and to no path
# of it from 9x9 on (row, column, scale, offset). Masks whose outputs stay
# in 0..255 (no negative weight, their sum at most the scale, no offset)
# have kernels of their own for binomial columns prescaled (5x5, 7x7) and
# columns of ones over an odd integer (5x5 to 9x9, gray to 15x15); other
# such masks take the kernels of any column. "binomial" and "ones" stand
# for those columns, a scale of "sum" for the smallest power of two
# (binomial) or odd integer (ones) at least the weights' sum.
DIRECT_SEPARABLE = {
    "byte-row-ends": ([-128, 127, 3, -1, 0], [1, -2, 3, 1, 0], 64, 9),     # separable, prescaled
    "big-column": ([1, 2, -3, 1, 0], [-250, 200, 7, 1, 0], 1000, 0),       # separable, divided
    "binomial": ([60, 40, 3, 1, 0], "binomial", "sum", 0),                 # binomial cascade
    "binomial-signed": ([-60, 59, 3, -1, 0], "binomial", 256, 0),          # any column (clamped)
    "binomial-offset": ([60, 59, 3, 1, 0], "binomial", 256, 7),            # any column
    "ones": ([127, 90, 3, 1, 0], "ones", "sum", 0),                        # running sum
    "ones-signed": ([-128, 127, 3, -1, 0], "ones", 45, 0),                 # any column
    "ones-neg": ([127, 90, 3, 1, 0], "ones", -27, 0),                      # any column
    "ones-even": ([127, 90, 3, 1, 0], "ones", 50, 0),                      # any column, divided
    "row-past-a-byte": ([200, -1, 3, 1, 0], [1, 2, 1, 0, 3], 256, 0),      # DP2A (7x7) or float
    "sums-past-2^22": ([127, -128, 100, 90, 1], [3000, -2000, 1, 5, 0], 4096, 0),  # float
    "fractional": ([0.5, 1.5, -0.25, 1, 0], [1, 2, 1, 0, 1], 4, 0),        # float
}


@pytest.mark.cuda_only
@pytest.mark.reduce(29)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("kernel", ["direct", "auto"])
@pytest.mark.parametrize("border", ["nearest", "constant"])
@pytest.mark.parametrize("size", [5, 7, 9, 11, 15])
@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("factors", list(DIRECT_SEPARABLE))
def test_cuda_direct_separable_paths(gf, rng, tmp_path, factors, channels, size, border, kernel,
                                     width):
    row_values, column_values, scale, offset = DIRECT_SEPARABLE[factors]
    row = np.resize(rng.permutation(row_values), size)
    row[0] = row_values[0]  # the largest magnitude
    if column_values == "binomial":
        column = np.array([math.comb(size - 1, i) for i in range(size)])
    elif column_values == "ones":
        column = np.ones(size, dtype=int)
    else:
        column = np.resize(rng.permutation(column_values), size)
        column[-1] = column_values[0]
    wt = np.outer(column, row)
    if scale == "sum":
        total = int(wt.sum())
        scale = 1 << (total - 1).bit_length() if column_values == "binomial" else total | 1
    text = format_matrix(wt, scale, offset)
    path = tmp_path / "s.mask"
    path.write_text(text)
    img = random_image(rng, width, 77, channels)
    img[:12, :12] = 255  # the largest sums (255 where the weights' sum is the scale)
    # the separable integer path's masks: integer factors, a row of bytes, sums below 2^22
    integer = (factors not in ("row-past-a-byte", "sums-past-2^22", "fractional") and
               255 * np.abs(wt).sum() < 2**22)
    if size >= 9 and not integer and kernel == "direct":  # 9x9 on: that path only
        assert_direct_refuses(gf, tmp_path, img, path, border)
        return
    got = gf.apply(tmp_path, img, [str(path)], border, backend="cuda",
                   extra=["--kernel", kernel], tag="cuda")
    ref = gf.apply(tmp_path, img, [str(path)], border, backend="cpu", tag="cpu")
    assert_close(got, apply_mask(img, parse_mask(text), border), what=f"cuda {kernel} vs oracle")
    # float sums, or integer ones past 2^24 (sums-past-2^22 at any size, the
    # binomial columns from 11x11 on): within a level of the CPU's
    if factors == "fractional" or 255 * np.abs(wt).sum() >= 2**24:
        assert_close(got, ref, what=f"cuda {kernel} {factors} vs cpu")
    else:  # integer sums below 2^24: exactly the CPU's bytes
        assert_equal_image(got, ref, f"cuda {kernel} {factors} vs cpu")


# box masks (ones over an odd integer at least their count) on the direct
# version, 5x5 to 31x31, gray and RGBA with alpha filtered and copied. With
# the automatic tile: prefix sums across a warp for gray from 9x9 and RGBA
# from 15x15, the column of ones (gray 5x5, 7x7) and the running sums in
# 16-bit lanes (RGBA 5x5 to 13x13) below. Both widths of DIRECT_WIDTHS: 203
# puts every row off the fast path (rows not 16-byte aligned: the prefix
# sums gather their edge lanes byte by byte), 208 only the edges (the
# prefix sums' lanes off the image take the pixels they mirror from other
# lanes, but for the wrap border); the scale is the count at one and 18
# over it at the other. The image has blocks of 255 (the largest sums: 255
# x 225 in a lane for 15x15, 255 x 961 = 245055 in a channel's 32-bit sum
# for 31x31) and of 0 at two corners and across its middle, so that the
# sums entering and leaving the windows take both extremes.
RUNNING_PATH = "box, running sums in 16-bit lanes, no clamp"
RUNNING_WIDE_PATH = "box, running sums, rows in 16-bit lanes, no clamp"  # from 17x17 on
SCAN_PATH = "box, prefix sums across a warp, no clamp"
# gray box masks from this size on (the tensor cores' smallest) take the
# tensor cores before the prefix sums (conv2d_make_plan's path order),
# their odd divisor in one FADD and FFMA
GRAY_MMA_BOX = 11
RUNNING_SIZES = [5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31]


def box_image(rng, width, size, channels, height=131):
    img = random_image(rng, width, height, channels)
    corner, band = max(20, size + 5), max(15, size)  # past a window's side
    img[:corner, :corner] = 255
    img[-corner:, -corner:] = 0
    img[60:60 + band, :] = 255
    img[60 + band:60 + 2 * band, 50:] = 0
    return img


def check_direct_box(gf, rng, tmp_path, layout, size, border, width, kind, tile=None, height=131,
                     scale=None):
    """The box mask of this size on the direct version: the path -v names,
    the CPU backend's bytes and the oracle's values (the scale by default
    the count, 18 over it at the first of DIRECT_WIDTHS)."""
    channels = 1 if layout == "gray" else 4
    if scale is None:
        scale = size * size + (18 if width == DIRECT_WIDTHS[0] else 0)
    text = format_matrix(np.ones((size, size), dtype=int), scale)
    path = tmp_path / "box.mask"
    path.write_text(text)
    img = box_image(rng, width, size, channels, height)
    check_direct_layout(gf, tmp_path, img, channels, path, text, layout, border, kind, "box",
                        ["--kernel", "direct", *(["--tile", tile] if tile else [])])


def check_direct_layout(gf, tmp_path, img, channels, path, text, layout, border, kind, what, args):
    """The mask at path on img with the CUDA backend and args: the path -v
    names, the CPU backend's bytes and the oracle's values (layout "gray",
    "rgba" or "rgba-filter-alpha")."""
    alpha = ["--filter-alpha"] if layout == "rgba-filter-alpha" else []
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-m", str(path), "-b", border, "-v", *args, *alpha, src, out).ok()
    assert f"x{channels} ({kind}): tile" in r.err, r.describe()
    got = read_png(out)
    ref = gf.apply(tmp_path, img, [str(path)], border, backend="cpu", tag="cpu", extra=alpha)
    assert_equal_image(got, ref, f"cuda direct {what} {layout} vs cpu")
    want = apply_mask(img, parse_mask(text), border, filter_alpha=(layout == "rgba-filter-alpha"))
    assert_close(got, want, what=f"cuda direct {what} vs oracle")
    return r


@pytest.mark.cuda_only
@pytest.mark.reduce(17)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", RUNNING_SIZES)
@pytest.mark.parametrize("layout", ["gray", "rgba", "rgba-filter-alpha"])
def test_cuda_direct_running_box(gf, rng, tmp_path, layout, size, border, width):
    kind = (MMA_PATH if layout == "gray" and size >= GRAY_MMA_BOX else
            SCAN_PATH if size >= (9 if layout == "gray" else 15) else
            ONES_PATH if layout == "gray" else RUNNING_PATH)
    check_direct_box(gf, rng, tmp_path, layout, size, border, width, kind)


# the same masks with a tile the prefix sums cannot run (gray 8x32: not
# whole lanes of 16 pixels; RGBA 64x32: 512 threads, over the 256 a block
# may have), so the other paths run them: gray to 15x15 on the column of
# ones, RGBA on the running sums to 31x31
@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", ["nearest", "reflect"])
@pytest.mark.parametrize("layout, size", [(layout, size) for layout in ["gray", "rgba", "rgba-filter-alpha"]
                                          for size in RUNNING_SIZES if layout != "gray" or size <= 15])
def test_cuda_direct_box_wide_tile(gf, rng, tmp_path, layout, size, border):
    kind = (ONES_PATH if layout == "gray" else RUNNING_PATH if size <= 15 else RUNNING_WIDE_PATH)
    tile = "8x32" if layout == "gray" else "64x32"
    check_direct_box(gf, rng, tmp_path, layout, size, border, DIRECT_WIDTHS[1], kind, tile=tile)


# gray box masks from GRAY_MMA_BOX on with a tile the tensor cores cannot
# run (512 pixels wide: over their 256 bytes), so the prefix sums run them
@pytest.mark.cuda_only
@pytest.mark.reduce(7)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", [size for size in RUNNING_SIZES if size >= GRAY_MMA_BOX])
def test_cuda_direct_box_gray_scan_tile(gf, rng, tmp_path, size, border, width):
    check_direct_box(gf, rng, tmp_path, "gray", size, border, width, SCAN_PATH, tile="512x8")


# the prefix sums' walk (conv2d_scan_walk): the strips whose rows all lie
# inside an aligned image, by warps with no lane off it, take a loop of
# their own, without the border and the load tiers. The widths give four
# or five columns of warps (gray: 480 outputs a warp; RGBA: 96 to 112), of
# which two or three have no lane off the image (at the other box tests'
# widths no gray warp does); 300 rows give strips of 8 rows, 33 of them
# (31x31) to 36 (9x9) inside, which walk down and up in turn (odd ones up);
# blocks of 8 warps (the automatic tile) and of 2 (gray 64x16, RGBA 16x16:
# 64 threads). Gray box masks from GRAY_MMA_BOX on take the tensor cores at
# those tiles, so there 8 and 2 warps come from tiles the tensor cores do
# not run: 512x8 and 128x8. The scale is the count plus 18.
WALK_WIDTHS = {"gray": 1504, "rgba": 400, "rgba-filter-alpha": 400}


@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("tile", ["auto", "two-warps"])
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("layout, size", [("gray", 9), ("gray", 31), ("rgba", 15), ("rgba", 31),
                                          ("rgba-filter-alpha", 31)])
def test_cuda_direct_box_walk(gf, rng, tmp_path, layout, size, border, tile):
    if layout == "gray" and size >= GRAY_MMA_BOX:
        tile = "512x8" if tile == "auto" else "128x8"
    else:
        tile = None if tile == "auto" else "64x16" if layout == "gray" else "16x16"
    check_direct_box(gf, rng, tmp_path, layout, size, border, WALK_WIDTHS[layout], SCAN_PATH,
                     tile=tile, height=300, scale=size * size + 18)


# version 4's tensor-core path: masks of 11x11 to 31x31 that factor as a
# column times a row of integers 0..255 whose row sums stay in 16 bits
# (sampled Gaussians: the row's weights sum to ~128, the column's to ~120,
# so that 255 times the whole mask's stays below 2^22), gray and RGBA with
# alpha copied and filtered, every border. Widths 203 (rows not 16-byte
# aligned: every piece of the input gathered byte by byte) and 208 (only
# the edges); scales a power of two at or above the weights' total
# (prescaled, in range: one FFMA, no clamp), one below it (the clamp above
# kept), the first with an offset, and an odd integer (MODE_DIV_ODD: one
# FADD and FFMA, no clamp); sizes across the row pass's 2 to 5 chunks and
# the column pass's 1 and 2.
# Exactly the CPU's bytes.
MMA_PATH = "separable integer, tensor cores"
MMA_SIZES = [11, 13, 17, 19, 31]


def sampled_gaussian(size, total):
    """Integer samples of a Gaussian of sigma size / 5 summing to about total."""
    x = np.arange(size) - size // 2
    sigma = size / 5
    return np.rint(total / (sigma * math.sqrt(2 * math.pi)) * np.exp(-x * x / (2 * sigma * sigma))).astype(int)


def check_direct_mma(gf, rng, tmp_path, layout, size, border, width, scaling, tile=None, height=83):
    channels = 1 if layout == "gray" else 4
    row, column = sampled_gaussian(size, 128), sampled_gaussian(size, 120)
    assert row.sum() <= 257 and row.max() <= 255 and 255 * row.sum() * column.sum() < 2**22
    weights = np.outer(column, row)
    total = int(weights.sum())
    # pow2: the power of two at or above the total (no output past 255);
    # gain: the one a quarter to a half of the total (bright areas clamp)
    scale = (total | 1 if scaling == "odd" else 1 << (total.bit_length() - 2) if scaling == "gain"
             else 1 << (total - 1).bit_length())
    text = format_matrix(weights, scale, 7 if scaling == "offset" else None)
    path = tmp_path / "g.mask"
    path.write_text(text)
    img = random_image(rng, width, height, channels)
    img[:40, :40] = 255  # the largest sums
    img[43:, -40:] = 0
    return check_direct_layout(gf, tmp_path, img, channels, path, text, layout, border, MMA_PATH,
                               "tensor cores", ["--tile", tile] if tile else [])


@pytest.mark.cuda_only
@pytest.mark.reduce(19)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", MMA_SIZES)
@pytest.mark.parametrize("layout, scaling", [("gray", "pow2"), ("gray", "odd"), ("gray", "gain"),
                                             ("rgba", "offset"), ("rgba", "pow2"), ("rgba", "odd"),
                                             ("rgba-filter-alpha", "odd")])
def test_cuda_direct_mma(gf, rng, tmp_path, layout, scaling, size, border, width):
    check_direct_mma(gf, rng, tmp_path, layout, size, border, width, scaling)


# RGBA masks of 27x27 to 31x31 take the row pass on channel planes in tiles
# of 32 pixels or more (the automatic 64x64 among them); 31x31 runs above,
# 27x27 and 29x29 here, alpha copied and filtered
@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("width", DIRECT_WIDTHS)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("size", [27, 29])
@pytest.mark.parametrize("layout, scaling", [("rgba", "pow2"), ("rgba-filter-alpha", "odd")])
def test_cuda_direct_mma_planar(gf, rng, tmp_path, layout, scaling, size, border, width):
    check_direct_mma(gf, rng, tmp_path, layout, size, border, width, scaling)


# the planar tiles walking from one tile to the next, which the images of 83
# rows above never reach (one tile a block): 640x480 in tiles of 32x16 is
# 600 tiles, more than a device of fewer than 300 SMs holds blocks of the
# path (2 an SM), so each block runs two or more (-v: "N tiles per block")
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, scaling", [("rgba", "pow2"), ("rgba-filter-alpha", "odd")])
def test_cuda_direct_mma_planar_walk(gf, rng, tmp_path, layout, scaling):
    r = check_direct_mma(gf, rng, tmp_path, layout, 31, "reflect", 640, scaling, tile="32x16", height=480)
    walk = re.search(r"(\d+) tiles? per block", r.err)
    assert walk and int(walk.group(1)) >= 2, r.describe()


# code compiled from PTX older than compute capability 8.0 (the default
# build's compute_75, which an Ampere or Ada GPU compiles when the tool
# starts; CUDA_FORCE_PTX_JIT=1 has any GPU do that) has no mma: the plan
# leaves such masks to the separable integer path, with the same bytes.
# The compiled code goes to the test's own cache, so every run compiles the
# whole conv2d module from PTX: ~6.5 minutes of one CPU core on the GPU
# machine, hence opt-in:
#   GPUFILTER_PTX_JIT=1 python3 -m pytest tests/cli/test_oracle.py --backend cuda -k mma_needs_code
@pytest.mark.cuda_only
@pytest.mark.skipif(os.environ.get("GPUFILTER_PTX_JIT") != "1", reason="set GPUFILTER_PTX_JIT=1")
def test_cuda_mma_needs_code_built_for_it(gf, rng, tmp_path):
    row, column = sampled_gaussian(15, 128), sampled_gaussian(15, 120)
    weights = np.outer(column, row)
    path = tmp_path / "g.mask"
    path.write_text(format_matrix(weights, 1 << (int(weights.sum()) - 1).bit_length(), None))
    img = random_image(rng, 208, 83, 1)
    src = write_png(tmp_path / "in.png", img)
    ref = gf.apply(tmp_path, img, [str(path)], "reflect", backend="cpu", tag="cpu")
    for jit in (False, True):
        out = tmp_path / f"out-{jit}.png"
        env = {"CUDA_FORCE_PTX_JIT": "1", "CUDA_CACHE_PATH": str(tmp_path / "cache")} if jit else None
        r = gf.run("--backend", "cuda", "-m", str(path), "-b", "reflect", "-v", src, out, env=env,
                   timeout=600).ok()
        assert ("x1 (separable integer" in r.err and ("tensor cores" in r.err) != jit), r.describe()
        assert_equal_image(read_png(out), ref, f"cuda, PTX compiled at start: {jit}")


# the same path with tiles of its other shapes: the smallest (16 bytes by
# 16 rows: one m-tile, a persistent grid of many tiles a block), the widest
# (256 bytes) and the tallest (128 rows); on RGBA both row passes (planes
# from 32 pixels on)
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, tile", [("gray", "16x16"), ("gray", "256x16"), ("gray", "32x128"),
                                          ("rgba", "4x16"), ("rgba", "32x16"), ("rgba", "64x16"),
                                          ("rgba", "16x128"), ("rgba-filter-alpha", "64x128")])
def test_cuda_direct_mma_tiles(gf, rng, tmp_path, layout, tile):
    check_direct_mma(gf, rng, tmp_path, layout, 31, "reflect", DIRECT_WIDTHS[1], "pow2", tile=tile)


# the automatic tile on the tensor cores, and the blocks an SM it holds: on
# RGBA the tallest of the rule's width that holds two blocks an SM (on the
# H100 and H200, 228 KB of shared memory an SM: 15x15 at 64x96, which ran
# 4-6% faster than the rule's 64x64; 31x31, whose kernels take 110
# registers and so 2 blocks an SM at any tile, the rule's 64x64), on gray
# the rule's own: 256x64 to 17x17 (three blocks an SM), 128x64 from 19x19,
# whose kernels hold four
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, size, tile, blocks",
                         [("rgba", 31, "64x64", 2), ("rgba-filter-alpha", 31, "64x64", 2), ("rgba", 15, "64x96", 2),
                          ("gray", 31, "128x64", 4), ("gray", 19, "128x64", 4), ("gray", 17, "256x64", 3),
                          ("gray", 15, "256x64", 3)])
def test_cuda_direct_mma_auto_tile(gf, rng, tmp_path, layout, size, tile, blocks):
    r = check_direct_mma(gf, rng, tmp_path, layout, size, "reflect", DIRECT_WIDTHS[1], "pow2")
    assert f"({MMA_PATH}): tile {tile}, block 256 threads" in r.err, r.describe()
    assert f"({blocks} blocks/SM)" in r.err, r.describe()


# version 4's row streams (conv2d_stream.cuh): 3x3 masks of a column times
# a row of integers 0..255 whose products' sums fit 16-bit lanes, in range,
# over a power of two up to 2^8 or an odd integer below 2^15, on gray and
# RGBA rows of whole 16-byte words. Each mask: column, row, scale; the
# built-in gaussian3 and box3, asymmetric weights (the bands walking up take
# the column reversed), the shift of 0 and of 8, odd scales, and the largest
# sum a lane holds (255 * 257).
STREAM_PATH = "separable integer, row streams in 16-bit lanes, no clamp"
STREAM_MASKS = {
    "gaussian3": ([1, 2, 1], [1, 2, 1], 16),
    "box3": ([1, 1, 1], [1, 1, 1], 9),
    "asymmetric": ([1, 2, 3], [3, 1, 0], 32),
    "centre-over-1": ([0, 1, 0], [0, 1, 0], 1),
    "over-256": ([1, 6, 1], [1, 30, 1], 256),
    "odd-13": ([3, 1, 0], [1, 1, 1], 13),
    "lane-full-257": ([0, 1, 0], [100, 57, 100], 257),
}
# widths of 33 and 65 words (the last group of lanes mostly past the
# image), heights across bands of 8 rows (a band walking up cut short;
# two bands and a row walking down; one row)
STREAM_SIZES = {"gray": [(528, 42), (1040, 17), (16, 1)], "rgba": [(132, 42), (260, 17), (4, 1)]}


def outer_mask(tmp_path, name, column, row, scale):
    """A mask file of the column times the row over the scale: its path and text."""
    text = format_matrix(np.outer(column, row), scale)
    path = tmp_path / f"{name}.mask"
    path.write_text(text)
    return path, text


def check_direct_stream(gf, rng, tmp_path, layout, name, border, size, args=()):
    channels = 1 if layout == "gray" else 4
    width, height = size
    img = random_image(rng, width, height, channels)
    img[:9, :9] = 255  # the largest sums
    img[-5:, -7:] = 0
    path, text = outer_mask(tmp_path, name, *STREAM_MASKS[name])
    return check_direct_layout(gf, tmp_path, img, channels, path, text, layout, border, STREAM_PATH,
                               "row streams", list(args))


@pytest.mark.cuda_only
@pytest.mark.reduce(6)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("name", STREAM_MASKS)
@pytest.mark.parametrize("layout", ["gray", "rgba", "rgba-filter-alpha"])
def test_cuda_direct_stream(gf, rng, tmp_path, layout, name, border):
    check_direct_stream(gf, rng, tmp_path, layout, name, border,
                        STREAM_SIZES["gray" if layout == "gray" else "rgba"][0])


@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", ["reflect", "wrap"])
@pytest.mark.parametrize("index", [1, 2])
@pytest.mark.parametrize("name", ["asymmetric", "box3"])
@pytest.mark.parametrize("layout", ["gray", "rgba", "rgba-filter-alpha"])
def test_cuda_direct_stream_sizes(gf, rng, tmp_path, layout, name, index, border):
    check_direct_stream(gf, rng, tmp_path, layout, name, border,
                        STREAM_SIZES["gray" if layout == "gray" else "rgba"][index])


# its tiles: groups of 8, 16 and 32 lanes, whole warps side by side, 1 to
# 8 bands a block, and blocks of more than 256 threads up to the 1024 of a
# block (RGBA 256x64 and 512x32: 512; 512x64: 1024)
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, tile, threads", [
    ("gray", "128x16", 16), ("gray", "256x64", 128), ("gray", "512x8", 32), ("gray", "512x64", 256),
    ("gray", "1024x32", 256), ("rgba", "32x16", 16), ("rgba", "64x32", 64), ("rgba", "128x64", 256),
    ("rgba", "256x32", 256), ("rgba", "512x16", 256), ("rgba", "256x64", 512), ("rgba", "512x32", 512),
    ("rgba", "512x64", 1024)])
def test_cuda_direct_stream_tiles(gf, rng, tmp_path, layout, tile, threads):
    size = STREAM_SIZES[layout][0]
    r = check_direct_stream(gf, rng, tmp_path, layout, "asymmetric", "mirror", (size[0], 83),
                            ["--tile", tile])
    assert f"tile {tile}, block {threads} threads" in r.err, r.describe()


# the automatic tile: on RGBA one band of 128 lanes a block (512x8, which
# ran faster than 128x64 and than the occupancy rule's own 256x64), on gray
# the rule's own
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, tile, threads", [("gray", "256x64", 128), ("rgba", "512x8", 128)])
def test_cuda_direct_stream_auto_tile(gf, rng, tmp_path, layout, tile, threads):
    channels = 1 if layout == "gray" else 4
    img = random_image(rng, 1040 if layout == "gray" else 1036, 70, channels)
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-v", "-m", "gaussian3", src, out).ok()
    assert f"x{channels} ({STREAM_PATH}): tile {tile}, block {threads} threads" in r.err, r.describe()
    ref = gf.apply(tmp_path, img, ["gaussian3"], "nearest", backend="cpu", tag="cpu")
    assert_equal_image(read_png(out), ref, f"cuda row streams {layout}, automatic tile, vs cpu")


# masks and images it does not take go to the paths before it: rows not of
# whole 16-byte words, an even scale not a power of two, a sum past 16-bit
# lanes, a negative weight, a tile of fewer than 8 lanes (a tile of part of
# a band, fewer than 8 rows, fits none of the direct paths of a 3x3 mask,
# whose threads compute 8 rows too)
@pytest.mark.cuda_only
@pytest.mark.parametrize("case, width, weights, scale, tile, kind", [
    ("width", 530, ([1, 2, 1], [1, 2, 1]), 16, None, "DP4A, no clamp"),
    ("even-scale", 528, ([1, 1, 1], [1, 1, 1]), 10, None, "DP4A"),
    ("lane-past-16-bits", 528, ([0, 1, 0], [100, 58, 100]), 259, None, "DP4A, no clamp"),
    ("negative", 528, ([1, 2, 1], [-1, 0, 1]), 4, None, "DP4A"),
    ("narrow-tile", 528, ([1, 2, 1], [1, 2, 1]), 16, "64x16", "DP4A, no clamp"),
])
def test_cuda_direct_stream_not_taken(gf, rng, tmp_path, case, width, weights, scale, tile, kind):
    path, text = outer_mask(tmp_path, case, *weights, scale)
    img = random_image(rng, width, 40, 1)
    check_direct_layout(gf, tmp_path, img, 1, path, text, "gray", "nearest", kind, case,
                        ["--tile", tile] if tile else [])


# a tile of part of a band (a height not a multiple of 8) runs none of the
# direct paths of a 3x3 mask, whose threads all compute 8 rows: --kernel
# direct refuses it as bad usage, naming the tile, and writes nothing
@pytest.mark.cuda_only
@pytest.mark.parametrize("layout, tile", [("gray", "256x12"), ("rgba", "512x4")])
def test_cuda_direct_stream_part_band_refused(gf, rng, tmp_path, layout, tile):
    img = random_image(rng, 528 if layout == "gray" else 132, 40, 1 if layout == "gray" else 4)
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "refused.png"
    r = gf.run("--backend", "cuda", "-m", "gaussian3", "--kernel", "direct", "--tile", tile, src, out)
    assert r.rc == 2 and f"tile {tile} does not suit the direct kernel" in r.err, r.describe()
    assert not out.exists(), r.describe()


# --tile sweep: every candidate tile timed or named as one that cannot
# launch, the automatic one marked (the tile -v reports for the same run),
# and the closing line's best the fastest row; --csv the same rows
SWEEP_ROW = re.compile(r"^ *(\d+)x(\d+) +(\d+) +(.*)$")


def sweep_rows_text(text):
    rows = {}
    for line in text.splitlines()[2:-1]:
        m = SWEEP_ROW.match(line)
        assert m, line
        rows[(int(m[1]), int(m[2]))] = (int(m[3]), m[4])
    return rows


@pytest.mark.cuda_only
@pytest.mark.parametrize("mask, channels", [("box9", 1), ("gaussian5", 4)])
def test_cuda_tile_sweep(gf, rng, tmp_path, mask, channels):
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 200, channels))
    verbose = gf.run("--backend", "cuda", "-v", "-m", mask, src, tmp_path / "out.png").ok()
    auto = tuple(int(v) for v in re.search(r": tile (\d+)x(\d+), block", verbose.err).groups())
    text = gf.run("--backend", "cuda", "--tile", "sweep", "-m", mask, src).ok().out.decode()
    lines = text.splitlines()
    assert re.match(rf"conv2d \w+, {mask} \d+x\d+ on 300x200x{channels}, nearest border, .*; "
                    r"device copy [0-9.]+ ms \(\d+ GB/s\), median of 20 runs "
                    r"\(4 rounds over the tiles\)$", lines[0]), lines[0]
    rows = sweep_rows_text(text)
    timed = {}
    for tile, (threads, rest) in rows.items():
        if not rest[0].isdigit():  # why it cannot launch
            continue
        fields = rest.replace("%", "").split()
        warps, occupancy, shared, ms = int(fields[0]), float(fields[1]), int(fields[2]), float(fields[3])
        assert warps == (threads + 31) // 32 and 0 < occupancy <= 100 and shared >= 0 and ms > 0, rest
        timed[tile] = ms
    assert [t for t, (_, rest) in rows.items() if rest.endswith("<- auto")] == [auto], text
    best = min(timed, key=timed.get)
    m = re.match(r"auto (\d+)x(\d+): ([0-9.]+) ms; best (\d+)x(\d+): ([0-9.]+) ms; "
                 r"auto is ([0-9.]+)% slower than the best$", lines[-1])
    assert m and (int(m[1]), int(m[2])) == auto and float(m[3]) == timed[auto], lines[-1]
    assert float(m[6]) == timed[best] and float(m[6]) <= float(m[3]), lines[-1]
    csv_text = gf.run("--backend", "cuda", "--tile", "sweep", "--csv", "-m", mask, src).ok().out.decode()
    header, *csv_rows = csv_text.splitlines()
    assert header == ("tile_width,tile_height,threads,warps,blocks_per_sm,occupancy,shared_bytes,"
                      "ms,gpx_per_s,gb_per_s,roofline_percent,auto,note")
    seen, marked = [], []
    for row in csv_rows:
        cells = row.split(",", 12)
        tile = (int(cells[0]), int(cells[1]))
        seen.append(tile)
        if cells[11] == "1":
            marked.append(tile)
        if cells[7]:
            assert tile in timed and float(cells[7]) > 0 and 0 < float(cells[5]) <= 1, row
        else:
            assert tile not in timed and cells[12].startswith('"'), row
    assert seen == list(rows) and marked == [auto], csv_text


# an automatic tile taller than the sweep's rows (RGBA 15x15 on the tensor
# cores: 64x96) is timed and marked too, as the last row
@pytest.mark.cuda_only
def test_cuda_tile_sweep_taller_auto_tile(gf, rng, tmp_path):
    row, column = sampled_gaussian(15, 128), sampled_gaussian(15, 120)
    weights = np.outer(column, row)
    path = tmp_path / "g15.mask"
    path.write_text(format_matrix(weights, 1 << (int(weights.sum()) - 1).bit_length(), None))
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 200, 4))
    text = gf.run("--backend", "cuda", "--tile", "sweep", "-m", str(path), src).ok().out.decode()
    rows = sweep_rows_text(text)
    marked = [t for t, (_, rest) in rows.items() if rest.endswith("<- auto")]
    assert marked == [(64, 96)] and list(rows)[-1] == (64, 96), text
    assert re.match(r"auto 64x96: [0-9.]+ ms; best \d+x\d+: ", text.splitlines()[-1]), text
    csv_text = gf.run("--backend", "cuda", "--tile", "sweep", "--csv", "-m", str(path), src).ok().out.decode()
    marked = [row.split(",")[:2] for row in csv_text.splitlines()[1:] if row.split(",")[11] == "1"]
    assert marked == [["64", "96"]] and csv_text.splitlines()[-1].startswith("64,96,"), csv_text


# 15x15 masks on the direct version: integer weights of -128..127 whose sums
# stay below 2^22 take its DP4A path (the bench's random15; both ends of the
# byte range); any other 15x15 mask is refused by --kernel direct and runs
# on another version with auto
DIRECT_15 = {
    "random15": None,
    "byte-ends": (-60, 61, 64, 5),     # low, high, scale, offset
    "sums-past-2^22": (-128, 128, 1024, 0),
    "fractional": (None, None, 100, 0),
}


def direct_15_mask(rng, tmp_path, kind):
    if kind == "random15":
        return REPO / "bench" / "masks" / "random15.mask"
    low, high, scale, offset = DIRECT_15[kind]
    if low is None:
        wt = rng.random((15, 15)) * 4 - 1
    else:
        wt = rng.integers(low, high, size=(15, 15))
        wt[0, 0], wt[-1, -1] = -128, 127
        if kind == "sums-past-2^22":
            wt[wt >= 0] = 127
            wt[wt < 0] = -128
    path = tmp_path / "m15.mask"
    path.write_text(format_matrix(wt, scale, offset))
    return path


@pytest.mark.cuda_only
@pytest.mark.reduce(9)
@pytest.mark.parametrize("width", [211, 212])  # gray rows unaligned, aligned (RGBA: both aligned)
@pytest.mark.parametrize("kernel", ["direct", "auto"])
@pytest.mark.parametrize("border", ["nearest", "reflect", "constant"])
@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("kind", list(DIRECT_15))
def test_cuda_direct_15x15(gf, rng, tmp_path, kind, channels, border, kernel, width):
    path = direct_15_mask(rng, tmp_path, kind)
    img = random_image(rng, width, 83, channels)
    extra = ["--kernel", kernel]
    if kernel == "direct" and kind in ("sums-past-2^22", "fractional"):
        assert_direct_refuses(gf, tmp_path, img, path, border)
        return
    got = gf.apply(tmp_path, img, [str(path)], border, backend="cuda", extra=extra, tag="cuda")
    ref = gf.apply(tmp_path, img, [str(path)], border, backend="cpu", tag="cpu")
    assert_close(got, apply_mask(img, parse_mask(path.read_text()), border),
                 what=f"cuda {kernel} vs oracle")
    if kind in ("random15", "byte-ends"):  # exact integer sums: the CPU's bytes
        assert_equal_image(got, ref, f"cuda {kernel} {kind} vs cpu")
    else:
        assert_close(got, ref, what=f"cuda {kernel} {kind} vs cpu")


# version 4 walks each block down several tiles, each thread's rows going
# on through its ring, when the grid would otherwise run past one wave of
# the blocks the device holds, and gives the edge columns to blocks of their
# own (the first rows of the grid): on gray, and on RGBA from 5x5 on and
# for the gradient pairs in 16-bit lanes (other RGBA 3x3 masks keep one
# tile per block). Tiles 8 wide, on rows aligned for the fast
# path (208 wide), and images tall enough for 8448 tiles (32 blocks on each
# of 264 SMs): two or more tiles per block on any GPU up to that size, and
# rows of edge blocks. Masks for each path:
# DP4A prescaled (gaussian3, sharpen), divided by an odd integer (box3) and
# by another (box3 over 10), with an offset (emboss), a gradient pair
# (sobel), separable integer with binomial columns (gaussian5, gaussian7),
# columns of ones over an odd integer (box5, box9), any column prescaled
# (sep7) and divided (box9 over 80), DP4A 15x15 (random15), float
# (fractional).
DIRECT_STRIP_MASKS = ["gaussian3", "sharpen", "box3", "box3-div10", "emboss", "sobel", "gaussian5",
                      "gaussian7", "box5", "box9", "sep7", "box9-div80", "random15", "fractional"]
SEP7 = [1, 2, 3, 4, 3, 2, 1]
# the arithmetic path -v names for each ("no clamp": outputs in 0..255)
BINOMIAL_PATH = "separable integer, binomial column, no clamp"
ONES_PATH = "separable integer, column of ones, no clamp"
LANES_PATH = "gradient pair, 16-bit lanes"
STRIP_PATHS = {"gaussian3": "DP4A, no clamp", "sharpen": "DP4A", "box3": "DP4A, no clamp",
               "box3-div10": "DP4A", "emboss": "DP4A", "sobel": "DP4A", "gaussian5": BINOMIAL_PATH,
               "gaussian7": BINOMIAL_PATH, "box5": ONES_PATH, "box9": ONES_PATH,
               "sep7": "separable integer", "box9-div80": "separable integer", "random15": "DP4A",
               "fractional": "float"}
STRIP_CUSTOM = {  # weights, scale, offset
    "box3-div10": (np.ones((3, 3)), 10, None),
    "fractional": (np.array([[0.5, -1.25, 0.75], [2, 0.125, -1], [1, 0.5, 0.25]]), 2, 3),
    "sep7": (np.outer(SEP7, SEP7), 256, None),
    "box9-div80": (np.ones((9, 9)), 80, None),
}


def direct_strip_mask(tmp_path, name):
    """The mask's path or built-in name, and its size."""
    if name == "random15":
        return str(REPO / "bench" / "masks" / "random15.mask"), 15
    if name in STRIP_CUSTOM:
        weights, scale, offset = STRIP_CUSTOM[name]
        path = tmp_path / "strip.mask"
        path.write_text(format_matrix(weights, scale, offset))
        return str(path), weights.shape[0]
    return name, 3 if name in GRADIENT_PAIRS else load_mask(name).matrices[0].weights.shape[0]


@pytest.mark.cuda_only
@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", ["nearest", "constant"])
@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("name", DIRECT_STRIP_MASKS)
def test_cuda_direct_strips(gf, rng, tmp_path, name, channels, border):
    mask, size = direct_strip_mask(tmp_path, name)
    rows = direct_rows_of(size, channels, name in GRADIENT_PAIRS)
    tile = f"8x{rows}"
    img = random_image(rng, 208, 325 * rows + 5, channels)  # 26 x 326 tiles
    src = write_png(tmp_path / "in.png", img)
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-v", "-m", mask, "-b", border, "--kernel", "direct",
               "--tile", tile, src, out).ok()
    launch = re.search(r"tile (\d+)x(\d+), block \d+ threads, grid (\d+)x(\d+), (\d+) tiles? per "
                       r"block", r.err)
    assert launch, r.describe()
    path = (LANES_PATH if name == "sobel" and channels == 4 else
            RUNNING_PATH if name in ("box5", "box9") and channels == 4 else STRIP_PATHS[name])
    assert f"x{channels} ({path}): tile" in r.err, r.describe()
    th, grid_y, per_block = int(launch[2]), int(launch[4]), int(launch[5])
    tiles_y = -(-img.shape[0] // th)
    if channels == 4 and size == 3 and path != LANES_PATH:  # RGBA 3x3 but the lanes
        assert th == rows and per_block == 1 and grid_y == tiles_y, r.describe()
    else:
        assert th == rows and per_block >= 2 and grid_y > -(-tiles_y // per_block), r.describe()
    got = read_png(out)
    ref = gf.apply(tmp_path, img, [mask], border, backend="cpu", tag="cpu")
    if name == "fractional":
        assert_close(got, ref, what=f"cuda direct {name} vs cpu")
    else:  # exact integer sums: the CPU's bytes
        assert_equal_image(got, ref, f"cuda direct {name} in strips vs cpu")


# the direct version's gradient pairs on RGBA in 16-bit lanes: an x gradient
# u (-1, 0, 1), either sign, and its transpose, u = (1, 2, 1) (Sobel) or
# (1, 1, 1) (Prewitt) over 1, finished with MUFU.SQRT, and (3, 10, 3)
# (Scharr) over a power of two, finished with sqrt.rn's steps (ties: over
# 4, 6.25 is 2.5^2). Each mask: its text (None: built-in) and whether it
# takes the lanes (else the DP4A pair), which -v names.
def gradient_pair(sx, sy, u, scale, offset=0):
    gx = sx * np.outer(u, [-1, 0, 1])
    gy = sy * np.outer([-1, 0, 1], u)
    return "combine magnitude\n" + format_matrix(gx, scale, offset) + format_matrix(gy, scale, offset)


GRADIENT_LANES = {
    "sobel": (None, True),
    "prewitt": (None, True),
    "scharr": (None, True),
    "sobel-negated": (gradient_pair(-1, -1, [1, 2, 1], 1), True),
    "scharr-over-1": (gradient_pair(1, -1, [3, 10, 3], 1), True),  # sums of squares past 2^24
    "scharr-over-32": (gradient_pair(1, 1, [3, 10, 3], 32), True),
    "sobel-over-2": (gradient_pair(1, 1, [1, 2, 1], 2), False),     # MUFU.SQRT: scale 1 only
    "prewitt-offset": (gradient_pair(1, 1, [1, 1, 1], 1, offset=3), False),
    "other-column": (gradient_pair(1, 1, [1, 3, 1], 1), False),
}


def gradient_blocks(rng):
    """An RGBA image of 3x3 blocks, each channel of a block zero but for
    three pixels: right r, bottom b and bottom-right e, for every r, b in
    0..255 and e in 0, 1. The centre's gradients are Prewitt (r + e, b + e),
    Sobel (2r + e, 2b + e), Scharr (10r + 3e, 10b + 3e): for Prewitt every
    pair of 0..255, every sum of squares that MUFU.SQRT finishes below the
    clamp; for Sobel every pair that it can produce (gx + gy is even)."""
    r, b, e = np.meshgrid(np.arange(256), np.arange(256), np.arange(2), indexing="ij")
    triples = np.stack([r.ravel(), b.ravel(), e.ravel()], axis=1)
    triples = triples[rng.permutation(len(triples))]
    side = math.isqrt(-(-len(triples) // 4) - 1) + 1  # blocks a side, 4 channels a block
    cells = np.zeros((side * side * 4, 3), dtype=np.uint8)
    cells[:len(triples)] = triples
    cells = cells.reshape(side, side, 4, 3)
    img = np.zeros((3 * side, 3 * side, 4), dtype=np.uint8)
    img[1::3, 2::3] = cells[..., 0]
    img[2::3, 1::3] = cells[..., 1]
    img[2::3, 2::3] = cells[..., 2]
    return img


@pytest.mark.cuda_only
@pytest.mark.parametrize("alpha", ["copied", "filtered"])
@pytest.mark.parametrize("name", list(GRADIENT_LANES))
def test_cuda_direct_gradient_lanes(gf, rng, tmp_path, name, alpha):
    text, lanes = GRADIENT_LANES[name]
    mask = name
    if text is not None:
        mask = str(tmp_path / "pair.mask")
        (tmp_path / "pair.mask").write_text(text)
    extra = ["--kernel", "direct"] + (["--filter-alpha"] if alpha == "filtered" else [])
    images = [gradient_blocks(rng), random_image(rng, 203, 77, 4), random_image(rng, 208, 45, 4)]
    for i, (img, border) in enumerate(zip(images, ["nearest", "constant", "reflect"])):
        src = write_png(tmp_path / f"in{i}.png", img)
        out = tmp_path / f"out{i}.png"
        r = gf.run("--backend", "cuda", "-v", "-m", mask, "-b", border, *extra, src, out).ok()
        assert (LANES_PATH in r.err) == lanes, r.describe()
        ref = gf.apply(tmp_path, img, [mask], border, backend="cpu",
                       extra=extra[2:], tag=f"cpu{i}")
        assert_equal_image(read_png(out), ref, f"cuda direct {name} ({border}) vs cpu")


@pytest.mark.cuda_only
@pytest.mark.parametrize("mask", ["gaussian3", "box3", "sharpen", "sobel", "gaussian5", "box5"])
def test_cuda_direct_auto_tile_full_blocks(gf, rng, tmp_path, mask):
    """--tile auto gives the direct kernel its blocks of 256 threads, even
    where a kernel under its register cap reports a higher occupancy for
    smaller blocks (the gray 3x3 no-clamp kernels: 128 threads ran ~14%
    slower). Rows of 504 bytes: not whole 16-byte words, so gaussian3 and
    box3 stay off the row streams."""
    src = write_png(tmp_path / "in.png", random_image(rng, 504, 256, 1))
    r = gf.run("--backend", "cuda", "-v", "-m", mask, "--kernel", "direct", src,
               tmp_path / "out.png").ok()
    assert "block 256 threads" in r.err, r.describe()


@pytest.mark.cuda_only
@pytest.mark.parametrize("kernel", KERNELS)
def test_cuda_big_photo(gf, rng, tmp_path, kernel):
    """A 1000x872 photo (more blocks than SMs) through a chain."""
    img = photo_with_channels(rng, 4, name="hubble_deep_field.jpg")
    masks = ["gaussian7", "box9", "box5"] if kernel == "separable" else ["gaussian7", "sobel", "box5"]
    got = gf.apply(tmp_path, img, masks, "reflect", backend="cuda",
                   extra=["--kernel", kernel], tag="cuda")
    ref = gf.apply(tmp_path, img, masks, "reflect", backend="cpu", tag="cpu")
    assert_close(got, ref, what="cuda vs cpu")
