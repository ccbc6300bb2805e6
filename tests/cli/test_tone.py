"""Tone operations and statistics: --stats[=table|json], --equalize[=luminance|
channels], --normalize[=B,W], --auto-level; their composition with -m in
command-line order; the CUDA backend bit-exact against the CPU backend.

Oracles are independent of the project: numpy for statistics, normalize and
auto-level (exact), cv2.equalizeHist for --equalize=channels (bit-exact) and
OpenCV's YCrCb pipeline for --equalize=luminance (within 2 levels).

    python3 -m pytest tests/cli/test_tone.py -q --backend cpu
    python3 -m pytest tests/cli/test_tone.py -q -n 16 --backend cuda
    GPUFILTER_BIG=1 python3 -m pytest tests/cli/test_tone.py -q --backend cuda -k big
"""

import json
import math
import os
import re

import cv2
import numpy as np
import pytest
from PIL import Image

from gftest import (IMAGES_DIR, as3d, assert_close, assert_equal_image, photo, random_image,
                    read_png, write_png)
from test_cli import check_error

CHANNELS = [1, 2, 3, 4]
NAMES = {1: ["gray"], 2: ["gray", "alpha"], 3: ["red", "green", "blue"],
         4: ["red", "green", "blue", "alpha"]}
# (file, Pillow mode it decodes to)
PHOTOS = [("astronaut.png", "RGB"), ("camera.png", "L"), ("coffee.png", "RGB"),
          ("chelsea.png", "RGB"), ("horse.png", "RGBA"), ("text.png", "L"),
          ("hubble_deep_field.jpg", "RGB")]
PHOTO_IDS = [p[0].split(".")[0] for p in PHOTOS]
RGB_PHOTOS = [p for p, m in PHOTOS if m == "RGB"]
GRAY_PHOTOS = [p for p, m in PHOTOS if m == "L"]


def cid(c):
    return f"c{c}"


def n_colour(channels):
    """How many channels are colour (not alpha)."""
    return 1 if channels <= 2 else 3


# ---------------------------------------------------------------------------
# inputs


def photo_png(tmp_path, name):
    """(path of a PNG of the photo, its pixels). PNG photos are used as they
    are; the JPEG is decoded by Pillow and written as PNG (no decoder
    differences)."""
    mode = dict(PHOTOS)[name]
    img = photo(name, mode)
    if name.endswith(".png"):
        return IMAGES_DIR / name, img
    return write_png(tmp_path / (name.rsplit(".", 1)[0] + ".png"), img), img


def skewed_image(rng, width, height, channels):
    """Random data with a different beta-distributed histogram per channel
    (so equalize / normalize do something); alpha, if any, uniform."""
    img = np.empty((height, width, channels), dtype=np.uint8)
    for c in range(channels):
        if channels in (2, 4) and c == channels - 1:
            img[:, :, c] = rng.integers(0, 256, size=(height, width))
        else:
            a, b = rng.uniform(0.6, 6.0, size=2)
            img[:, :, c] = np.clip(rng.beta(a, b, size=(height, width)) * 256, 0, 255).astype(np.uint8)
    return img


def low_contrast(rng, width, height, channels, lo=100, hi=140):
    """Colour values in lo..hi (both present); alpha uniform 0..255."""
    img = rng.integers(lo, hi + 1, size=(height, width, channels), dtype=np.uint8)
    nc = n_colour(channels)
    img[0, 0, :nc] = lo
    img[-1, -1, :nc] = hi
    if channels in (2, 4):
        img[:, :, -1] = rng.integers(0, 256, size=(height, width))
        img[0, -1, -1], img[-1, 0, -1] = 0, 255
    return img


def concentrated(rng, width, height, lo=40, hi=80):
    """Gray values concentrated in lo..hi with a few outliers."""
    img = np.clip(rng.normal((lo + hi) / 2, (hi - lo) / 6, size=(height, width, 1)), lo, hi)
    img = img.astype(np.uint8)
    k = max(1, img.size // 200)
    idx = rng.integers(0, img.size, size=k)
    img.reshape(-1)[idx] = rng.integers(0, 256, size=k)
    return img


# ---------------------------------------------------------------------------
# oracles


def median_of(hist):
    """Smallest v with 2 * cdf(v) >= N (not numpy's median)."""
    cdf = np.cumsum(hist, dtype=np.int64)
    return int(np.nonzero(2 * cdf >= cdf[-1])[0][0])


def channel_stats(ch, name):
    """Expected stats of one channel (any shape of uint8). mean / std from the
    histogram with exact integer sums: equal to numpy's float64 .mean() /
    .std() within ~1e-15 (test_oracle_stats_selfcheck), without allocating
    float copies of a huge image."""
    hist = np.bincount(np.asarray(ch, dtype=np.uint8).reshape(-1), minlength=256).astype(np.int64)
    n = int(hist.sum())
    v = np.arange(256, dtype=np.int64)
    s = int((hist * v).sum())
    mean = s / n
    # population variance = sum h (v - mean)^2 / n = (n*sum h v^2 - s^2) / n^2, exact in integers
    ss = int((hist * v * v).sum())
    var_num = n * ss - s * s  # python int, exact
    std = math.sqrt(var_num / (n * n)) if var_num else 0.0
    nz = np.nonzero(hist)[0]
    return {"name": name, "min": int(nz[0]), "max": int(nz[-1]), "mean": mean, "std": std,
            "median": median_of(hist), "histogram": [int(x) for x in hist]}


def expected_stats(img, file):
    img = as3d(img)
    h, w, c = img.shape
    return {"file": str(file), "width": w, "height": h,
            "channels": [channel_stats(img[:, :, k], NAMES[c][k]) for k in range(c)]}


def assert_stats(got, want):
    """The JSON object: exact keys, exact ints, mean / std within 1e-9 relative."""
    assert isinstance(got, dict), f"stats JSON is not an object: {got!r}"
    assert set(got) == {"file", "width", "height", "channels"}, f"top-level keys {sorted(got)}"
    assert got["file"] == want["file"], f"file {got['file']!r}, expected {want['file']!r}"
    assert (got["width"], got["height"]) == (want["width"], want["height"]), \
        f"size {got['width']}x{got['height']}, expected {want['width']}x{want['height']}"
    names = [ch.get("name") for ch in got["channels"]]
    assert names == [ch["name"] for ch in want["channels"]], f"channel names {names}"
    for g, e in zip(got["channels"], want["channels"]):
        n = e["name"]
        assert set(g) == {"name", "min", "max", "mean", "std", "median", "histogram"}, \
            f"{n}: keys {sorted(g)}"
        for k in ("min", "max", "median"):
            assert type(g[k]) is int, f"{n}.{k} is not an integer: {g[k]!r}"
            assert g[k] == e[k], f"{n}.{k} = {g[k]}, expected {e[k]}"
        hist = g["histogram"]
        assert isinstance(hist, list) and len(hist) == 256, f"{n}.histogram: {len(hist)} entries"
        assert all(type(x) is int for x in hist), f"{n}.histogram has non-integers"
        if hist != e["histogram"]:
            bad = [(v, hist[v], e["histogram"][v]) for v in range(256) if hist[v] != e["histogram"][v]]
            raise AssertionError(f"{n}.histogram differs at {len(bad)} values "
                                 f"(value, got, want): {bad[:8]}")
        for k in ("mean", "std"):
            assert isinstance(g[k], (int, float)) and not isinstance(g[k], bool), f"{n}.{k}: {g[k]!r}"
            assert math.isclose(g[k], e[k], rel_tol=1e-9, abs_tol=0.0), \
                f"{n}.{k} = {g[k]!r}, expected {e[k]!r} (rel diff " \
                f"{abs(g[k] - e[k]) / max(abs(e[k]), 1e-300):.3g})"


def luminance(img):
    """Gray: the gray channel; colour: OpenCV's fixed-point BT.601 luma."""
    img = as3d(img)
    if img.shape[2] <= 2:
        return img[:, :, 0].astype(np.int64)
    r, g, b = (img[:, :, k].astype(np.int64) for k in range(3))
    return (4899 * r + 9617 * g + 1868 * b + 8192) >> 14


def normalize_limits(img, black, white):
    lum = luminance(img).reshape(-1)
    n = lum.size
    cdf = np.cumsum(np.bincount(lum, minlength=256)).astype(np.int64)
    lo = int(np.nonzero(cdf.astype(np.float64) * 100 > black * n)[0][0])
    above = n - np.concatenate([[0], cdf[:-1]])  # pixels >= v
    hi = int(np.nonzero(above.astype(np.float64) * 100 > white * n)[0][-1])
    return lo, hi


def stretch(img, lo, hi):
    img = as3d(img)
    out = img.copy()
    if hi <= lo:
        return out
    nc = n_colour(img.shape[2])
    x = img[:, :, :nc].astype(np.float64)
    out[:, :, :nc] = np.clip(np.rint((x - lo) * 255.0 / (hi - lo)), 0, 255).astype(np.uint8)
    return out


def expect_normalize(img, black=2.0, white=1.0):
    return stretch(img, *normalize_limits(img, black, white))


def expect_auto_level(img):
    img = as3d(img)
    col = img[:, :, :n_colour(img.shape[2])]
    return stretch(img, int(col.min()), int(col.max()))


def expect_equalize_channels(img):
    img = as3d(img)
    out = img.copy()
    for k in range(n_colour(img.shape[2])):
        out[:, :, k] = cv2.equalizeHist(np.ascontiguousarray(img[:, :, k]))
    return out


def expect_equalize_luminance(img):
    """OpenCV: RGB -> YCrCb, equalizeHist(Y), back. Gray: equalizeHist."""
    img = as3d(img)
    if img.shape[2] <= 2:
        return expect_equalize_channels(img)
    out = img.copy()
    ycc = cv2.cvtColor(np.ascontiguousarray(img[:, :, :3]), cv2.COLOR_RGB2YCrCb)
    ycc[:, :, 0] = cv2.equalizeHist(np.ascontiguousarray(ycc[:, :, 0]))
    out[:, :, :3] = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)
    return out


# ---------------------------------------------------------------------------
# running


def run_stats(gf, src, mode="json", extra=(), backend=None, cwd=None, output=None):
    """gpufilter [--backend B] EXTRA --stats=MODE [--output OUTPUT] SRC; returns (Result, parsed)."""
    flag = "--stats" if mode is None else f"--stats={mode}"
    args = ["--backend", backend or gf.backend, *extra, flag, src]
    if output is not None:
        args += ["--output", output]
    r = gf.run(*args, cwd=cwd).ok()
    if mode == "json":
        text = r.out.decode()
        try:
            return r, json.loads(text)
        except ValueError as e:
            raise AssertionError(f"stdout is not one JSON document ({e}):\n{text[:2000]}")
    return r, r.out.decode()


def apply_op(gf, tmp_path, img, args, backend=None, tag="x"):
    return gf.apply(tmp_path, img, extra=list(args), backend=backend, tag=tag)


def grouped_op(gf, groups, request, make, args):
    """The test's input and output from its group's batch run (groups.py):
    (input, output, the member)."""
    member = groups.run(request, make, args)
    img = read_png(member.source)
    return img, read_png(member.outputs[gf.backend], img.shape[2]), member


def grouped_stats(gf, groups, request, make):
    """The test's input and --stats=json document from its group's batch run."""
    img, _, member = grouped_op(gf, groups, request, make, ["--stats=json"])
    return img, member.stats[gf.backend], member.source


def assert_alpha_unchanged(got, img):
    img = as3d(img)
    if img.shape[2] in (2, 4):
        assert_equal_image(got[:, :, -1], img[:, :, -1], what="alpha channel")


# ---------------------------------------------------------------------------
# oracle self-checks


def test_oracle_stats_selfcheck(rng):
    """The histogram-based mean / std equal numpy's float64 .mean() / .std()."""
    for img in (random_image(rng, 257, 131, 1), skewed_image(rng, 300, 200, 1),
                np.full((5, 7, 1), 200, np.uint8), concentrated(rng, 64, 64)):
        e = channel_stats(img, "gray")
        assert math.isclose(e["mean"], float(img.mean(dtype=np.float64)), rel_tol=1e-13)
        assert math.isclose(e["std"], float(img.std(dtype=np.float64)), rel_tol=1e-12, abs_tol=1e-300)
        assert e["min"] == img.min() and e["max"] == img.max()
    # median convention: smallest v with at least half of the pixels <= v
    assert median_of(np.bincount([1, 2, 3, 4], minlength=256)) == 2
    assert median_of(np.bincount([7], minlength=256)) == 7
    assert median_of(np.bincount([0, 255], minlength=256)) == 0
    assert median_of(np.bincount([0, 9, 9], minlength=256)) == 9


def test_oracle_luminance_matches_opencv(rng):
    """The integer luma formula is the Y of OpenCV's RGB2YCrCb (RGB2GRAY
    uses other fixed-point weights in OpenCV 4/5 and differs by 1 at times)."""
    img = random_image(rng, 300, 200, 3)
    assert np.array_equal(luminance(img), cv2.cvtColor(img, cv2.COLOR_RGB2YCrCb)[:, :, 0])


def test_oracle_normalize_limits():
    """Strict '>' at the exact boundaries: 100 pixels, 10 each of 50, 60, ..., 140."""
    img = np.repeat(np.arange(50, 150, 10, dtype=np.uint8), 10).reshape(10, 10, 1)
    assert normalize_limits(img, 10, 20) == (60, 120)
    assert normalize_limits(img, 0, 0) == (50, 140)
    assert normalize_limits(img, 9.99, 19.99) == (50, 130)


# ---------------------------------------------------------------------------
# 1. --stats


@pytest.mark.parametrize("name", [p for p, _ in PHOTOS], ids=PHOTO_IDS)
def test_stats_photo(gf, tmp_path, name):
    src, img = photo_png(tmp_path, name)
    _, got = run_stats(gf, src)
    assert_stats(got, expected_stats(img, src))


STATS_SIZES = [(1, 1), (1, 7), (7, 1), (257, 131)]


def stats_input(rng, kind, size, channels):
    w, h = size
    return (random_image if kind == "uniform" else skewed_image)(rng, w, h, channels)


# the tests of a grouped function are one batch run (groups.py)
@pytest.mark.batch_group("all")
@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
@pytest.mark.parametrize("size", STATS_SIZES, ids=[f"{w}x{h}" for w, h in STATS_SIZES])
@pytest.mark.parametrize("kind", ["uniform", "skewed"])
def test_stats_random(gf, groups, request, kind, size, channels):
    img, got, src = grouped_stats(gf, groups, request, stats_input)
    assert_stats(got, expected_stats(img, src))


SPECIAL = ["zeros", "all255", "const", "near-const", "one-hot", "two-valued",
           "gray-alpha-opaque", "rgba-transparent"]


def special_image(rng, kind, channels=1, w=257, h=131):
    if kind == "zeros":
        return np.zeros((h, w, channels), np.uint8)
    if kind == "all255":
        return np.full((h, w, channels), 255, np.uint8)
    if kind == "const":
        return np.full((h, w, channels), rng.integers(1, 255), np.uint8)
    if kind == "near-const":
        # mean^2 >> variance: catches E[x^2] - E[x]^2 in floating point
        img = np.full((h, w, channels), 200, np.uint8)
        img[rng.integers(h), rng.integers(w)] = 201
        return img
    if kind == "one-hot":
        img = np.zeros((h, w, channels), np.uint8)
        img[rng.integers(h), rng.integers(w)] = 255
        return img
    if kind == "two-valued":
        img = np.where(rng.random((h, w, channels)) < 0.5, 10, 250).astype(np.uint8)
        return img
    if kind == "gray-alpha-opaque":
        img = random_image(rng, w, h, 2)
        img[:, :, 1] = 255
        return img
    if kind == "rgba-transparent":
        img = random_image(rng, w, h, 4)
        img[:, :, 3] = 0
        return img
    raise ValueError(kind)


@pytest.mark.batch_group("all")
@pytest.mark.parametrize("kind,channels", [(k, c) for k in SPECIAL for c in CHANNELS
                                           if not (k.startswith("gray-alpha") and c != 2
                                                   or k.startswith("rgba") and c != 4)],
                         ids=lambda v: cid(v) if isinstance(v, int) else v)
def test_stats_special(gf, groups, request, kind, channels):
    img, got, src = grouped_stats(gf, groups, request, special_image)
    assert_stats(got, expected_stats(img, src))


def test_stats_median_even_split(gf, tmp_path):
    """Exactly half the pixels <= 10: the median is 10 (numpy would say 130)."""
    img = np.array([[10, 10, 250, 250]], np.uint8).reshape(1, 4, 1)
    src = write_png(tmp_path / "in.png", img)
    _, got = run_stats(gf, src)
    assert got["channels"][0]["median"] == 10
    assert_stats(got, expected_stats(img, src))


def test_stats_no_output_writes_nothing(gf, rng, tmp_path):
    img = random_image(rng, 33, 17, 3)
    work = tmp_path / "work"
    work.mkdir()
    src = write_png(work / "in.png", img)
    before = {p.name: p.read_bytes() for p in work.iterdir()}
    r, got = run_stats(gf, "in.png", cwd=work)
    assert r.rc == 0
    assert {p.name: p.read_bytes() for p in work.iterdir()} == before, "files were written"
    assert r.err == "", f"unexpected stderr {r.err!r}"
    # "file" is INPUT as given (relative here)
    assert_stats(got, expected_stats(img, "in.png"))
    assert src.exists()


def test_stats_with_output_copies_image(gf, rng, tmp_path):
    """--stats with an OUTPUT: stats on stdout, the image written unchanged."""
    img = random_image(rng, 40, 30, 4)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / "out.png"
    _, got = run_stats(gf, src, output=dst)
    assert_equal_image(read_png(dst, 4), img)
    assert_stats(got, expected_stats(img, src))


def test_stats_output_stdout_goes_to_stderr(gf, rng, tmp_path):
    """With OUTPUT '-', the image is on stdout and the stats on stderr."""
    img = skewed_image(rng, 50, 20, 3)
    src = write_png(tmp_path / "in.png", img)
    r = gf.run("--backend", gf.backend, "--stats=json", "-m", "box3", src, "--output", "-").ok()
    out = read_png(r.out, 3)
    try:
        got = json.loads(r.err)
    except ValueError as e:
        raise AssertionError(f"stderr is not one JSON document ({e}): {r.err[:2000]!r}")
    assert_stats(got, expected_stats(out, src))


def test_stats_stdin(gf, rng, tmp_path):
    """INPUT '-' with no OUTPUT: stats of standard input, "file": "-"."""
    img = random_image(rng, 21, 13, 2)
    data = write_png(tmp_path / "in.png", img).read_bytes()
    r = gf.run("--backend", gf.backend, "--stats=json", "-", stdin=data).ok()
    assert_stats(json.loads(r.out), expected_stats(img, "-"))


def test_stats_describes_final_image_wherever_placed(gf, rng, tmp_path):
    """--stats before the operations still reports the final image."""
    img = skewed_image(rng, 64, 48, 3)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / "out.png"
    r = gf.run("--backend", gf.backend, "--stats=json", "-m", "box3", "--equalize=channels",
               src, "--output", dst).ok()
    final = read_png(dst, 3)
    assert not np.array_equal(final, img)
    assert_stats(json.loads(r.out), expected_stats(final, src))


NUM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@pytest.mark.parametrize("mode", [None, "table"], ids=["default", "table"])
@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
def test_stats_table(gf, rng, tmp_path, mode, channels):
    img = skewed_image(rng, 61, 37, channels)
    src = write_png(tmp_path / "in.png", img)
    _, text = run_stats(gf, src, mode=mode)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    want = expected_stats(img, src)["channels"]
    # a header (the tool also prints a "FILE: WxH, N channels" line above it),
    # then one line per channel, in image order
    assert len(lines) >= 1 + len(want), f"expected a header and {len(want)} lines:\n{text}"
    assert not any(ln.split()[0] in NAMES[channels] for ln in lines[:-len(want)]), \
        f"a channel line above the last {len(want)} lines:\n{text}"
    for line, e in zip(lines[-len(want):], want):
        assert re.search(r"(?<![A-Za-z])" + e["name"] + r"(?![A-Za-z])", line), \
            f"line for {e['name']} does not name it: {line!r}\n{text}"
        nums = [float(x) for x in NUM.findall(line)]
        for k in ("min", "max", "median"):
            assert float(e[k]) in nums, f"{e['name']}: {k} {e[k]} not in {line!r}"
        for k in ("mean", "std"):
            assert any(abs(x - e[k]) <= 0.051 for x in nums), \
                f"{e['name']}: {k} {e[k]:.4f} not in {line!r}"


def test_stats_table_default_is_table(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 9, 9, 3))
    assert run_stats(gf, src, mode=None)[1] == run_stats(gf, src, mode="table")[1]


def banded_image(rng, width, height, channels, low, high):
    """Values in [low + 1, high - 1] except one pixel of `low` and one of
    `high` per channel, at random places (so in any block of the GPU's
    reduction, not the first)."""
    img = rng.integers(low + 1, high, size=(height, width, channels), dtype=np.uint8)
    for c in range(channels):
        for value in (low, high):
            img[rng.integers(height), rng.integers(width), c] = value
    return img


def test_stats_batch_each_image_its_own(gf, rng, tmp_path):
    """--stats over several files on one worker thread (one backend, one
    statistics buffer reused): each file's numbers are its own. Large images
    spread the GPU's reduction over many blocks; the narrow bands change from
    file to file, so a minimum, maximum or sum left over from the file before
    shows."""
    images = [banded_image(rng, 3001, 1999, 4, 3, 250),    # 24 MB: ~90 blocks
              banded_image(rng, 2048, 1536, 1, 60, 150),
              banded_image(rng, 1000, 999, 2, 0, 255),
              banded_image(rng, 4099, 1001, 4, 100, 102),
              banded_image(rng, 257, 131, 1, 7, 9)]
    srcs = [write_png(tmp_path / f"in{k}.png", img) for k, img in enumerate(images)]
    listing = tmp_path / "list.txt"
    listing.write_text("".join(f"{s}\n" for s in srcs))
    r = gf.run("--backend", gf.backend, "--stats=json", "-j", "1", "--files-from", listing).ok()
    text, decoder, got = r.out.decode(), json.JSONDecoder(), {}
    at = 0
    while text[at:].strip():
        at += len(text[at:]) - len(text[at:].lstrip())
        obj, at = decoder.raw_decode(text, at)
        got[obj["file"]] = obj
    assert sorted(got) == sorted(str(s) for s in srcs)
    for src, img in zip(srcs, images):
        assert_stats(got[str(src)], expected_stats(img, src))


# ---------------------------------------------------------------------------
# 2. --equalize


def gray_cases(rng):
    return {
        "camera": photo("camera.png", "L"),
        "text": photo("text.png", "L"),
        "random": random_image(rng, 257, 131, 1),
        "skewed": skewed_image(rng, 200, 150, 1),
        "concentrated": concentrated(rng, 123, 77),
        "two-values": np.where(rng.random((31, 17, 1)) < 0.3, 40, 80).astype(np.uint8),
        "1x1": rng.integers(0, 256, size=(1, 1, 1), dtype=np.uint8),
        "1x7": skewed_image(rng, 7, 1, 1),
        "const": np.full((19, 23, 1), rng.integers(0, 256), np.uint8),
        "zeros": np.zeros((8, 8, 1), np.uint8),
        "all255": np.full((8, 8, 1), 255, np.uint8),
    }


GRAY_CASES = ["camera", "text", "random", "skewed", "concentrated", "two-values", "1x1", "1x7",
              "const", "zeros", "all255"]


@pytest.mark.parametrize("flag", [pytest.param(f, marks=pytest.mark.batch_group(f)) for f in
                                  ["--equalize=channels", "--equalize", "--equalize=luminance"]])
@pytest.mark.parametrize("case", GRAY_CASES)
def test_equalize_gray_exact(gf, groups, request, case, flag):
    """Gray: both modes are exactly cv2.equalizeHist."""
    img, got, _ = grouped_op(gf, groups, request, lambda rng, case, **_: gray_cases(rng)[case],
                             [flag])
    assert_equal_image(got, expect_equalize_channels(img), what=f"{flag} vs cv2.equalizeHist")
    if case in ("const", "zeros", "all255", "1x1"):
        assert_equal_image(got, img, what="constant image unchanged")


def test_equalize_gray_large_exact(gf, rng, tmp_path):
    """4500 x 4000 (> 2^24 pixels: float precision of the LUT arithmetic)."""
    img = skewed_image(rng, 4500, 4000, 1)
    got = apply_op(gf, tmp_path, img, ["--equalize=channels"])
    assert_equal_image(got, expect_equalize_channels(img), what="cv2.equalizeHist, 18M pixels")


@pytest.mark.parametrize("flag", ["--equalize=channels", "--equalize"])
def test_equalize_gray_alpha(gf, rng, tmp_path, flag):
    img = skewed_image(rng, 257, 131, 2)
    got = apply_op(gf, tmp_path, img, [flag])
    assert got.shape == img.shape
    assert_equal_image(got, expect_equalize_channels(img), what=f"{flag} on gray+alpha")
    assert_alpha_unchanged(got, img)


def colour_cases(rng, channels):
    """name -> image of 3 or 4 channels (alpha random)."""
    def with_alpha(rgb):
        if channels == 3:
            return np.ascontiguousarray(rgb)
        a = rng.integers(0, 256, size=rgb.shape[:2] + (1,), dtype=np.uint8)
        return np.concatenate([rgb, a], axis=2)
    cases = {p.split(".")[0]: with_alpha(photo(p, "RGB")) for p in RGB_PHOTOS}
    cases["random"] = random_image(rng, 257, 131, channels)
    cases["skewed"] = skewed_image(rng, 257, 131, channels)
    cases["lowcontrast"] = low_contrast(rng, 100, 60, channels)
    cases["1x1"] = random_image(rng, 1, 1, channels)
    return cases


COLOUR_CASES = [p.split(".")[0] for p in RGB_PHOTOS] + ["random", "skewed", "lowcontrast", "1x1"]


def colour_input(rng, case, channels, **_):
    return colour_cases(rng, channels)[case]


@pytest.mark.batch_group("all")
@pytest.mark.parametrize("channels", [3, 4], ids=cid)
@pytest.mark.parametrize("case", COLOUR_CASES)
def test_equalize_channels_colour(gf, groups, request, case, channels):
    img, got, _ = grouped_op(gf, groups, request, colour_input, ["--equalize=channels"])
    assert_equal_image(got, expect_equalize_channels(img), what="per-channel cv2.equalizeHist")
    assert_alpha_unchanged(got, img)


def test_equalize_channels_horse_rgba(gf, tmp_path):
    img = photo("horse.png", "RGBA")
    got = apply_op(gf, tmp_path, img, ["--equalize=channels"])
    assert_equal_image(got, expect_equalize_channels(img), what="per-channel cv2.equalizeHist")
    assert_alpha_unchanged(got, img)


@pytest.mark.parametrize("flag", [pytest.param(f, marks=pytest.mark.batch_group(f))
                                  for f in ["--equalize", "--equalize=luminance"]])
@pytest.mark.parametrize("channels", [3, 4], ids=cid)
@pytest.mark.parametrize("case", COLOUR_CASES)
def test_equalize_luminance_colour(gf, groups, request, case, channels, flag):
    img, got, _ = grouped_op(gf, groups, request, colour_input, [flag])
    assert_close(got, expect_equalize_luminance(img), what="vs OpenCV YCrCb equalization",
                 max_diff=2, fraction=1.0)
    assert_alpha_unchanged(got, img)


def test_equalize_luminance_horse_rgba(gf, tmp_path):
    img = photo("horse.png", "RGBA")
    got = apply_op(gf, tmp_path, img, ["--equalize"])
    assert_close(got, expect_equalize_luminance(img), what="vs OpenCV YCrCb equalization",
                 max_diff=2, fraction=1.0)
    assert_alpha_unchanged(got, img)


def test_equalize_luminance_default_is_luminance(gf, rng, tmp_path):
    img = skewed_image(rng, 80, 60, 3)
    a = apply_op(gf, tmp_path, img, ["--equalize"], tag="a")
    b = apply_op(gf, tmp_path, img, ["--equalize=luminance"], tag="b")
    assert_equal_image(a, b, what="--equalize vs --equalize=luminance")
    c = apply_op(gf, tmp_path, img, ["--equalize=channels"], tag="c")
    assert not np.array_equal(a, c), "luminance and channels modes gave the same image"


@pytest.mark.parametrize("flag", ["--equalize", "--equalize=channels"])
@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
def test_equalize_constant_unchanged(gf, rng, tmp_path, channels, flag):
    """A constant colour (each channel its own value) is returned unchanged.
    (44, 187, 192) is one the YCrCb round trip alone would turn into
    (44, 187, 193); so are about 3 colours in 4."""
    img = np.empty((13, 29, channels), np.uint8)
    img[:] = rng.integers(0, 256, size=channels, dtype=np.uint8)
    if channels >= 3:
        img[:7, :, :3] = (44, 187, 192)  # two constant images in one (run twice below)
        img[7:, :, :3] = img[7, 0, :3]
    if channels in (2, 4):
        img[:, :, -1] = rng.integers(0, 256, size=(13, 29))
    parts = [img] if channels < 3 else [img[:7], img[7:]]
    for k, part in enumerate(parts):
        part = np.ascontiguousarray(part)
        got = apply_op(gf, tmp_path, part, [flag], tag=str(k))
        assert_equal_image(got, part, what=f"constant image {tuple(part[0, 0])}")


# ---------------------------------------------------------------------------
# 3. --normalize


NORMALIZE = [(None, 2.0, 1.0), ("0,0", 0.0, 0.0), ("0.5,0.5", 0.5, 0.5), ("2,1", 2.0, 1.0),
             ("10,20", 10.0, 20.0), ("49,50", 49.0, 50.0), ("0,99.5", 0.0, 99.5),
             ("33.3,0", 33.3, 0.0)]
NORM_IDS = ["default" if s is None else s for s, _, _ in NORMALIZE]


def norm_flag(spec):
    return "--normalize" if spec is None else f"--normalize={spec}"


def normalize_cases(rng):
    return {
        **{p.split(".")[0]: (lambda p=p, m=m: photo(p, m)) for p, m in PHOTOS},
        "random-c1": lambda: random_image(rng, 257, 131, 1),
        "skewed-c1": lambda: skewed_image(rng, 257, 131, 1),
        "skewed-c2": lambda: skewed_image(rng, 101, 77, 2),
        "skewed-c3": lambda: skewed_image(rng, 257, 131, 3),
        "skewed-c4": lambda: skewed_image(rng, 131, 257, 4),
        "lowcontrast-c1": lambda: low_contrast(rng, 120, 80, 1),
        "lowcontrast-c3": lambda: low_contrast(rng, 120, 80, 3),
        "lowcontrast-c4": lambda: low_contrast(rng, 120, 80, 4),
        "1x7-c3": lambda: random_image(rng, 1, 7, 3),
    }


NORM_CASES = PHOTO_IDS + ["random-c1", "skewed-c1", "skewed-c2", "skewed-c3", "skewed-c4",
                          "lowcontrast-c1", "lowcontrast-c3", "lowcontrast-c4", "1x7-c3"]


def normalize_input(rng, case, **_):
    return as3d(normalize_cases(rng)[case]())


# a group: one batch run a --normalize value (groups.py)
@pytest.mark.parametrize("spec,black,white", [
    pytest.param(*n, id=i, marks=pytest.mark.batch_group(i))
    for n, i in zip(NORMALIZE, NORM_IDS)])
@pytest.mark.parametrize("case", NORM_CASES)
def test_normalize(gf, groups, request, case, spec, black, white):
    member = groups.run(request, normalize_input, [norm_flag(spec)])
    img = read_png(member.source)
    got = read_png(member.outputs[gf.backend])
    lo, hi = normalize_limits(img, black, white)
    assert_equal_image(got, stretch(img, lo, hi), what=f"normalize lo={lo} hi={hi}")
    assert_alpha_unchanged(got, img)


@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
def test_normalize_low_contrast_stretches(gf, rng, tmp_path, channels):
    """Values 100..140: with 0,0 the result spans 0..255."""
    img = low_contrast(rng, 90, 70, channels)
    got = apply_op(gf, tmp_path, img, ["--normalize=0,0"])
    want = expect_normalize(img, 0, 0)
    assert_equal_image(got, want, what="normalize 0,0")
    nc = n_colour(channels)
    if nc == 1:
        assert got[:, :, 0].min() == 0 and got[:, :, 0].max() == 255
    assert not np.array_equal(got, img)


def test_normalize_exact_boundaries(gf, tmp_path):
    """cdf * 100 == B * N exactly does not count (strict '>'): 100 pixels,
    10 each of 50, 60, ..., 140 -> 10,20 gives lo 60, hi 120."""
    img = np.repeat(np.arange(50, 150, 10, dtype=np.uint8), 10).reshape(10, 10, 1)
    img = img[:, np.random.default_rng(0).permutation(10)]
    got = apply_op(gf, tmp_path, img, ["--normalize=10,20"])
    assert_equal_image(got, stretch(img, 60, 120), what="lo 60 hi 120")


def test_normalize_round_half_even(gf, tmp_path):
    """(x - lo) * 255 / (hi - lo) lands on .5: np.rint rounds to even."""
    vals = np.array([100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110], np.uint8)
    img = np.tile(vals, (3, 1)).reshape(3, 11, 1)
    got = apply_op(gf, tmp_path, img, ["--normalize=0,0"])
    want = stretch(img, 100, 110)  # 25.5 -> 26, 76.5 -> 76, 127.5 -> 128, ...
    assert_equal_image(got, want, what="round half to even")
    got = apply_op(gf, tmp_path, img[:, :3], ["--normalize=0,0"], tag="2")
    assert_equal_image(got, stretch(img[:, :3], 100, 102), what="127.5 -> 128")


IDENTITY = [("const", None), ("const", "0,0"), ("const", "10,20"), ("zeros", None),
            ("all255", "49,50"), ("two-valued", "49,50"), ("two-valued-60", "10,45")]


def identity_input(rng, kind, spec, channels):
    if kind.startswith("two-valued"):
        img = np.full((20, 20, channels), 50, np.uint8)
        share = 200 if kind == "two-valued" else 160  # 50 % or 40 % of the pixels at 200
        img.reshape(400, channels)[rng.permutation(400)[:share], :n_colour(channels)] = 200
    else:
        img = special_image(rng, kind, channels, 33, 21)
    if channels == 4:
        img[:, :, 3] = rng.integers(0, 256, size=img.shape[:2])
    return img


@pytest.mark.parametrize("kind,spec", [
    pytest.param(k, s, id=f"{k}-{s or 'default'}", marks=pytest.mark.batch_group(norm_flag(s)))
    for k, s in IDENTITY])
@pytest.mark.parametrize("channels", [1, 3, 4], ids=cid)
def test_normalize_identity(gf, groups, request, kind, spec, channels):
    """hi <= lo: the image is unchanged."""
    img, got, _ = grouped_op(gf, groups, request, identity_input, [norm_flag(spec)])
    b, w = (2.0, 1.0) if spec is None else (float(x) for x in spec.split(","))
    lo, hi = normalize_limits(img, b, w)
    assert hi <= lo, (lo, hi)
    assert_equal_image(got, img, what=f"identity (lo {lo}, hi {hi})")


def test_normalize_rgba_alpha_ignored(gf, rng, tmp_path):
    """Alpha counts neither for L nor is it changed."""
    img = low_contrast(rng, 64, 64, 4, 90, 160)
    got = apply_op(gf, tmp_path, img, ["--normalize=1,1"])
    assert_equal_image(got, expect_normalize(img, 1, 1))
    assert_alpha_unchanged(got, img)


# ---------------------------------------------------------------------------
# 4. --auto-level


AUTO_CASES = NORM_CASES + ["lowcontrast-c2", "tie"]


def auto_level_input(rng, case):
    if case == "lowcontrast-c2":
        return low_contrast(rng, 77, 55, 2, 30, 200)
    if case == "tie":
        return np.tile(np.arange(100, 111, dtype=np.uint8), (2, 1)).reshape(2, 11, 1)
    return as3d(normalize_cases(rng)[case]())


@pytest.mark.batch_group("all")
@pytest.mark.parametrize("case", AUTO_CASES)
def test_auto_level(gf, groups, request, case):
    img, got, _ = grouped_op(gf, groups, request, auto_level_input, ["--auto-level"])
    assert_equal_image(got, expect_auto_level(img), what="auto-level")
    assert_alpha_unchanged(got, img)


@pytest.mark.parametrize("channels", [2, 4], ids=cid)
def test_auto_level_ignores_alpha(gf, rng, tmp_path, channels):
    """Alpha spans 0..255, colour 100..140: lo 100, hi 140."""
    img = low_contrast(rng, 50, 40, channels)
    got = apply_op(gf, tmp_path, img, ["--auto-level"])
    assert_equal_image(got, stretch(img, 100, 140), what="auto-level over colour only")
    nc = n_colour(channels)
    assert got[:, :, :nc].min() == 0 and got[:, :, :nc].max() == 255


def test_auto_level_channels_together(gf, rng, tmp_path):
    """lo/hi over R, G, B together: R 50..100, G 100..150, B 150..200 -> 50, 200."""
    img = np.empty((30, 40, 3), np.uint8)
    for k, (a, b) in enumerate([(50, 100), (100, 150), (150, 200)]):
        img[:, :, k] = rng.integers(a, b + 1, size=(30, 40))
        img[0, k, k], img[1, k, k] = a, b
    got = apply_op(gf, tmp_path, img, ["--auto-level"])
    assert_equal_image(got, stretch(img, 50, 200))


@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
def test_auto_level_constant_unchanged(gf, rng, tmp_path, channels):
    img = np.full((9, 11, channels), rng.integers(0, 256), np.uint8)
    if channels in (2, 4):
        img[:, :, -1] = rng.integers(0, 256, size=(9, 11))
    got = apply_op(gf, tmp_path, img, ["--auto-level"])
    assert_equal_image(got, img, what="constant image unchanged")


# ---------------------------------------------------------------------------
# 5. composition, in command-line order


def split_steps(args):
    """['-m', 'x', '--equalize', ...] -> [['-m', 'x'], ['--equalize'], ...]"""
    steps, i = [], 0
    while i < len(args):
        if args[i] == "-m":
            steps.append(args[i:i + 2])
            i += 2
        else:
            steps.append([args[i]])
            i += 1
    return steps


PIPELINES = [
    ["-m", "gaussian3", "--equalize=channels", "-m", "sharpen"],
    ["--equalize=channels", "-m", "gaussian3"],
    ["-m", "gaussian3", "--equalize"],
    ["--normalize=1,1", "-m", "box3", "--auto-level"],
    ["--auto-level", "--normalize", "--equalize=channels"],
    ["-m", "emboss", "--normalize=0.5,0.5", "-m", "sharpen", "--equalize"],
]


def composition_input(rng, source, **_):
    if source == "astronaut":
        return photo("astronaut.png", "RGB")
    return skewed_image(rng, 97, 61, int(source[-1]))


# a pipeline's tests are one batch run, and one a step after it (groups.py)
@pytest.mark.parametrize("pipeline", [
    pytest.param(p, id=" ".join(p), marks=pytest.mark.batch_group(" ".join(p))) for p in PIPELINES])
@pytest.mark.parametrize("source", ["astronaut", "skewed-c4", "skewed-c1"])
def test_composition(gf, groups, request, source, pipeline):
    img, composed, member = grouped_op(gf, groups, request, composition_input,
                                       [*pipeline, "--stats=json"])
    # the same, one operation per run
    for k, step in enumerate(split_steps(pipeline)):
        last = groups.run(request, composition_input, step, tag=f"-step{k}",
                          chain=f"-step{k - 1}" if k else None)
    stepwise = read_png(last.outputs[gf.backend], img.shape[2])
    assert_equal_image(composed, stepwise, what="composed run vs one step per run")
    assert_stats(member.stats[gf.backend], expected_stats(composed, member.source))


def test_composition_order_matters(gf, rng, tmp_path):
    img = skewed_image(rng, 80, 60, 3)
    a = apply_op(gf, tmp_path, img, ["-m", "gaussian3", "--equalize=channels"], tag="a")
    b = apply_op(gf, tmp_path, img, ["--equalize=channels", "-m", "gaussian3"], tag="b")
    assert not np.array_equal(a, b), "the order of -m and --equalize made no difference"
    assert_equal_image(a, expect_equalize_channels(apply_op(gf, tmp_path, img, ["-m", "gaussian3"],
                                                            tag="g")))


# ---------------------------------------------------------------------------
# 6. CUDA bit-exact against the CPU backend


OPS = {
    "stats": [],
    "equalize-channels": ["--equalize=channels"],
    "equalize-luminance": ["--equalize"],
    "normalize": ["--normalize"],
    "normalize-0.5,0.5": ["--normalize=0.5,0.5"],
    "normalize-10,20": ["--normalize=10,20"],
    "auto-level": ["--auto-level"],
    "pipeline": ["-m", "gaussian3", "--equalize=channels", "-m", "sharpen", "--normalize=1,2"],
}
PARITY_IMAGES = ([f"random-{w}x{h}-c{c}" for (w, h) in [(257, 131), (1000, 1000)] for c in CHANNELS]
                 + [f"skewed-1000x1000-c{c}" for c in CHANNELS] + PHOTO_IDS)


def parity_image(rng, key):
    if key in PHOTO_IDS:
        name, mode = PHOTOS[PHOTO_IDS.index(key)]
        return photo(name, mode)
    kind, size, c = key.split("-")
    w, h = (int(x) for x in size.split("x"))
    return (random_image if kind == "random" else skewed_image)(rng, w, h, int(c[1:]))


def parity_input(rng, image, **_):
    return parity_image(rng, image)


# a group: one batch run an operation and backend (groups.py)
@pytest.mark.cuda_only
@pytest.mark.parametrize("op", [pytest.param(op, marks=pytest.mark.batch_group(op))
                                for op in OPS])
@pytest.mark.parametrize("image", PARITY_IMAGES)
def test_cuda_matches_cpu(groups, request, image, op):
    member = groups.run(request, parity_input, [*OPS[op], "--stats=json"], backends=("cpu", "cuda"))
    channels = read_png(member.source).shape[2]
    outs = {be: read_png(member.outputs[be], channels) for be in ("cpu", "cuda")}
    assert_equal_image(outs["cuda"], outs["cpu"], what=f"{op}: cuda vs cpu")
    stats = member.stats
    assert stats["cuda"] == stats["cpu"], f"{op}: --stats=json differs between cuda and cpu"
    assert_stats(stats["cuda"], expected_stats(outs["cuda"], member.source))


@pytest.mark.cuda_only
@pytest.mark.skipif(os.environ.get("GPUFILTER_BIG") != "1", reason="set GPUFILTER_BIG=1")
def test_cuda_stats_big(gf, rng, tmp_path):
    """16384 x 16384 gray (2^28 pixels: sums overflow 32 bits) on the GPU."""
    side = 16384
    tile = skewed_image(rng, 256, 256, 1)[:, :, 0]
    img = np.tile(tile, (side // 256, side // 256))
    # break the exact 4096-fold repetition of the histogram
    k = 100_000
    img.reshape(-1)[rng.integers(0, img.size, size=k)] = rng.integers(0, 256, size=k, dtype=np.uint8)
    src = tmp_path / "big.tga"
    Image.fromarray(img, "L").save(src, format="TGA")
    want = expected_stats(img, src)
    del img
    r, got = run_stats(gf, src, backend="cuda")
    assert_stats(got, want)


# ---------------------------------------------------------------------------
# 7. bad values


BAD = ["--normalize=abc", "--normalize=-1,1", "--normalize=50,50", "--normalize=2",
       "--normalize=1,2,3", "--normalize=nan,1", "--stats=xml", "--equalize=foo"]
# not listed in the brief, but follow from its rules (B, W numbers, B + W < 100)
BAD_EXTRA = ["--normalize=1,-1", "--normalize=1,nan", "--normalize=60,40", "--normalize=1,",
             "--normalize=,1", "--normalize=1,2x", "--normalize=inf,1", "--normalize=1e2,0",
             "--auto-level=1"]


@pytest.mark.parametrize("with_output", [True, False], ids=["output", "no-output"])
@pytest.mark.parametrize("opt", BAD + BAD_EXTRA)
def test_bad_value(gf, rng, tmp_path, opt, with_output):
    src = write_png(tmp_path / "in.png", random_image(rng, 8, 8, 3))
    dst = tmp_path / "out.png"
    args = ["--backend", gf.backend, opt]
    if not with_output and not opt.startswith("--stats"):
        args.append("--stats")
    args += [src] + (["--output", dst] if with_output else [])
    r = gf.run(*args)
    check_error(r, 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.png"], "an output file was created"


@pytest.mark.parametrize("opt", ["--normalize=0,0", "--normalize=49.99,50", "--normalize=99.9,0",
                                 "--normalize=0,99.9", "--normalize=0.5,0.5", "--stats=table",
                                 "--stats=json", "--equalize=luminance", "--equalize=channels"])
def test_good_value_boundaries(gf, rng, tmp_path, opt):
    src = write_png(tmp_path / "in.png", random_image(rng, 8, 8, 3))
    dst = tmp_path / "out.png"
    gf.run("--backend", gf.backend, opt, src, "--output", dst).ok()
    assert dst.exists()


def test_missing_output_without_stats(gf, rng, tmp_path):
    """OUTPUT may be omitted only with --stats."""
    src = write_png(tmp_path / "in.png", random_image(rng, 8, 8, 3))
    check_error(gf.run("--backend", gf.backend, "--equalize", src), 2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.png"]
