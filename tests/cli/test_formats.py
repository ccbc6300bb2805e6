"""Image formats: what gpufilter reads (stb_image; PNM by its own decoder) and
writes (stb_image_write), standard input / output, channel counts, writing
onto the input."""

import io
import struct

import cv2
import numpy as np
import pytest
from PIL import Image

from gftest import (IMAGES_DIR, MAGIC, MODES, apply_masks, as3d, assert_close,
                    assert_equal_image, photo, photo_with_channels, random_image,
                    read_deep, read_image, read_png, write_png)
from groups import write_bytes
from test_cli import check_error, check_truncations_refused

CHANNELS = [1, 2, 3, 4]


def cid(c):
    return f"c{c}"


def run_identity(gf, src, dst, extra=()):
    gf.filter(src, dst, ["identity"], extra=extra)
    return read_image(dst)


def run_plain(gf, src, dst, extra=()):
    """No operation: the decoded image written as PNG at its own depth."""
    gf.filter(src, dst, [], extra=extra)
    return read_deep(dst)


def smooth_image(rng, channels, w=96, h=64):
    """A photo crop (for lossy formats), alpha random."""
    img = photo_with_channels(rng, channels)
    y, x = rng.integers(0, 512 - h), rng.integers(0, 512 - w)
    return np.ascontiguousarray(img[y:y + h, x:x + w])


def tga_header(data):
    idlen, cmap, itype = data[0], data[1], data[2]
    w, h = struct.unpack("<HH", data[12:16])
    return {"idlen": idlen, "colormap": cmap, "type": itype, "width": w, "height": h,
            "bpp": data[16]}


# ---------------------------------------------------------------------------
# reading


@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
@pytest.mark.parametrize("masks", [[], ["identity"]], ids=["no-mask", "identity"])
def test_png8_roundtrip(gf, rng, tmp_path, masks, channels):
    """8-bit L / LA / RGB / RGBA in, the same pixels and mode out."""
    img = random_image(rng, 45, 31, channels)
    src = write_png(tmp_path / "in.png", img)
    before = src.read_bytes()
    dst = tmp_path / "out.png"
    gf.filter(src, dst, masks)
    assert_equal_image(read_png(dst, channels), img)
    assert src.read_bytes() == before, "the input was modified"


def png_bit_depth(path):
    data = path.read_bytes()
    assert data[12:16] == b"IHDR"
    return data[24], data[25]  # bit depth, colour type


@pytest.mark.parametrize("channels", [1, 3, 4], ids=cid)
def test_png16_kept(gf, rng, tmp_path, channels):
    """16-bit samples are kept, and written back at 16 bits; --depth 8
    rounds them to round(v / 257)."""
    shape = (29, 37) if channels == 1 else (29, 37, channels)
    arr = rng.integers(0, 65536, size=shape, dtype=np.uint16)
    src = tmp_path / "in16.png"
    assert cv2.imwrite(str(src), arr)  # cv2 stores BGR(A) order
    assert png_bit_depth(src)[0] == 16
    back = cv2.imread(str(src), cv2.IMREAD_UNCHANGED)
    assert back.dtype == np.uint16 and np.array_equal(back, arr)
    want = as3d(arr)
    if channels == 3:
        want = want[:, :, ::-1]
    elif channels == 4:
        want = want[:, :, [2, 1, 0, 3]]
    got = run_plain(gf, src, tmp_path / "out.png")
    assert got.dtype == np.uint16
    assert_equal_image(got, want, "16-bit PNG")
    assert png_bit_depth(tmp_path / "out.png")[0] == 16
    got = run_plain(gf, src, tmp_path / "out8.png", ["--depth", "8"])
    assert got.dtype == np.uint8
    assert_equal_image(got, (want.astype(np.uint32) + 128) // 257, "16-bit PNG at --depth 8")


@pytest.mark.parametrize("kind", ["rgb", "transparent", "4bit"])
def test_palette_png(gf, rng, tmp_path, kind):
    """A palette PNG reads as its RGB (or RGBA with tRNS) conversion."""
    colors = 16 if kind == "4bit" else 200
    idx = rng.integers(0, colors, size=(23, 41), dtype=np.uint8)
    im = Image.frombytes("P", (41, 23), idx.tobytes())
    im.putpalette(rng.integers(0, 256, size=colors * 3, dtype=np.uint8).tobytes())
    src = tmp_path / "pal.png"
    opts = {}
    if kind == "transparent":
        opts["transparency"] = bytes(rng.integers(0, 256, size=colors, dtype=np.uint8))
    if kind == "4bit":
        opts["bits"] = 4
    im.save(src, **opts)
    with Image.open(src) as check:
        assert check.mode == "P"
        want = as3d(np.array(check.convert("RGBA" if kind == "transparent" else "RGB")))
    got = run_identity(gf, src, tmp_path / "out.png")
    assert_equal_image(got, want, f"palette PNG ({kind})")


def test_bilevel_png(gf, rng, tmp_path):
    bits = rng.integers(0, 2, size=(17, 35), dtype=np.uint8) * 255
    src = tmp_path / "bw.png"
    Image.fromarray(bits).convert("1").save(src)
    assert png_bit_depth(src)[0] == 1
    got = run_identity(gf, src, tmp_path / "out.png")
    assert_equal_image(got, as3d(bits), "1-bit PNG")


@pytest.mark.parametrize("kind", ["rgb", "gray", "progressive", "subsampled-420", "hubble"])
def test_jpeg_input(gf, rng, tmp_path, kind):
    """Decoders differ slightly: same shape, mean |diff| < 2 against Pillow."""
    if kind == "hubble":
        src = tmp_path / "h.jpg"
        src.write_bytes((IMAGES_DIR / "hubble_deep_field.jpg").read_bytes())
    else:
        img = photo("astronaut.png", "L" if kind == "gray" else "RGB")
        im = Image.fromarray(img[:, :, 0] if kind == "gray" else img)
        src = tmp_path / "in.jpg"
        opts = {"quality": 90}
        if kind == "progressive":
            opts["progressive"] = True
        if kind == "subsampled-420":
            opts["subsampling"] = 2
        im.save(src, **opts)
    with Image.open(src) as im:
        want = as3d(np.array(im))
    got = run_identity(gf, src, tmp_path / "out.png")
    assert got.shape == want.shape
    mad = np.abs(got.astype(float) - want).mean()
    assert mad < 2.0, f"mean |diff| vs Pillow's decode: {mad:.3f}"


def without_huffman_tables(jpeg):
    """The JPEG with its DHT segments left out, as Motion JPEG frames are
    (the decoder is to take the standard tables)."""
    out, i = bytearray(jpeg[:2]), 2
    while jpeg[i + 1] != 0xDA:  # up to the first scan
        length = struct.unpack(">H", jpeg[i + 2:i + 4])[0]
        if jpeg[i + 1] != 0xC4:
            out += jpeg[i:i + 2 + length]
        i += 2 + length
    assert len(out) < i, "no DHT segment before the first scan"
    return bytes(out + jpeg[i:])


@pytest.mark.parametrize("kind", ["rgb", "gray"])
def test_jpeg_without_huffman_tables(gf, tmp_path, kind):
    """A baseline JPEG that leaves out its (standard) Huffman tables: with
    libjpeg-turbo, decoded as the whole file is; without it, refused with
    the reason (stb_image would read memory it never set), nothing written."""
    img = photo("astronaut.png", "L" if kind == "gray" else "RGB")[:120, :200]
    whole = tmp_path / "whole.jpg"
    Image.fromarray(img[:, :, 0] if kind == "gray" else img).save(whole, quality=85)
    bare = tmp_path / "bare.jpg"
    bare.write_bytes(without_huffman_tables(whole.read_bytes()))
    out = tmp_path / "bare.png"
    r = gf.run("--backend", gf.backend, bare, out)
    if b"libjpeg-turbo" in gf.run("--version").ok().out:
        r.ok()
        assert_equal_image(read_image(out), run_identity(gf, whole, tmp_path / "whole.png"),
                           what="the file without its tables against the whole file")
    else:
        assert r.rc == 1 and r.err_lines == [
            f"gpufilter: {bare}: a scan uses a Huffman table the file does not define; this "
            "build has no libjpeg-turbo, which would take the standard tables"], r.describe()
        assert not out.exists()


@pytest.mark.parametrize("kind", ["rgb", "gray"])
def test_bmp_input(gf, rng, tmp_path, kind):
    img = random_image(rng, 33, 19, 3 if kind == "rgb" else 1)  # odd width: row padding
    src = tmp_path / "in.bmp"
    Image.fromarray(img if kind == "rgb" else img[:, :, 0]).save(src)
    got = run_identity(gf, src, tmp_path / "out.png")
    with Image.open(src) as im:
        want = as3d(np.array(im.convert(MODES[got.shape[2]])))
    assert got.shape[2] in (1, 3)
    assert_equal_image(got, want, f"BMP ({kind})")
    assert_equal_image(got[:, :, :1] if kind == "gray" else got, img)


@pytest.mark.parametrize("kind", ["rgb", "rgba", "gray", "rgb-rle"])
def test_tga_input(gf, rng, tmp_path, kind):
    channels = {"rgb": 3, "rgba": 4, "gray": 1, "rgb-rle": 3}[kind]
    img = random_image(rng, 27, 14, channels)
    if kind == "rgb-rle":  # runs, so RLE packets of both kinds occur
        img[:, 5:15] = img[:, 5:6]
    src = tmp_path / "in.tga"
    opts = {"compression": "tga_rle"} if kind == "rgb-rle" else {}
    Image.fromarray(img if channels > 1 else img[:, :, 0]).save(src, **opts)
    got = run_identity(gf, src, tmp_path / "out.png")
    assert_equal_image(got, img, f"TGA ({kind})")


def test_gif_first_frame(gf, rng, tmp_path):
    frames = []
    pal = rng.integers(0, 256, size=64 * 3, dtype=np.uint8).tobytes()
    for _ in range(3):
        idx = rng.integers(0, 64, size=(21, 34), dtype=np.uint8)
        im = Image.frombytes("P", (34, 21), idx.tobytes())
        im.putpalette(pal)
        frames.append(im)
    src = tmp_path / "anim.gif"
    frames[0].save(src, save_all=True, append_images=frames[1:], duration=50, loop=0)
    with Image.open(src) as im:
        assert im.n_frames == 3
        first = np.array(im.convert("RGB"))
        im.seek(1)
        second = np.array(im.convert("RGB"))
    assert not np.array_equal(first, second)
    got = run_identity(gf, src, tmp_path / "out.png")
    assert got.shape[:2] == (21, 34) and got.shape[2] in (3, 4)
    assert_equal_image(got[:, :, :3], first, "GIF first frame")
    if got.shape[2] == 4:
        assert (got[:, :, 3] == 255).all()


@pytest.mark.parametrize("ext,channels", [("pgm", 1), ("ppm", 3)])
def test_pnm_input(gf, rng, tmp_path, ext, channels):
    img = random_image(rng, 31, 12, channels)
    src = tmp_path / f"in.{ext}"
    Image.fromarray(img if channels > 1 else img[:, :, 0]).save(src)
    assert src.read_bytes()[:2] == (b"P5" if ext == "pgm" else b"P6")
    got = run_identity(gf, src, tmp_path / "out.png")
    assert_equal_image(got, img, ext)


def pnm_bytes(samples, maxval):
    """A binary PGM (2-D samples) or PPM (3-D): 2 bytes a sample, big-endian,
    when maxval is over 255."""
    magic = b"P5" if samples.ndim == 2 else b"P6"
    h, w = samples.shape[:2]
    dtype = ">u2" if maxval > 255 else "u1"
    return b"%s\n%d %d\n%d\n" % (magic, w, h, maxval) + samples.astype(dtype).tobytes()


def scaled_by_maxval(samples, maxval):
    """The oracle: round(v * 255 / maxval) for a maxval up to 255, else
    round(v * 65535 / maxval) at 16 bits, in integers."""
    top, kind = (255, np.uint8) if maxval <= 255 else (65535, np.uint16)
    return ((samples.astype(np.int64) * top + maxval // 2) // maxval).astype(kind)


def pnm_samples(rng, maxval, channels):
    shape = (13, 21) if channels == 1 else (13, 21, 3)
    samples = rng.integers(0, maxval + 1, size=shape)
    samples.flat[0], samples.flat[1] = 0, maxval
    return samples


def pnm_file(rng, maxval, channels):
    return pnm_bytes(pnm_samples(rng, maxval, channels), maxval)


# the PGM files are one batch run, the PPM files another (groups.py)
@pytest.mark.parametrize("maxval", [1, 15, 100, 255, 256, 1000, 4095, 65535])
@pytest.mark.parametrize("channels", [
    pytest.param(1, id="c1", marks=pytest.mark.batch_group("pgm")),
    pytest.param(3, id="c3", marks=pytest.mark.batch_group("ppm"))])
def test_pnm_scaled_by_maxval(gf, groups, request, rng, maxval, channels):
    """Each sample becomes round(v * 255 / maxval), or, for a maxval over
    255, round(v * 65535 / maxval) at 16 bits (stb_image kept their low
    byte and did not scale)."""
    samples = pnm_samples(rng, maxval, channels)
    member = groups.run(request, pnm_file, ["-f", "png"], write=write_bytes,
                        suffix=".pgm" if channels == 1 else ".ppm", out_suffix=".png")
    assert member.source.read_bytes() == pnm_bytes(samples, maxval), "not this test's file"
    got = read_deep(member.outputs[gf.backend])
    want = as3d(scaled_by_maxval(samples, maxval))
    assert got.dtype == want.dtype
    assert_equal_image(got, want, f"maxval {maxval}")


def test_pnm_16bit_values_of_the_issue(gf, tmp_path):
    src = tmp_path / "deep.pgm"
    src.write_bytes(pnm_bytes(np.array([[0, 1000, 30000, 65535]]), 65535))
    got = run_plain(gf, src, tmp_path / "out.png")
    assert got.dtype == np.uint16 and got[0, :, 0].tolist() == [0, 1000, 30000, 65535]
    got = run_plain(gf, src, tmp_path / "out8.png", ["--depth", "8"])
    assert got.dtype == np.uint8 and got[0, :, 0].tolist() == [0, 4, 117, 255]


def test_truncated_pnm_in_a_batch(gf, rng, tmp_path):
    """A PPM cut short after another file in a batch: refused by name (it
    came out of stb_image with the previous file's pixels), no output for it,
    the other file's output written."""
    img = random_image(rng, 451, 300, 3)
    previous = write_png(tmp_path / "previous.png", img)
    header = b"P6\n451 300\n255\n"
    cut = tmp_path / "trunc_451x300.ppm"
    cut.write_bytes(header + rng.integers(0, 256, 45 - len(header), dtype=np.uint8).tobytes())
    out = tmp_path / "out"
    r = gf.run("--backend", gf.backend, "-j", "1", "-f", "bmp", "-o", out, previous, cut)
    assert r.rc == 1, r.describe()
    assert any(line.startswith("gpufilter: ") and str(cut) in line and "truncated" in line
               for line in r.err_lines), r.err
    assert sorted(p.name for p in out.iterdir()) == ["previous.bmp"]
    with Image.open(out / "previous.bmp") as im:
        assert_equal_image(as3d(np.array(im.convert("RGB"))), img, "the PNG's output")


@pytest.mark.parametrize("maxval", [15, 255, 65535])
def test_pnm_cut_anywhere_is_refused(gf, rng, tmp_path, maxval):
    """Every cut of a PNM's samples is refused as truncated; trailing bytes
    after them are allowed."""
    samples = rng.integers(0, maxval + 1, size=(5, 7, 3))
    data = pnm_bytes(samples, maxval)
    header_size = len(data) - samples.size * (2 if maxval > 255 else 1)
    whole = tmp_path / "whole.ppm"
    whole.write_bytes(data + b"\n# trailing bytes\n")
    got = run_plain(gf, whole, tmp_path / "whole.png")
    assert_equal_image(got, scaled_by_maxval(samples, maxval), "whole PPM")
    cuts = sorted({header_size, header_size + 1, len(data) // 2, len(data) - 1})
    check_truncations_refused(gf, tmp_path, data, cuts, "ppm")


# ---------------------------------------------------------------------------
# writing


@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
def test_png_keeps_channels(gf, rng, tmp_path, channels):
    img = random_image(rng, 40, 30, channels)
    src = write_png(tmp_path / "in.png", img)
    gf.filter(src, tmp_path / "out.png", ["box3"], "wrap")
    got = read_png(tmp_path / "out.png", channels)  # mode L / LA / RGB / RGBA
    assert_close(got, apply_masks(img, ["box3"], "wrap"))


def check_written(path_or_bytes, fmt, img):
    """The bytes are the format asked for and decode to img (lossy: close)."""
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else path_or_bytes.read_bytes()
    h, w, c = img.shape
    if fmt == "tga":
        hd = tga_header(data)
        assert hd["colormap"] == 0 and hd["type"] in (2, 3, 10, 11), hd
        assert (hd["width"], hd["height"]) == (w, h), hd
        assert hd["bpp"] == 8 * c, hd
        assert hd["type"] in ((3, 11) if c <= 2 else (2, 10)), hd
    else:
        assert data.startswith(MAGIC[fmt]), f"{fmt}: file starts with {data[:8]!r}"
    if fmt == "tga" and c == 2:
        return  # Pillow does not read gray+alpha TGA; header checked above
    with Image.open(io.BytesIO(data)) as im:
        assert im.size == (w, h)
        dec = as3d(np.array(im))
    gray = img[:, :, :1] if c <= 2 else None
    color = img[:, :, :3] if c >= 3 else np.repeat(gray, 3, axis=2)
    if fmt in ("png", "tga"):
        assert_equal_image(dec, img, f"{fmt} output")
    elif fmt == "bmp":
        assert dec.shape[2] >= 3
        assert_equal_image(dec[:, :, :3], color, "bmp colour")
        if c == 4 and dec.shape[2] == 4:
            assert_equal_image(dec[:, :, 3], img[:, :, 3], "bmp alpha")
    else:  # jpeg
        lum = np.asarray(Image.open(io.BytesIO(data)).convert("L"), dtype=float)
        ref = gray[:, :, 0] if gray is not None else np.asarray(
            Image.fromarray(np.ascontiguousarray(img[:, :, :3])).convert("L"), dtype=float)
        mad = np.abs(lum - ref).mean()
        assert mad < 3.0, f"jpeg output: mean |luma diff| {mad:.2f}"


@pytest.mark.reduce(3)
@pytest.mark.parametrize("channels", CHANNELS, ids=cid)
@pytest.mark.parametrize("ext", ["png", "jpg", "jpeg", "bmp", "tga"])
def test_output_by_extension(gf, rng, tmp_path, ext, channels):
    img = smooth_image(rng, channels)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / f"out.{ext}"
    gf.filter(src, dst, [], extra=["-q", "95"] if ext in ("jpg", "jpeg") else [])
    check_written(dst, "jpg" if ext == "jpeg" else ext, img)


@pytest.mark.parametrize("fmt", ["png", "jpg", "jpeg", "bmp", "tga"])
@pytest.mark.parametrize("name", ["out.img", "out.png", "noextension"])
def test_format_option(gf, rng, tmp_path, fmt, name):
    """--format wins over the output's extension; -f is the short form."""
    img = smooth_image(rng, 3)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / name
    flag = "-f" if name == "noextension" else "--format"
    gf.filter(src, dst, [], extra=[flag, fmt, "-q", "95"])
    check_written(dst, "jpg" if fmt == "jpeg" else fmt, img)


def test_uppercase_extension(gf, rng, tmp_path):
    img = smooth_image(rng, 3)
    src = write_png(tmp_path / "in.png", img)
    for ext, magic in [("JPG", MAGIC["jpg"]), ("BMP", MAGIC["bmp"]), ("PNG", MAGIC["png"])]:
        dst = tmp_path / f"out.{ext}"
        gf.filter(src, dst, [])
        assert dst.read_bytes().startswith(magic), ext


def test_quality_changes_jpeg_size(gf, rng, tmp_path):
    img = photo_with_channels(rng, 3)
    src = write_png(tmp_path / "in.png", img)
    sizes = {}
    for q in (1, 10, 50, 95, 100):
        dst = tmp_path / f"q{q}.jpg"
        gf.filter(src, dst, [], extra=["-q", str(q)])
        assert dst.read_bytes().startswith(MAGIC["jpg"])
        sizes[q] = dst.stat().st_size
    assert sizes[1] < sizes[10] < sizes[50] < sizes[95] < sizes[100], sizes
    assert sizes[10] * 3 < sizes[95], sizes
    with Image.open(tmp_path / "q95.jpg") as im:
        mad = np.abs(np.asarray(im, dtype=float) - img).mean()
    assert mad < 3.0, f"q95 mean |diff| {mad:.2f}"
    # --quality is the long form of -q
    gf.filter(src, tmp_path / "long.jpg", [], extra=["--quality", "10"])
    assert (tmp_path / "long.jpg").read_bytes() == (tmp_path / "q10.jpg").read_bytes()


# ---------------------------------------------------------------------------
# standard input and output


@pytest.mark.parametrize("channels", [1, 4], ids=cid)
def test_stdin_stdout_png(gf, rng, tmp_path, channels):
    img = random_image(rng, 57, 33, channels)
    src = write_png(tmp_path / "in.png", img)
    dst = tmp_path / "file.png"
    gf.filter(src, dst, ["box3"])
    r = gf.run("--backend", gf.backend, "-m", "box3", "-", "-", stdin=src.read_bytes()).ok()
    assert r.out.startswith(MAGIC["png"]), "stdout is not a PNG"
    assert_equal_image(read_png(r.out, channels), read_png(dst), "stdin/stdout vs files")
    assert r.out == dst.read_bytes()
    assert_close(read_png(r.out), apply_masks(img, ["box3"]))


def test_stdin_to_file_and_file_to_stdout(gf, rng, tmp_path):
    img = random_image(rng, 20, 20, 3)
    src = write_png(tmp_path / "in.png", img)
    want = apply_masks(img, ["sharpen"], "mirror")
    dst = tmp_path / "from-stdin.png"
    gf.run("--backend", gf.backend, "-m", "sharpen", "-b", "mirror", "-", dst,
           stdin=src.read_bytes()).ok()
    assert_close(read_png(dst), want)
    r = gf.run("--backend", gf.backend, "-m", "sharpen", "-b", "mirror", src, "-").ok()
    assert_close(read_png(r.out), want)


def test_stdin_jpeg(gf, rng, tmp_path):
    img = smooth_image(rng, 3)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=92)
    with Image.open(io.BytesIO(buf.getvalue())) as im:
        want = np.asarray(im, dtype=float)
    r = gf.run("--backend", gf.backend, "-", "-", stdin=buf.getvalue()).ok()
    got = read_png(r.out, 3)
    assert np.abs(got - want).mean() < 2.0


@pytest.mark.parametrize("fmt", ["jpg", "bmp", "tga", "png"])
def test_stdout_format(gf, rng, tmp_path, fmt):
    img = smooth_image(rng, 3)
    src = write_png(tmp_path / "in.png", img)
    r = gf.run("--backend", gf.backend, "-f", fmt, "-q", "95", src, "-").ok()
    check_written(r.out, fmt, img)


def test_verbose_keeps_stdout_clean(gf, rng, tmp_path):
    img = random_image(rng, 30, 20, 3)
    src = write_png(tmp_path / "in.png", img)
    quiet = gf.run("--backend", gf.backend, "-m", "gaussian3", src, "-").ok()
    loud = gf.run("--backend", gf.backend, "-v", "-m", "gaussian3", src, "-").ok()
    assert loud.err.strip(), "-v printed nothing on stderr"
    assert loud.out == quiet.out


# ---------------------------------------------------------------------------
# writing onto the input


@pytest.mark.parametrize("channels", [1, 3, 4], ids=cid)
def test_output_onto_input(gf, rng, tmp_path, channels):
    img = random_image(rng, 50, 35, channels)
    path = write_png(tmp_path / "same.png", img)
    gf.filter(path, path, ["gaussian5", "sobel"], "reflect")
    assert_close(read_png(path, channels), apply_masks(img, ["gaussian5", "sobel"], "reflect"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.png"], "stray files left"


def test_output_onto_input_jpeg(gf, rng, tmp_path):
    img = smooth_image(rng, 3)
    path = tmp_path / "same.jpg"
    Image.fromarray(img).save(path, quality=95)
    before = path.read_bytes()
    with Image.open(path) as im:
        decoded = np.asarray(im)  # what the tool reads, up to decoder rounding
    gf.filter(path, path, ["box3"], extra=["-q", "90"])
    after = path.read_bytes()
    assert after.startswith(MAGIC["jpg"]) and after != before
    with Image.open(path) as im:
        got = np.asarray(im, dtype=float)
    want = apply_masks(decoded, ["box3"])  # one JPEG generation (q90) away from got
    assert np.abs(got - want).mean() < 3.0


def test_format_conversion_without_mask(gf, rng, tmp_path):
    """No -m: the pixels are re-encoded unchanged (PNG -> TGA -> BMP -> PNG)."""
    img = random_image(rng, 26, 18, 3)
    a = write_png(tmp_path / "a.png", img)
    gf.filter(a, tmp_path / "b.tga", [])
    gf.filter(tmp_path / "b.tga", tmp_path / "c.bmp", [])
    gf.filter(tmp_path / "c.bmp", tmp_path / "d.png", [])
    assert_equal_image(read_png(tmp_path / "d.png", 3), img)
