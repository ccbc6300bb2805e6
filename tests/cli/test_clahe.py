"""--clahe[=CLIP[,COLSxROWS[,MODE]]]: contrast-limited adaptive histogram
equalization, byte for byte OpenCV's cv2.createCLAHE(clip, (cols, rows))
.apply, at 8 and 16 bits; on colour images the luma through
cv2.cvtColor(RGB2YCrCb) and back, or each channel (MODE channels); alpha
never changes. On the reference backend and the one chosen (--backend).

    python3 -m pytest tests/cli/test_clahe.py -q --backend cpu
"""

import cv2
import numpy as np
import pytest

from gftest import as3d, assert_equal_image, read_deep, read_png, write_png
from test_cli import check_error
from test_depth16_ops import random16, write16

GRIDS = [(1, 1), (8, 8), (3, 5), (16, 2)]
CLIPS = [0.5, 2.0, 40.0, 1000.0, 0.0]


@pytest.fixture(params=["reference", "chosen"])
def backend2(request, gf):
    return "reference" if request.param == "reference" else gf.backend


def clahe(plane, clip, grid):
    return cv2.createCLAHE(clipLimit=clip, tileGridSize=grid).apply(np.ascontiguousarray(plane))


def expect(img, clip=40.0, grid=(8, 8), per_channel=False):
    """OpenCV's result: gray (and gray+alpha) channel 0; RGB(A) the Y of
    YCrCb, or each colour channel; alpha as it was."""
    img = as3d(img)
    out = img.copy()
    if img.shape[2] <= 2:
        out[:, :, 0] = clahe(img[:, :, 0], clip, grid)
    elif per_channel:
        for c in range(3):
            out[:, :, c] = clahe(img[:, :, c], clip, grid)
    else:
        ycc = cv2.cvtColor(np.ascontiguousarray(img[:, :, :3]), cv2.COLOR_RGB2YCrCb)
        ycc[:, :, 0] = clahe(ycc[:, :, 0], clip, grid)
        out[:, :, :3] = cv2.cvtColor(ycc, cv2.COLOR_YCrCb2RGB)
    return out


def spec(clip, grid, mode=None):
    s = f"--clahe={clip:g},{grid[0]}x{grid[1]}"
    return s + f",{mode}" if mode else s


def smooth8(rng, w, h, c):
    """Structure CLAHE can act on: a gradient with noise, not uniform noise."""
    yy, xx = np.mgrid[0:h, 0:w]
    base = (xx * 97 // max(w, 1) + yy * 61 // max(h, 1) + 40)[:, :, None]
    noise = rng.integers(-25, 26, size=(h, w, c))
    return np.clip(base + noise, 0, 255).astype(np.uint8)


def run8(gf, tmp_path, img, args, backend, tag="x"):
    got = gf.apply(tmp_path, img, extra=list(args), backend=backend, tag=tag)
    return as3d(got)


def run_deep(gf, tmp_path, img, args, backend, tag="x"):
    src = write16(tmp_path / f"in-{tag}.png", img)
    dst = tmp_path / f"out-{tag}-{backend}.png"
    gf.run("--backend", backend, *args, str(src), str(dst)).ok()
    got = read_deep(dst)
    assert got.dtype == np.uint16
    return as3d(got)


@pytest.mark.reduce(3)
@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_gray8(gf, rng, tmp_path, backend2, clip, grid):
    img = smooth8(rng, 67, 45, 1)
    got = run8(gf, tmp_path, img, [spec(clip, grid)], backend2)
    assert_equal_image(got, expect(img, clip, grid), what=spec(clip, grid))


@pytest.mark.reduce(3)
@pytest.mark.parametrize("clip", [0.5, 2.0, 40.0, 1000.0])
@pytest.mark.parametrize("grid", GRIDS, ids=lambda g: f"{g[0]}x{g[1]}")
def test_gray16(gf, rng, tmp_path, backend2, clip, grid):
    img = random16(rng, 53, 41, 1)
    img[: 20] //= 7  # a darker band: tiles differ
    got = run_deep(gf, tmp_path, img, [spec(clip, grid)], backend2)
    assert_equal_image(got, expect(img, clip, grid), what=spec(clip, grid))


def test_default_is_40_8x8(gf, rng, tmp_path, backend2):
    img = smooth8(rng, 80, 64, 1)
    got = run8(gf, tmp_path, img, ["--clahe"], backend2)
    assert_equal_image(got, expect(img), what="--clahe")
    assert not np.array_equal(got, as3d(img)), "CLAHE changed nothing"


@pytest.mark.parametrize("size", [(5, 3), (1, 1), (1, 9), (8, 8), (64, 17), (130, 7)],
                         ids=lambda s: f"{s[0]}x{s[1]}")
def test_awkward_sizes(gf, rng, tmp_path, backend2, size):
    """Sizes not a multiple of the grid, and smaller than it: OpenCV pads
    with BORDER_REFLECT_101 (both sides once either is not a multiple)."""
    img = smooth8(rng, size[0], size[1], 1)
    for grid in [(8, 8), (3, 5)]:
        got = run8(gf, tmp_path, img, [spec(2, grid)], backend2, tag=f"{grid[0]}")
        assert_equal_image(got, expect(img, 2.0, grid), what=f"{size} {grid}")


@pytest.mark.parametrize("value", [0, 1, 128, 255])
def test_constant(gf, tmp_path, backend2, value):
    img = np.full((24, 32, 1), value, np.uint8)
    for clip in (2.0, 0.0):
        got = run8(gf, tmp_path, img, [spec(clip, (8, 8))], backend2, tag=f"{clip}")
        assert_equal_image(got, expect(img, clip), what=f"constant {value} clip {clip}")


def test_constant16(gf, tmp_path, backend2):
    img = np.full((16, 24, 1), 30000, np.uint16)
    got = run_deep(gf, tmp_path, img, [spec(2, (4, 4))], backend2)
    assert_equal_image(got, expect(img, 2.0, (4, 4)), what="constant 16-bit")


@pytest.mark.parametrize("channels", [2, 3, 4])
@pytest.mark.parametrize("mode", [None, "luminance", "channels"])
def test_colour8(gf, rng, tmp_path, backend2, channels, mode):
    img = smooth8(rng, 61, 38, channels)
    got = run8(gf, tmp_path, img, [spec(3, (4, 3), mode)], backend2)
    want = expect(img, 3.0, (4, 3), per_channel=mode == "channels")
    assert_equal_image(got, want, what=f"c{channels} {mode}")
    if channels in (2, 4):
        assert_equal_image(got[:, :, -1], img[:, :, -1], what="alpha")


@pytest.mark.parametrize("channels", [2, 3, 4])
@pytest.mark.parametrize("mode", [None, "channels"])
def test_colour16(gf, rng, tmp_path, backend2, channels, mode):
    img = random16(rng, 37, 29, channels)
    got = run_deep(gf, tmp_path, img, [spec(2, (3, 2), mode)], backend2)
    want = expect(img, 2.0, (3, 2), per_channel=mode == "channels")
    assert_equal_image(got, want, what=f"c{channels} {mode}")


def test_gray_colour_image_round_trip(gf, tmp_path, backend2):
    """A gray RGB image: the YCrCb round trip is OpenCV's, whatever CLAHE does."""
    img = np.repeat(np.arange(0, 256, dtype=np.uint8).reshape(16, 16, 1), 3, axis=2)
    got = run8(gf, tmp_path, img, ["--clahe"], backend2)
    assert_equal_image(got, expect(img), what="gray RGB")


@pytest.mark.parametrize("mode", [None, "channels"])
def test_large_colour(gf, rng, tmp_path, backend2, mode):
    """Many pixels a tile (the GPU's histograms in several blocks a tile)."""
    img = smooth8(rng, 2000, 1500, 3)
    got = run8(gf, tmp_path, img, [spec(2.5, (8, 6), mode)], backend2)
    assert_equal_image(got, expect(img, 2.5, (8, 6), per_channel=mode == "channels"),
                       what=f"2000x1500 {mode}")


def test_large_gray16(gf, rng, tmp_path, backend2):
    img = random16(rng, 1100, 700, 1)
    img[:300] //= 5
    got = run_deep(gf, tmp_path, img, [spec(3, (5, 3))], backend2)
    assert_equal_image(got, expect(img, 3.0, (5, 3)), what="1100x700 16-bit")


@pytest.mark.cuda_only
@pytest.mark.parametrize("channels", [1, 4])
def test_gpu_in_strips(gf, rng, tmp_path, channels):
    """--gpu-memory under two image buffers: the image stays on the host in
    strips and CLAHE runs there, with the same bytes."""
    img = smooth8(rng, 300, 211, channels)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-v", "--gpu-memory", "100K", "--clahe=2,4x4", str(src),
               str(dst)).ok()
    assert "strips of up to" in r.err, r.err
    assert_equal_image(as3d(read_png(dst)), expect(img, 2.0, (4, 4)), what="in strips")


def test_order_with_masks(gf, rng, tmp_path):
    """Operations run in command-line order: CLAHE of the blurred image."""
    img = smooth8(rng, 40, 30, 1)
    blurred = run8(gf, tmp_path, img, ["-m", "box:radius=1"], gf.backend, tag="blur")
    got = run8(gf, tmp_path, img, ["-m", "box:radius=1", "--clahe=2,4x4"], gf.backend)
    assert_equal_image(got, expect(blurred, 2.0, (4, 4)), what="-m then --clahe")


@pytest.mark.parametrize("arg", ["-1", "nan", "inf", "2,0x8", "2,8x0", "2,257x8", "2,8",
                                 "2,8x8,rgb", "2,8x8,", "x", "2,,channels", "2,8x8,channels,1"])
def test_refused(gf, tmp_path, arg):
    r = gf.run(f"--clahe={arg}", str(tmp_path / "in.png"), str(tmp_path / "out.png"))
    check_error(r, 2, ["--clahe", arg])
