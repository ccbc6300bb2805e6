"""JPEG encoding in strips of 128 rows on threads, joined with restart
markers (src/jpeg_strips.c): the joined file must decode, in every decoder,
to exactly the pixels of its strips encoded one by one; and the bytes must
not depend on the number of threads."""

import io

import numpy as np
import pytest
from PIL import Image

from gftest import photo_with_channels, random_image, write_png

STRIP = 128


def encode(gf, tmp_path, img, quality, name, *extra):
    src = write_png(tmp_path / f"{name}.png", img)
    out = tmp_path / f"{name}.jpg"
    gf.run("--backend", "cpu", "--force", "-m", "identity", "-q", quality, *extra, src, out).ok()
    return out.read_bytes()


def pillow_pixels(data, mode=None):
    im = Image.open(io.BytesIO(data))
    if mode:
        im.draft(mode, im.size)  # the decoder's planes, before colour conversion
        assert im.mode == mode
    return np.asarray(im)


def assert_same_ycbcr(joined, strips, quality):
    """4:2:0: the coefficients are the strips', but the decoder's smooth
    chroma upsampling reads across a strip's edge in the joined file and
    repeats the edge in a strip alone: luma is exact everywhere, chroma
    everywhere but the two rows at each edge."""
    got = pillow_pixels(joined, "YCbCr")
    want = np.concatenate([pillow_pixels(s, "YCbCr") for s in strips], axis=0)
    assert np.array_equal(got[:, :, 0], want[:, :, 0])
    away = np.ones(got.shape[0], bool)
    for edge in range(STRIP, got.shape[0], STRIP):
        away[edge - 1:edge + 1] = False
    assert np.array_equal(got[away, :, 1:], want[away, :, 1:])


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("quality", [50, 92])  # 4:2:0 and 4:4:4 for colour
def test_joined_jpeg_decodes_to_its_strips(gf, tmp_path, rng, channels, quality):
    img = photo_with_channels(rng, channels)[:300, :173]
    joined = encode(gf, tmp_path, img, quality, "whole")
    assert joined.count(b"\xff\xdd") == 1, "one DRI segment"
    restarts = sum(joined.count(bytes([0xFF, 0xD0 + k])) for k in range(8))
    assert restarts == 2, "300 rows: three strips, two restart markers"
    strips = [encode(gf, tmp_path, img[y:y + STRIP], quality, f"strip{y}")
              for y in range(0, img.shape[0], STRIP)]
    if quality <= 90 and channels >= 3:
        assert_same_ycbcr(joined, strips, quality)
        return
    want = np.concatenate([pillow_pixels(s) for s in strips], axis=0)
    assert np.array_equal(pillow_pixels(joined), want)
    # OpenCV's libjpeg and gpufilter's own decoder read it alike
    import cv2
    bgr = cv2.imdecode(np.frombuffer(joined, np.uint8), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(bgr if bgr.ndim == 2 else bgr[:, :, ::-1], want)


def test_joined_bytes_do_not_depend_on_the_threads(gf, tmp_path, rng):
    img = random_image(rng, 640, 1000, 3)
    files = {jobs: encode(gf, tmp_path, img, 92, f"j{jobs}", "-j", jobs) for jobs in (1, 3, 8)}
    assert files[1] == files[3] == files[8]


def test_one_strip_is_a_plain_jpeg(gf, tmp_path, rng):
    data = encode(gf, tmp_path, random_image(rng, 90, STRIP, 3), 92, "small")
    assert b"\xff\xdd" not in data
