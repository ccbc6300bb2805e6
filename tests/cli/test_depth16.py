"""16-bit images end to end: 16-bit PNG (every colour type, tRNS keys,
Adam7) and PNM of maxval over 255 are read at 16 bits and written back at
16 bits as PNG, rounded to 8 bits for JPEG, BMP and TGA; --depth 8|16
converts right after decoding; batches keep each file's depth; damaged
16-bit files are refused as 8-bit ones are.

Oracles: OpenCV (reads and writes 16-bit PNG), pngmaker.py (the samples
it wrote), numpy's arithmetic for the conversions. These runs have no
operation, so they hold on every backend; the 16-bit operations are the
backends' own tests."""

import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image

from gftest import as3d, assert_equal_image, read_deep, read_image, png_depth, write_png
from groups import write_bytes
from pngmaker import chunk, make_png, png_file
from test_cli import check_error, check_truncations_refused

COLOR_NAMES = {0: "gray", 4: "gray+alpha", 2: "rgb", 6: "rgba"}


def down(arr):
    """round(v / 257) in integers: no ties exist."""
    return ((arr.astype(np.uint32) + 128) // 257).astype(np.uint8)


def run_plain(gf, src, dst, extra=()):
    r = gf.run("--backend", gf.backend, *extra, src, dst)
    assert r.rc == 0, r.describe()
    return r


def write_cv2(path, rgb):
    """A 16-bit (or 8-bit) PNG of H x W x C samples in RGB(A) order."""
    arr = as3d(rgb)
    c = arr.shape[2]
    bgr = arr[:, :, 0] if c == 1 else arr[:, :, [2, 1, 0, 3][:c]]
    assert cv2.imwrite(str(path), np.ascontiguousarray(bgr))
    return path


# ---- reading and writing PNG at 16 bits --------------------------------------------


def png16_file(rng, color, size):
    return make_png(rng, color, 16, *size, wide=True)[0]


# one batch run (groups.py)
@pytest.mark.batch_group("all")
@pytest.mark.parametrize("color", [0, 4, 2, 6], ids=lambda c: COLOR_NAMES[c])
@pytest.mark.parametrize("size", [(1, 1), (37, 23), (300, 41)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_png16_round_trip(gf, groups, request, rng, color, size):
    """No operation: every sample comes back, in a 16-bit PNG."""
    data, want = make_png(rng, color, 16, *size, wide=True)
    assert want.dtype == np.uint16
    member = groups.run(request, png16_file, [], write=write_bytes)
    assert member.source.read_bytes() == data, "not this test's file"
    dst = member.outputs[gf.backend]
    assert png_depth(dst) == 16
    got = read_deep(dst)
    assert got.dtype == np.uint16
    assert_equal_image(got, want, COLOR_NAMES[color])


@pytest.mark.parametrize("channels", [1, 3, 4])
def test_png16_from_opencv(gf, rng, tmp_path, channels):
    """Files OpenCV wrote come back as OpenCV reads them, every value of
    the range among them."""
    arr = rng.integers(0, 65536, size=(64, 80, channels), dtype=np.uint16)
    arr.flat[:2] = (0, 65535)
    src = write_cv2(tmp_path / "in.png", arr)
    dst = tmp_path / "out.png"
    run_plain(gf, src, dst)
    got = read_deep(dst)
    assert got.dtype == np.uint16
    assert_equal_image(got, arr)
    back = cv2.imread(str(dst), cv2.IMREAD_UNCHANGED)
    assert back.dtype == np.uint16
    assert np.array_equal(as3d(back), as3d(cv2.imread(str(src), cv2.IMREAD_UNCHANGED)))


@pytest.mark.parametrize("color", [0, 2], ids=lambda c: COLOR_NAMES[c])
def test_png16_trns_key(gf, rng, tmp_path, color):
    """A tRNS key on a 16-bit gray or RGB file: one more channel, alpha 0
    where every sample matches the key exactly, else 65535."""
    data, want = make_png(rng, color, 16, 33, 12, trns=True, wide=True)
    assert ((want[:, :, -1] == 0).any() and (want[:, :, -1] == 65535).any() and
            set(np.unique(want[:, :, -1])) <= {0, 65535})
    src = tmp_path / "in.png"
    src.write_bytes(data)
    run_plain(gf, src, tmp_path / "out.png")
    got = read_deep(tmp_path / "out.png")
    assert got.shape[2] == want.shape[2] == (2 if color == 0 else 4)
    assert_equal_image(got, want, "tRNS key")


def test_png16_key_differing_in_the_low_byte_is_opaque(gf, tmp_path):
    """The key is compared at 16 bits: a sample equal to it in its high
    byte only stays opaque."""
    samples = np.array([[0x1234, 0x1235, 0x1234, 0x12FF]], dtype=np.uint16)
    raw = b"\x00" + samples.astype(">u2").tobytes()
    data = png_file(4, 1, 0, 16, zlib.compress(raw),
                    extra_before=[(b"tRNS", struct.pack(">H", 0x1234))])
    src = tmp_path / "key.png"
    src.write_bytes(data)
    run_plain(gf, src, tmp_path / "out.png")
    got = read_deep(tmp_path / "out.png")
    assert got[0, :, 0].tolist() == samples[0].tolist()
    assert got[0, :, 1].tolist() == [0, 65535, 0, 65535]


@pytest.mark.parametrize("color,trns", [(0, False), (0, True), (4, False), (2, True), (6, False)])
def test_png16_interlaced(gf, rng, tmp_path, color, trns):
    """Adam7 16-bit files (stbi_load_16): the same samples as the plain file."""
    data, want = make_png(rng, color, 16, 29, 19, trns=trns, interlace=True, wide=True)
    assert data[28] == 1
    src = tmp_path / "adam7.png"
    src.write_bytes(data)
    run_plain(gf, src, tmp_path / "out.png")
    got = read_deep(tmp_path / "out.png")
    assert got.dtype == np.uint16
    assert_equal_image(got, want, "Adam7")


def test_8bit_and_palette_png_stay_8bit(gf, rng, tmp_path):
    """8-bit and palette files are written at 8 bits, every byte as read."""
    for name, (color, depth, trns) in {"rgb8": (2, 8, False), "gray4": (0, 4, False),
                                       "pal": (3, 8, True)}.items():
        data, want = make_png(rng, color, depth, 21, 13, trns=trns)
        src = tmp_path / f"{name}.png"
        src.write_bytes(data)
        dst = tmp_path / f"{name}-out.png"
        run_plain(gf, src, dst)
        assert png_depth(dst) == 8, name
        assert_equal_image(read_image(dst), want, name)


def test_verbose_names_16bit(gf, rng, tmp_path):
    arr = rng.integers(0, 65536, size=(9, 11, 3), dtype=np.uint16)
    src = write_cv2(tmp_path / "in.png", arr)
    r = run_plain(gf, src, tmp_path / "out.png", ["-v"])
    assert any("11x9x3 16-bit" in line for line in r.err_lines), r.err
    r = run_plain(gf, src, tmp_path / "out8.png", ["-v", "--depth", "8"])
    assert any("11x9x3 on" in line for line in r.err_lines), r.err
    assert "16-bit" not in r.err


def test_standard_input_and_output(gf, rng, tmp_path):
    arr = rng.integers(0, 65536, size=(7, 5, 4), dtype=np.uint16)
    data = write_cv2(tmp_path / "in.png", arr).read_bytes()
    r = gf.run("--backend", gf.backend, "-", "-", stdin=data)
    assert r.rc == 0, r.describe()
    (tmp_path / "out.png").write_bytes(r.out)
    assert_equal_image(read_deep(tmp_path / "out.png"), arr)


# ---- PNM ------------------------------------------------------------------------------


def pnm16(samples, maxval):
    magic = b"P5" if samples.ndim == 2 else b"P6"
    h, w = samples.shape[:2]
    return b"%s\n%d %d\n%d\n" % (magic, w, h, maxval) + samples.astype(">u2").tobytes()


@pytest.mark.parametrize("maxval", [256, 1000, 65535])
@pytest.mark.parametrize("channels", [1, 3])
def test_pnm16(gf, rng, tmp_path, maxval, channels):
    """maxval over 255: round(v * 65535 / maxval) at 16 bits; 65535 keeps v."""
    shape = (17, 19) if channels == 1 else (17, 19, 3)
    samples = rng.integers(0, maxval + 1, size=shape)
    samples.flat[:2] = (0, maxval)
    src = tmp_path / ("in.pgm" if channels == 1 else "in.ppm")
    src.write_bytes(pnm16(samples, maxval))
    run_plain(gf, src, tmp_path / "out.png")
    got = read_deep(tmp_path / "out.png")
    assert got.dtype == np.uint16
    want = (samples.astype(np.int64) * 65535 + maxval // 2) // maxval
    if maxval == 65535:
        assert np.array_equal(want, samples)
    assert_equal_image(got, as3d(want), f"maxval {maxval}")
    assert got.max() == 65535 and got.min() == 0


# ---- --depth ------------------------------------------------------------------------------


def every_value_16():
    """256 x 256 gray holding each of the 65536 values once."""
    return np.arange(65536, dtype=np.uint16).reshape(256, 256)


def test_depth8_rounds_every_value(gf, tmp_path):
    arr = every_value_16()
    src = write_cv2(tmp_path / "all.png", arr)
    run_plain(gf, src, tmp_path / "out.png", ["--depth", "8"])
    assert png_depth(tmp_path / "out.png") == 8
    got = read_deep(tmp_path / "out.png")[:, :, 0]
    exact = arr / 257.0
    assert np.abs(got - exact).max() < 0.5  # nearest, and no value sits on a tie
    assert np.array_equal(got, down(arr))
    # each 8-bit value takes the 257 values nearest v * 257 (the ends fewer)
    assert np.bincount(got.ravel(), minlength=256)[1:255].tolist() == [257] * 254


def test_depth16_widens_every_value(gf, rng, tmp_path):
    arr = np.arange(256 * 3, dtype=np.uint16).reshape(16, 16, 3) % 256
    arr = arr.astype(np.uint8)
    src = write_png(tmp_path / "in8.png", arr)
    run_plain(gf, src, tmp_path / "out.png", ["--depth", "16"])
    assert png_depth(tmp_path / "out.png") == 16
    got = read_deep(tmp_path / "out.png")
    assert got.dtype == np.uint16
    assert_equal_image(got, arr.astype(np.uint16) * 257, "v * 257")
    # and back: --depth 8 of that gives the 8-bit values
    run_plain(gf, tmp_path / "out.png", tmp_path / "back.png", ["--depth", "8"])
    assert_equal_image(read_deep(tmp_path / "back.png"), arr, "round trip")


def test_depth_keeps_the_same_depth(gf, rng, tmp_path):
    arr = rng.integers(0, 65536, size=(5, 6), dtype=np.uint16)
    src = write_cv2(tmp_path / "in.png", arr)
    run_plain(gf, src, tmp_path / "out.png", ["--depth", "16"])
    assert_equal_image(read_deep(tmp_path / "out.png"), as3d(arr))
    img8 = rng.integers(0, 256, size=(5, 6, 3), dtype=np.uint8)
    run_plain(gf, write_png(tmp_path / "in8.png", img8), tmp_path / "out8.png", ["--depth", "8"])
    assert png_depth(tmp_path / "out8.png") == 8
    assert_equal_image(read_image(tmp_path / "out8.png"), img8)


@pytest.mark.parametrize("value", ["12", "0", "8x", "", "sixteen"])
def test_depth_refuses_other_values(gf, rng, tmp_path, value):
    src = write_png(tmp_path / "in.png", rng.integers(0, 256, size=(3, 3), dtype=np.uint8))
    r = gf.run("--depth", value, src, tmp_path / "out.png")
    check_error(r, 2, ["--depth"])
    assert not (tmp_path / "out.png").exists()


def test_gray_at_16bit(gf, rng, tmp_path):
    """--gray on 16-bit RGB(A): the BT.601 luma of tone.h in 14-bit fixed
    point (within 2 levels of OpenCV's CV_16U RGB2GRAY), alpha kept; with
    --depth 8 the luma is taken at 16 bits, then rounded."""
    arr = rng.integers(0, 65536, size=(20, 30, 4), dtype=np.uint16)
    arr[0, :4, :3] = [[65535] * 3, [0] * 3, [65535, 0, 0], [0, 65535, 0]]
    src = write_cv2(tmp_path / "in.png", arr)
    run_plain(gf, src, tmp_path / "out.png", ["--gray"])
    got = read_deep(tmp_path / "out.png")
    luma = cv2.cvtColor(np.ascontiguousarray(arr[:, :, :3]), cv2.COLOR_RGB2GRAY)
    rgb = arr[:, :, :3].astype(np.int64)
    formula = (4899 * rgb[:, :, 0] + 9617 * rgb[:, :, 1] + 1868 * rgb[:, :, 2] + 8192) >> 14
    assert np.abs(luma.astype(np.int64) - formula).max() <= 2
    assert got.dtype == np.uint16 and got.shape == (20, 30, 2)
    assert got[0, :4, 0].tolist() == [65535, 0, 19596, 38467]
    assert_equal_image(got[:, :, 0], formula, "luma")
    assert_equal_image(got[:, :, 1], arr[:, :, 3], "alpha")
    run_plain(gf, src, tmp_path / "out8.png", ["--gray", "--depth", "8"])
    assert_equal_image(read_deep(tmp_path / "out8.png"),
                       np.dstack([down(formula), down(arr[:, :, 3])]))


# ---- formats of 8 bits a sample ----------------------------------------------------------


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("ext", ["bmp", "tga"])
def test_16bit_to_bmp_tga_rounded(gf, rng, tmp_path, channels, ext):
    """Written as round(v / 257), exactly; no warning."""
    arr = rng.integers(0, 65536, size=(13, 17, channels), dtype=np.uint16)
    src = write_cv2(tmp_path / "in.png", arr)
    dst = tmp_path / f"out.{ext}"
    r = run_plain(gf, src, dst)
    assert r.err == "", r.err
    with Image.open(dst) as im:
        got = as3d(np.array(im))
    want = down(arr)
    if ext == "bmp" and channels == 1:  # BMP stores gray as RGB
        got = got[:, :, :1]
    assert_equal_image(got, want, ext)


@pytest.mark.parametrize("channels", [1, 3])
def test_16bit_to_jpeg_is_the_rounded_image(gf, rng, tmp_path, channels):
    """A 16-bit input's JPEG is byte for byte the JPEG of its 8-bit rounding."""
    arr = rng.integers(0, 65536, size=(40, 56, channels), dtype=np.uint16)
    src = write_cv2(tmp_path / "in16.png", arr)
    narrow = write_png(tmp_path / "in8.png", down(arr))
    r = run_plain(gf, src, tmp_path / "a.jpg")
    assert r.err == "", r.err
    run_plain(gf, narrow, tmp_path / "b.jpg")
    assert (tmp_path / "a.jpg").read_bytes() == (tmp_path / "b.jpg").read_bytes()
    with Image.open(tmp_path / "a.jpg") as im:
        assert np.abs(as3d(np.array(im)).astype(int) - down(arr).astype(int)).mean() < 40


def test_jpeg_at_depth16_does_not_stream(gf, rng, tmp_path):
    """The row-streaming path is 8-bit: --depth 16 takes the whole image."""
    img = np.tile(np.arange(256, dtype=np.uint8)[None, :, None], (200, 2, 3))
    img[:, :, 1] = rng.integers(0, 256, size=(200, 512), dtype=np.uint8)
    src = tmp_path / "in.jpg"
    assert cv2.imwrite(str(src), img)
    env = {"GPUFILTER_STREAM_BAND_ROWS": "16"}
    r = gf.run("--backend", "cpu", "-v", src, tmp_path / "a.jpg", env=env)
    assert r.rc == 0, r.describe()
    assert "streamed" in r.err
    r = gf.run("--backend", "cpu", "-v", "--depth", "16", src, tmp_path / "b.jpg", env=env)
    assert r.rc == 0, r.describe()
    assert "streamed" not in r.err and "512x200x3 16-bit" in r.err
    with Image.open(tmp_path / "b.jpg") as im:  # widened, then rounded back as written
        assert im.mode == "RGB" and im.size == (512, 200)


# ---- batches ------------------------------------------------------------------------------


def test_batch_keeps_each_depth(gf, rng, tmp_path):
    """-o DIR over 16-bit PNG, 16-bit PNM and 8-bit files: each output at
    its input's depth, on several workers."""
    wants = {}
    for i in range(6):
        if i % 3 == 0:
            arr = rng.integers(0, 65536, size=(20 + i, 30, 3), dtype=np.uint16)
            write_cv2(tmp_path / f"f{i}.png", arr)
            wants[f"f{i}.png"] = arr
        elif i % 3 == 1:
            arr = rng.integers(0, 65536, size=(10, 12 + i), dtype=np.uint16)
            (tmp_path / f"f{i}.pgm").write_bytes(pnm16(arr, 65535))
            wants[f"f{i}.pgm"] = as3d(arr)
        else:
            arr = rng.integers(0, 256, size=(9, 8 + i, 4), dtype=np.uint8)
            write_png(tmp_path / f"f{i}.png", arr)
            wants[f"f{i}.png"] = arr
    out = tmp_path / "out"
    r = gf.run("--backend", gf.backend, "-j", "3", "-f", "png", "-o", out,
               *[tmp_path / n for n in wants])
    assert r.rc == 0, r.describe()
    for name, want in wants.items():
        dst = out / (name.rsplit(".", 1)[0] + ".png")
        assert png_depth(dst) == (16 if want.dtype == np.uint16 else 8), name
        got = read_deep(dst)
        assert got.dtype == want.dtype, name
        assert_equal_image(got, want, name)


def test_batch_depth_options(gf, rng, tmp_path):
    """--depth in a batch: 8 rounds 16-bit files, 16 widens 8-bit ones;
    -f bmp rounds 16-bit files as they are written."""
    a = rng.integers(0, 65536, size=(11, 13, 3), dtype=np.uint16)
    b = rng.integers(0, 256, size=(11, 13, 3), dtype=np.uint8)
    write_cv2(tmp_path / "a.png", a)
    write_png(tmp_path / "b.png", b)
    for depth, want_a, want_b in (("8", down(a), b),
                                  ("16", a, b.astype(np.uint16) * 257)):
        out = tmp_path / f"out{depth}"
        r = gf.run("--backend", gf.backend, "--depth", depth, "-o", out,
                   tmp_path / "a.png", tmp_path / "b.png")
        assert r.rc == 0, r.describe()
        assert_equal_image(read_deep(out / "a.png"), want_a, f"a at {depth}")
        assert read_deep(out / "a.png").dtype == want_a.dtype
        assert_equal_image(read_deep(out / "b.png"), want_b, f"b at {depth}")
        assert read_deep(out / "b.png").dtype == want_b.dtype
    out = tmp_path / "bmp"
    r = gf.run("--backend", gf.backend, "-f", "bmp", "-o", out, tmp_path / "a.png")
    assert r.rc == 0, r.describe()
    with Image.open(out / "a.bmp") as im:
        assert_equal_image(as3d(np.array(im)), down(a), "bmp")


# ---- damaged and oversized 16-bit files ---------------------------------------------------


def test_truncated_png16_refused(gf, rng, tmp_path):
    data, _ = make_png(rng, 6, 16, 40, 30, level=6)
    at = data.index(b"IDAT")
    cuts = sorted({20, 40, at + 10, at + 200, len(data) - 20, len(data) - 1})
    check_truncations_refused(gf, tmp_path, data, cuts, "png")


def test_truncated_adam7_png16_refused(gf, rng, tmp_path):
    data, _ = make_png(rng, 2, 16, 40, 30, interlace=True)
    check_truncations_refused(gf, tmp_path, data, [len(data) // 2, len(data) - 13], "png")


@pytest.mark.parametrize("kind", ["short", "bad-filter", "garbage"])
def test_corrupt_png16_refused(gf, rng, tmp_path, kind):
    row = 40 * 3 * 2 + 1
    raw = bytes(rng.integers(0, 256, row * 30, dtype=np.uint8))
    raw = b"".join(b"\x00" + raw[y * row + 1:(y + 1) * row] for y in range(30))
    if kind == "short":
        data, tokens = png_file(40, 30, 2, 16, zlib.compress(raw[:row * 10])), ["not enough"]
    elif kind == "bad-filter":
        bad = raw[:row * 7] + b"\x07" + raw[row * 7 + 1:]
        data, tokens = png_file(40, 30, 2, 16, zlib.compress(bad)), ["filter"]
    else:
        data = png_file(40, 30, 2, 16,
                        b"\x78\x9c" + rng.integers(0, 256, 500, dtype=np.uint8).tobytes())
        tokens = []
    src = tmp_path / "bad.png"
    src.write_bytes(data)
    r = gf.run("--backend", gf.backend, src, tmp_path / "out.png")
    check_error(r, 1, [str(src), ("corrupt PNG", "Corrupt PNG")] + tokens)
    assert not (tmp_path / "out.png").exists()


def test_flipped_bytes_png16_never_crash(gf, rng, tmp_path):
    data, _ = make_png(rng, 4, 16, 40, 30, level=6)
    at = data.index(b"IDAT") + 4
    for trial in range(10):
        bad = bytearray(data)
        for _ in range(3):
            bad[at + 2 + int(rng.integers(0, 80))] ^= int(rng.integers(1, 256))
        src = tmp_path / f"flip{trial}.png"
        src.write_bytes(bytes(bad))
        r = gf.run("--backend", gf.backend, src, tmp_path / f"o{trial}.png")
        assert r.rc in (0, 1), r.describe()


def test_truncated_pnm16_refused(gf, rng, tmp_path):
    data = pnm16(rng.integers(0, 1001, size=(6, 7, 3)), 1000)
    check_truncations_refused(gf, tmp_path, data, [len(data) - 1, len(data) - 84], "ppm")


def test_memory_budget_counts_two_bytes_a_sample(gf, tmp_path):
    """1000 x 1000 RGB: about 15 MB reserved at 8 bits, 24 MB at 16: a
    budget of 20M takes the 8-bit file and refuses the 16-bit one, and the
    8-bit one at --depth 16."""
    flat16 = np.full((1000, 1000, 3), 4000, dtype=np.uint16)
    src16 = write_cv2(tmp_path / "deep.png", flat16)
    src8 = write_png(tmp_path / "flat.png", np.full((1000, 1000, 3), 16, dtype=np.uint8))
    r = gf.run("--backend", gf.backend, "--max-memory", "20M", src8, tmp_path / "a.png")
    assert r.rc == 0, r.describe()
    r = gf.run("--backend", gf.backend, "--max-memory", "20M", src16, tmp_path / "b.png")
    check_error(r, 1, [str(src16), "--max-memory"])
    r = gf.run("--backend", gf.backend, "--max-memory", "30M", src16, tmp_path / "c.png")
    assert r.rc == 0, r.describe()
    assert_equal_image(read_deep(tmp_path / "c.png"), flat16)
    # --depth 16 counts the widened image from the start
    r = gf.run("--backend", gf.backend, "--max-memory", "20M", "--depth", "16", src8,
               tmp_path / "d.png")
    check_error(r, 1, [str(src8), "--max-memory"])
