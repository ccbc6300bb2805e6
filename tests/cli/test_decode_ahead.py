"""A JPEG filtered on the cpu backend is decoded on a thread while the
first convolution runs over the rows already there (src/decode_ahead.c):
the output must be the one from the same pixels decoded first (a PNG of
them), for masks of every CPU path, every border, images shorter and
taller than the convolution's units; a file that fails part way must end
as it ends decoded whole; --decode-timeout still holds; and what reads the
whole image first (or is not such a JPEG) is decoded whole."""

import cv2
import numpy as np
import pytest

from gftest import BORDERS, photo

AHEAD = "(beside the filter)"


def photo_jpeg(path, height, width, gray=False, **flags):
    img = photo("astronaut.png")[:, :, ::-1]
    reps = (height // img.shape[0] + 1, width // img.shape[1] + 1, 1)
    big = np.ascontiguousarray(np.tile(img, reps)[:height, :width])
    if gray:
        big = cv2.cvtColor(big, cv2.COLOR_BGR2GRAY)
    params = [cv2.IMWRITE_JPEG_QUALITY, 90]
    for key, value in flags.items():
        params += [getattr(cv2, key), value]
    assert cv2.imwrite(str(path), big, params)
    return path


def decoded(gf, tmp_path, src):
    """The JPEG's pixels as a PNG, decoded whole (no operation: no decode ahead)."""
    out = tmp_path / "decoded.png"
    r = gf.run("--backend", "cpu", "-v", src, out).ok()
    assert AHEAD not in r.err
    return out


def pixels(path):
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert img is not None, path
    return img


def check_same_as_decoded_first(gf, tmp_path, src, args):
    ahead = gf.run("--backend", "cpu", "-v", *args, src, tmp_path / "ahead.png").ok()
    assert AHEAD in ahead.err, ahead.err
    gf.run("--backend", "cpu", *args, decoded(gf, tmp_path, src), tmp_path / "whole.png").ok()
    got, want = pixels(tmp_path / "ahead.png"), pixels(tmp_path / "whole.png")
    assert got.shape == want.shape
    assert np.array_equal(got, want), f"{int((got != want).sum())} values differ"


# one mask of each CPU path: two integer matrices (magnitude), integer
# separable, a running sum, float separable (large), double with a combine
MASKS = ["sobel", "gaussian5", "box:20", "gaussian:sigma=12", "unsharp:sigma=1.5,amount=2"]


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("mask", MASKS)
def test_output_is_the_decoded_images(gf, tmp_path, mask, border):
    src = photo_jpeg(tmp_path / "in.jpg", 301, 203)
    check_same_as_decoded_first(gf, tmp_path, src, ["-m", mask, "-b", border])


# heights: one row, under a unit (16 rows, or the mask's height), a few
# units with a short last one; gray and colour
@pytest.mark.parametrize("height,gray", [(1, False), (9, True), (100, False), (517, True)])
@pytest.mark.parametrize("mask", ["box3", "gaussian:sigma=6"])
def test_heights_around_the_units(gf, tmp_path, height, gray, mask):
    src = photo_jpeg(tmp_path / "in.jpg", height, 77, gray=gray)
    check_same_as_decoded_first(gf, tmp_path, src, ["-m", mask, "-b", "reflect"])


@pytest.mark.parametrize("chain", [["-m", "sobel", "--equalize"],
                                   ["-m", "gaussian5", "-m", "laplacian", "--normalize"],
                                   ["-m", "box:3", "-m", "box:3", "-m", "box:3"]])
def test_chains_after_the_first_convolution(gf, tmp_path, chain):
    src = photo_jpeg(tmp_path / "in.jpg", 640, 480)
    check_same_as_decoded_first(gf, tmp_path, src, chain)


def damaged(tmp_path, src):
    """src with restart markers pushed into the middle of its entropy-coded
    data: libjpeg-turbo stops there ("Corrupt JPEG data")."""
    data = bytearray(src.read_bytes())
    middle = len(data) // 2
    data[middle:middle] = b"\xff\xd0" * 3
    path = tmp_path / "damaged.jpg"
    path.write_bytes(bytes(data))
    return path


def test_a_file_damaged_part_way_ends_as_decoded_whole(gf, tmp_path):
    src = damaged(tmp_path, photo_jpeg(tmp_path / "in.jpg", 900, 700))
    ahead = gf.run("--backend", "cpu", "-m", "sobel", src, tmp_path / "ahead.png")
    whole = gf.run("--backend", "reference", "-m", "sobel", src, tmp_path / "whole.png")
    assert ahead.rc == whole.rc == 1, ahead.describe()
    assert "Corrupt JPEG" in ahead.err
    assert ahead.err == whole.err.replace("whole.png", "ahead.png")
    assert not (tmp_path / "ahead.png").exists()


def test_decode_timeout_holds(gf, tmp_path):
    src = photo_jpeg(tmp_path / "in.jpg", 2400, 1800)
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cpu", "--decode-timeout", "0.001", "-m", "box3", src, out)
    assert r.rc == 1, r.describe()
    assert f"{src}: decoding did not finish within 0.001 s" in r.err
    assert not out.exists()
    r = gf.run("--backend", "cpu", "-v", "--decode-timeout", "0", "-m", "box3", src, out).ok()
    assert AHEAD in r.err


@pytest.mark.parametrize("case", ["progressive", "gray option", "equalize first", "reference",
                                  "png input", "verify"])
def test_what_reads_the_whole_image_first_is_decoded_whole(gf, tmp_path, case):
    flags = {"IMWRITE_JPEG_PROGRESSIVE": 1} if case == "progressive" else {}
    src = photo_jpeg(tmp_path / "in.jpg", 120, 90, **flags)
    args = {"gray option": ["--gray", "-m", "sobel"], "equalize first": ["--equalize", "-m", "sobel"],
            "verify": ["--verify", "-m", "sobel"]}.get(case, ["-m", "sobel"])
    backend = "reference" if case == "reference" else "cpu"
    if case == "png input":
        src = decoded(gf, tmp_path, src)
    r = gf.run("--backend", backend, "-v", *args, src, tmp_path / "out.png").ok()
    assert AHEAD not in r.err
    assert "decode" in r.err
