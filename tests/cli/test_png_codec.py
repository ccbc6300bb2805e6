"""PNG decode and encode (src/png_decode.c, src/png_encode.c): every
colour type and bit depth
decodes to what stb_image 2.27 gives (pngmaker.py computes it from the
sample values, Pillow cross-checks where it reads the file; 16-bit files
keep their samples, written back at 16 bits and read with OpenCV), corrupt data
is refused, and the banded parallel encoder writes files that Pillow
decodes to exactly the pixels, at about the size of one deflate stream."""

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from gftest import as3d, assert_equal_image, read_deep, read_image, write_png
from groups import write_bytes
from pngmaker import DEPTHS, chunk, make_png, png_file
from test_cli import check_error

CASES = [(color, depth, trns) for color, depths in sorted(DEPTHS.items()) for depth in depths
         for trns in (False, True) if not (trns and color in (4, 6))]


def case_id(case):
    color, depth, trns = case
    return f"type{color}-{depth}bit" + ("-trns" if trns else "")


def decode(gf, tmp_path, data, extra=()):
    """gpufilter's decode of a PNG file: an identity run written as PNG; a
    16-bit file's with no operation (written at 16 bits: the 16-bit
    operations are the backends' own tests)."""
    src = tmp_path / "in.png"
    src.write_bytes(data)
    dst = tmp_path / "out.png"
    deep = data[24] == 16
    gf.filter(src, dst, [] if deep else ["identity"], extra=extra)
    if not deep:
        return read_image(dst)
    got = read_deep(dst)
    assert got.dtype == np.uint16
    return got


def random_png(rng, case, size):
    """Random samples, random row filters, IDAT split in 1-3 chunks: (file, samples)."""
    color, depth, trns = case
    return make_png(rng, color, depth, *size, trns=trns, idat_split=int(rng.integers(1, 4)),
                    wide=True)


# the 8-bit files are one batch run, the 16-bit ones another (groups.py)
@pytest.mark.parametrize("case", [
    pytest.param(c, id=case_id(c), marks=pytest.mark.batch_group("16-bit" if c[1] == 16 else "8-bit"))
    for c in CASES])
@pytest.mark.parametrize("size", [(1, 1), (13, 7), (67, 20)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_every_type_and_depth(gf, groups, request, rng, case, size):
    data, want = random_png(rng, case, size)
    deep = case[1] == 16
    member = groups.run(request, lambda rng, case, size: random_png(rng, case, size)[0],
                        [] if deep else ["-m", "identity"], write=write_bytes)
    assert member.source.read_bytes() == data, "the group's file is not this test's"
    got = read_deep(member.outputs[gf.backend]) if deep else read_image(member.outputs[gf.backend])
    assert got.dtype == (np.uint16 if deep else np.uint8)
    assert_equal_image(got, want, case_id(case))


# Over 4 MiB of rows (png_decode.c's UNFILTER_MIN_BYTES), rows are
# unfiltered by several threads as a wavefront: every filter, every bytes
# per pixel from 1 to 8, rows longer and shorter than one step of 2048 bytes.
LARGE = [((0, 8, False), 2400, 1800), ((2, 8, True), 1500, 1000), ((6, 8, False), 1100, 1000),
         ((0, 16, True), 2200, 1000), ((4, 16, False), 300, 3600), ((6, 16, False), 700, 800),
         ((3, 8, True), 2200, 2000)]


@pytest.mark.parametrize("case,width,height", LARGE, ids=lambda v: case_id(v) if isinstance(v, tuple) else v)
def test_large_images_unfilter_on_threads(gf, rng, tmp_path, case, width, height):
    color, depth, trns = case
    data, want = make_png(rng, color, depth, width, height, trns=trns, level=1, wide=True)
    assert_equal_image(decode(gf, tmp_path, data), want, case_id(case))
    assert_equal_image(decode(gf, tmp_path, data, extra=("-j", "1")), want, case_id(case) + " -j 1")


@pytest.mark.parametrize("row", [0, 1, 900, 1799])
def test_large_image_with_a_bad_filter_refused(gf, rng, tmp_path, row):
    """A filter byte of 5 in any row of a threaded unfilter: refused."""
    width, height = 1000, 1800
    line = width * 3 + 1
    raw = bytearray(rng.integers(0, 256, line * height, dtype=np.uint8).tobytes())
    raw[::line] = bytes(rng.integers(0, 5, height, dtype=np.uint8))
    raw[row * line] = 5
    refused(gf, tmp_path, png_file(width, height, 2, 8, zlib.compress(bytes(raw), 1)),
            ["corrupt PNG", "filter"])


@pytest.mark.parametrize("case", [c for c in CASES if c[1] == 8 or c[0] == 3], ids=case_id)
def test_pillow_agrees_with_the_oracle(rng, case):
    """pngmaker's expectation is what Pillow reads (8-bit and palette files)."""
    color, depth, trns = case
    data, want = make_png(rng, color, depth, 21, 9, trns=trns)
    with Image.open(io.BytesIO(data)) as im:
        mode = {3: "RGBA" if trns else "RGB", 0: "LA" if trns else "L",
                2: "RGBA" if trns else "RGB", 4: "LA", 6: "RGBA"}[color]
        got = as3d(np.array(im.convert(mode)))
    assert_equal_image(got, want)


@pytest.mark.parametrize("case", [(0, 1, False), (0, 16, True), (2, 8, True), (2, 16, False),
                                  (3, 2, True), (3, 8, False), (4, 8, False), (6, 16, False)],
                         ids=case_id)
def test_interlaced(gf, rng, tmp_path, case):
    """Adam7 is left to stb_image: the same pixels as the plain file."""
    color, depth, trns = case
    data, want = make_png(rng, color, depth, 29, 19, trns=trns, interlace=True, wide=True)
    assert data[28] == 1
    assert_equal_image(decode(gf, tmp_path, data), want, "interlaced " + case_id(case))


def test_short_palette_trns_and_indices(gf, rng, tmp_path):
    """tRNS shorter than the palette: the rest stays opaque."""
    data, want = make_png(rng, 3, 8, 40, 12, trns=True, palette_size=180, trns_size=7)
    assert (want[:, :, 3] == 255).any() and (want[:, :, 3] != 255).any()
    assert_equal_image(decode(gf, tmp_path, data), want)


@pytest.mark.parametrize("mode", ["1", "L", "LA", "RGB", "RGBA", "I;16", "P1", "P2", "P4", "P8"])
def test_pillow_files(gf, rng, tmp_path, mode):
    """Files Pillow wrote decode to Pillow's pixels (16-bit: every sample)."""
    src = tmp_path / "pil.png"
    if mode == "I;16":
        values = rng.integers(0, 65536, size=(23, 31), dtype=np.uint16)
        Image.fromarray(values).save(src)
        want = as3d(values)
    elif mode.startswith("P"):
        bits = int(mode[1:])
        im = Image.fromarray(rng.integers(0, 1 << bits, size=(23, 31), dtype=np.uint8), "P")
        im.putpalette(rng.integers(0, 256, size=3 << bits, dtype=np.uint8).tobytes())
        im.save(src, bits=bits)
        want = as3d(np.array(im.convert("RGB")))
    else:
        im = Image.fromarray(rng.integers(0, 256, size=(23, 31, 4), dtype=np.uint8), "RGBA")
        im = im.convert(mode)
        im.save(src)
        want = as3d(np.array(im.convert("L") if mode == "1" else im))
    assert_equal_image(decode(gf, tmp_path, src.read_bytes()), want, mode)


def test_extra_inflated_bytes_are_ignored(gf, rng, tmp_path):
    """Data past the last row (stb_image takes it: stb issue #276)."""
    img = rng.integers(0, 256, size=(10, 12, 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(10)) + b"\x00" * 50
    data = png_file(12, 10, 2, 8, zlib.compress(raw))
    assert_equal_image(decode(gf, tmp_path, data), img)


def test_adler32_is_not_checked(gf, rng, tmp_path):
    """stb_image ignores the zlib checksum; so does the decoder."""
    img = rng.integers(0, 256, size=(10, 12, 3), dtype=np.uint8)
    raw = bytearray(zlib.compress(b"".join(b"\x00" + img[y].tobytes() for y in range(10))))
    raw[-1] ^= 0xFF
    assert_equal_image(decode(gf, tmp_path, png_file(12, 10, 2, 8, bytes(raw))), img)


# ---------------------------------------------------------------------------
# corrupt files


def refused(gf, tmp_path, data, tokens):
    src = tmp_path / "bad.png"
    src.write_bytes(data)
    r = gf.run("--backend", gf.backend, "-m", "identity", src, tmp_path / "out.png")
    check_error(r, 1, tokens)
    assert not (tmp_path / "out.png").exists()


ROW = 40 * 3 + 1  # a 40-pixel RGB row and its filter byte


@pytest.mark.parametrize("kind", ["garbage", "short", "bad-filter", "zlib-header", "no-idat",
                                  "cut-idat", "trns-after-idat"])
def test_corrupt_refused(gf, rng, tmp_path, kind):
    raw = b"\x00" * ROW * 30
    if kind == "garbage":  # a valid zlib header, then random bytes
        data = png_file(40, 30, 2, 8, b"\x78\x9c" + rng.integers(0, 256, 400, dtype=np.uint8).tobytes())
        tokens = ["corrupt PNG", "deflate"]
    elif kind == "short":  # a complete stream of 10 rows for 30
        data = png_file(40, 30, 2, 8, zlib.compress(raw[:ROW * 10]))
        tokens = ["corrupt PNG", "not enough pixel data"]
    elif kind == "bad-filter":
        data = png_file(40, 30, 2, 8, zlib.compress(raw[:ROW * 5] + b"\x05" + raw[ROW * 5 + 1:]))
        tokens = ["corrupt PNG", "filter"]
    elif kind == "zlib-header":
        data = png_file(40, 30, 2, 8, b"\x78\x9d" + zlib.compress(raw)[2:])
        tokens = ["corrupt PNG", "zlib header"]
    elif kind == "no-idat":
        data = png_file(40, 30, 2, 8, b"")
        tokens = [("corrupt PNG", "Corrupt PNG")]
    elif kind == "cut-idat":  # the chunk is whole, the stream inside is cut
        data = png_file(40, 30, 2, 8, zlib.compress(bytes(rng.integers(0, 256, ROW * 30, dtype=np.uint8)))[:-900])
        tokens = ["corrupt PNG"]
    else:
        good = png_file(40, 30, 0, 8, zlib.compress(b"\x00" * 41 * 30))
        iend = good.index(b"IEND") - 4
        data = good[:iend] + chunk(b"tRNS", b"\x00\x01") + good[iend:]
        tokens = ["corrupt PNG", "tRNS"]
    refused(gf, tmp_path, data, tokens)


def test_flipped_bytes_never_crash(gf, rng, tmp_path):
    """Damaged IDAT bytes: refused (exit 1) or decoded; never a crash."""
    data, _ = make_png(rng, 2, 8, 40, 30, level=6)
    at = data.index(b"IDAT") + 4
    for trial in range(12):
        bad = bytearray(data)
        for _ in range(3):
            bad[at + 2 + int(rng.integers(0, 60))] ^= int(rng.integers(1, 256))
        src = tmp_path / f"flip{trial}.png"
        src.write_bytes(bytes(bad))
        r = gf.run("--backend", gf.backend, "-m", "identity", src, tmp_path / f"o{trial}.png")
        assert r.rc in (0, 1), r.describe()
        if r.rc == 1:
            check_error(r, 1, [("corrupt PNG", "Corrupt PNG", "cannot decode")])


# ---------------------------------------------------------------------------
# encoding


def noise_and_gradient(rng, width, height, channels):
    """Stripes of noise between gradients: both ends of every filter."""
    y, x = np.mgrid[0:height, 0:width]
    ramp = np.stack([(x * 255 // width + k * (y // 7)) % 256 for k in range(channels)], axis=2)
    noise = rng.integers(0, 256, size=(height, width, channels))
    return np.where(((x // 97) % 3 == 0)[:, :, None], noise, ramp).astype(np.uint8)


def idat_stream(data):
    """The concatenated IDAT data and the number of IDAT chunks."""
    at, stream, count = 8, b"", 0
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        if kind == b"IDAT":
            stream += data[at + 8:at + 8 + length]
            count += 1
        at += 12 + length
    return stream, count


@pytest.mark.parametrize("channels", [3, 4], ids=["rgb", "rgba"])
def test_large_image_parallel_encode(gf, rng, tmp_path, channels):
    """3000x2000: many bands joined into one zlib stream that Pillow and
    zlib decode to the input, and no more than 2% over one stream."""
    img = noise_and_gradient(rng, 3000, 2000, channels)
    src = write_png(tmp_path / "big.png", img)
    dst = tmp_path / "out.png"
    gf.filter(src, dst, ["identity"])
    data = dst.read_bytes()
    assert_equal_image(read_image(dst), img, "parallel PNG encode")
    stream, chunks = idat_stream(data)
    assert chunks > 1
    raw = zlib.decompress(stream)  # one stream, Adler-32 checked
    row = 3000 * channels + 1
    assert len(raw) == row * 2000
    assert set(raw[::row]) <= {0, 1, 2, 3, 4}
    one_stream = len(zlib.compress(raw, 6))
    assert len(stream) < one_stream * 1.02, (len(stream), one_stream)


@pytest.mark.parametrize("level", [0, 1, 3, 9, 12])
def test_png_levels(gf, rng, tmp_path, level):
    """Every --png-level gives the pixels back; 0 stores, 12 is smallest."""
    img = noise_and_gradient(rng, 1200, 900, 3)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / f"out{level}.png"
    gf.filter(src, dst, ["identity"], extra=["--png-level", str(level)])
    assert_equal_image(read_image(dst), img, f"--png-level {level}")
    size = dst.stat().st_size
    if level == 0:
        assert size > img.size
    else:
        assert size < img.size * 0.8


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_encoder_filters_every_row(gf, rng, tmp_path, channels):
    """Small images (one band): the filters chosen are valid and the file
    decodes with Pillow."""
    img = noise_and_gradient(rng, 77, 45, channels)
    dst = tmp_path / "out.png"
    gf.filter(write_png(tmp_path / "in.png", img), dst, ["identity"])
    assert_equal_image(read_image(dst), img)
    raw = zlib.decompress(idat_stream(dst.read_bytes())[0])
    filters = set(raw[::77 * channels + 1])
    assert filters <= {0, 1, 2, 3, 4} and len(filters) > 1
