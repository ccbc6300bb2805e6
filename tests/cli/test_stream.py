"""Large JPEGs streamed through a CPU call in bands of rows (src/stream.c):
the file must be the whole image's, byte for byte, for every mask chain,
border, sampling and band height; what cannot stream (progressive files,
wrap, other outputs, whole-image operations) must not; a damaged file must
end as it does without streaming; and memory must stay bounded by a band,
not by the image. GPUFILTER_STREAM_BAND_ROWS streams the small images of
these tests (bands of that many rows, rounded up to 128)."""

import os
import re
import stat

import cv2
import numpy as np
import pytest

from gftest import peak_memory_kib, photo

STREAMED = "streamed in bands of"


def photo_jpeg(path, height, width, quality=90, gray=False, **flags):
    """A photo tiled to height x width, as a JPEG written by OpenCV."""
    img = photo("astronaut.png")[:, :, ::-1]
    reps = (height // img.shape[0] + 1, width // img.shape[1] + 1, 1)
    big = np.ascontiguousarray(np.tile(img, reps)[:height, :width])
    if gray:
        big = cv2.cvtColor(big, cv2.COLOR_BGR2GRAY)
    params = [cv2.IMWRITE_JPEG_QUALITY, quality]
    for key, value in flags.items():
        params += [getattr(cv2, key), value]
    assert cv2.imwrite(str(path), big, params)
    return path


def run_both(gf, tmp_path, src, *args, rows=200, out_name="out.jpg"):
    """The same call without and with streaming: (whole, streamed) results
    and output bytes (None where no file was written)."""
    results = []
    for name, env in (("whole", None), ("stream", {"GPUFILTER_STREAM_BAND_ROWS": rows})):
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        out = folder / out_name
        r = gf.run("--backend", "cpu", "-v", *args, src, out, env=env)
        results.append((r, out.read_bytes() if out.exists() else None))
    return results


CASES = [  # (input kind, extra options, masks, border)
    ("rgb", [], ["sobel"], "nearest"),
    ("rgb", [], ["gaussian5", "box3"], "reflect"),
    ("rgb", ["-q", "95"], ["motion9"], "constant"),  # 4:4:4 output
    ("rgb", ["--gray"], ["emboss"], "mirror"),
    ("gray", [], ["gaussian7", "sharpen", "laplacian"], "mirror"),
    ("gray", ["-q", "60"], ["box9"], "constant"),
    ("rgb444", [], ["prewitt"], "reflect"),
]


@pytest.mark.parametrize("rows", [1, 300])
@pytest.mark.parametrize("kind,extra,masks,border", CASES,
                         ids=lambda v: "+".join(v) if isinstance(v, list) else str(v))
def test_streamed_file_is_the_whole_images(gf, tmp_path, kind, extra, masks, border, rows):
    flags = {"IMWRITE_JPEG_SAMPLING_FACTOR": cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444} \
        if kind == "rgb444" else {}
    src = photo_jpeg(tmp_path / "in.jpg", 1001, 743, gray=kind == "gray", **flags)
    args = [a for m in masks for a in ("-m", m)] + ["-b", border] + extra
    (whole, whole_bytes), (streamed, streamed_bytes) = run_both(gf, tmp_path, src, *args, rows=rows)
    whole.ok()
    streamed.ok()
    assert STREAMED not in whole.err
    band = 128 if rows == 1 else 384
    assert f"{STREAMED} {band} rows" in streamed.err, streamed.err
    assert streamed_bytes == whole_bytes


@pytest.mark.parametrize("case", ["progressive", "wrap", "png output", "verify", "equalize"])
def test_what_cannot_stream_does_not(gf, tmp_path, case):
    src = photo_jpeg(tmp_path / "in.jpg", 600, 500,
                     **({"IMWRITE_JPEG_PROGRESSIVE": 1} if case == "progressive" else {}))
    args = {"wrap": ["-b", "wrap"], "verify": ["--verify"], "equalize": ["--equalize"]}.get(case, [])
    out_name = "out.png" if case == "png output" else "out.jpg"
    (whole, whole_bytes), (streamed, streamed_bytes) = run_both(
        gf, tmp_path, src, "-m", "gaussian5", *args, out_name=out_name)
    whole.ok()
    streamed.ok()
    assert STREAMED not in streamed.err
    assert streamed_bytes == whole_bytes


def test_reference_backend_streams_its_own_bytes(gf, tmp_path):
    src = photo_jpeg(tmp_path / "in.jpg", 400, 300)
    out = {}
    for backend, env in (("cpu", None), ("reference", {"GPUFILTER_STREAM_BAND_ROWS": 128})):
        r = gf.run("--backend", backend, "-v", "-m", "sharpen", src, tmp_path / f"{backend}.jpg",
                   env=env).ok()
        assert (STREAMED in r.err) == (backend == "reference")
        out[backend] = (tmp_path / f"{backend}.jpg").read_bytes()
    assert out["cpu"] == out["reference"]


def untimed(lines):
    return [re.sub(r"[0-9.]+ ms", "", line) for line in lines]


def damage(data, at):
    """Entropy-coded bytes overwritten with a marker that ends the scan."""
    damaged = bytearray(data)
    damaged[at:at + 4] = b"\xff\xd9\x00\x00"
    return bytes(damaged)


@pytest.mark.parametrize("where", [0.3, 0.9, "cut"])
def test_damaged_jpeg_ends_as_without_streaming(gf, tmp_path, where):
    """The decoder's warning comes after bands were written: the stream is
    dropped, nothing of it stays, and the file goes the whole-image way,
    which decides its fate as it always has (a file cut short is refused
    before either starts)."""
    good = photo_jpeg(tmp_path / "good.jpg", 900, 600).read_bytes()
    src = tmp_path / "bad.jpg"
    src.write_bytes(good[:len(good) * 6 // 10] if where == "cut"
                    else damage(good, int(len(good) * where)))
    (whole, whole_bytes), (streamed, streamed_bytes) = run_both(gf, tmp_path, src, "-m", "box3",
                                                                rows=128)
    assert streamed.rc == whole.rc == (1 if where == "cut" else 0)
    assert untimed(streamed.err_lines) == untimed(whole.err_lines)
    assert streamed_bytes == whole_bytes
    assert sorted(os.listdir(tmp_path / "stream")) == sorted(os.listdir(tmp_path / "whole"))


def test_outputs_streamed_anywhere(gf, tmp_path):
    """Standard output, a replaced file (its mode kept), a symbolic link
    (its target replaced) and a folder (refused before any work)."""
    src = photo_jpeg(tmp_path / "in.jpg", 500, 400)
    env = {"GPUFILTER_STREAM_BAND_ROWS": 128}
    want = tmp_path / "want.jpg"
    gf.run("--backend", "cpu", "-m", "box3", src, want).ok()
    r = gf.run("--backend", "cpu", "-v", "-m", "box3", "-f", "jpg", src, "-", env=env).ok()
    assert STREAMED in r.err and r.out == want.read_bytes()

    old = tmp_path / "old.jpg"
    gf.run("--backend", "cpu", "-m", "sobel", src, old).ok()
    old.chmod(0o640)
    gf.run("--backend", "cpu", "-m", "box3", src, old, env=env).ok()
    assert old.read_bytes() == want.read_bytes()
    assert stat.S_IMODE(old.stat().st_mode) == 0o640

    link = tmp_path / "link.jpg"
    link.symlink_to("old.jpg")
    gf.run("--backend", "cpu", "--force", "-m", "box3", "-q", "50", src, link, env=env).ok()
    assert link.is_symlink() and old.read_bytes() != want.read_bytes()

    (tmp_path / "dir.jpg").mkdir()
    refused = gf.run("--backend", "cpu", "-m", "box3", src, tmp_path / "dir.jpg", env=env)
    plain = gf.run("--backend", "cpu", "-m", "box3", src, tmp_path / "dir.jpg")
    assert refused.rc == plain.rc == 1
    assert refused.err_lines == plain.err_lines
    assert sorted(os.listdir(tmp_path)) == ["dir.jpg", "in.jpg", "link.jpg", "old.jpg", "want.jpg"]


def peak_memory_mib(argv, env=None):
    kib, err = peak_memory_kib(argv, env)
    return kib / 1024, err


def test_streamed_memory_is_a_band_not_the_image(gf, tmp_path):
    """6000x4000 RGB (69 MiB of pixels): the whole image's call holds it
    twice (input and result); the streamed call a few bands of 128 rows."""
    src = photo_jpeg(tmp_path / "in.jpg", 6000, 4000)
    argv = [gf.path, "--backend", "cpu", "-v", "-m", "gaussian5"]
    whole, _ = peak_memory_mib(argv + [src, tmp_path / "whole.jpg"])
    streamed, err = peak_memory_mib(argv + [src, tmp_path / "stream.jpg"],
                                    {"GPUFILTER_STREAM_BAND_ROWS": "128"})
    assert STREAMED in err
    assert (tmp_path / "whole.jpg").read_bytes() == (tmp_path / "stream.jpg").read_bytes()
    assert streamed < 0.4 * whole, f"streamed {streamed:.0f} MiB, whole {whole:.0f} MiB"


def test_a_large_jpeg_streams_by_default(gf, tmp_path):
    """16384x16384 gray: 256 MiB of pixels, the threshold; the call stays
    far under the image's size."""
    src = photo_jpeg(tmp_path / "in.jpg", 16384, 16384, gray=True, quality=75)
    peak, err = peak_memory_mib([gf.path, "--backend", "cpu", "-v", "-m", "box3", src,
                                 tmp_path / "out.jpg"])
    assert STREAMED in err
    # the call's memory over the program's own at start (about 6 MiB, 19 under
    # AddressSanitizer, whose shadow of the binary is not the call's)
    base, _ = peak_memory_mib([gf.path, "--version"])
    assert peak - base < 154, f"peak {peak:.0f} MiB ({base:.0f} at start) for a 256 MiB image"
    out = cv2.imread(str(tmp_path / "out.jpg"), cv2.IMREAD_UNCHANGED)
    assert out.shape == (16384, 16384)
