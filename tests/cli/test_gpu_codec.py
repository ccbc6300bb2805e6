"""The GPU JPEG codec (nvJPEG): --codec, its choice per file, its pixels
against libjpeg-turbo's, its hostile-file behaviour against the CPU path's.

The pixel bounds are the README's: nvJPEG and libjpeg-turbo use different
IDCTs and chroma upsampling, so their decodes differ by a few levels."""
import re
import shutil

import numpy as np
import pytest
from PIL import Image

import gftest

# decoded pixels, GPU against CPU codec: largest difference and PSNR (dB);
# measured on an H100 (hardware decoder): at most 1 level decoded, 4 after
# sobel, PSNR 85.9 dB and up, most files identical
DECODE_MAX_DIFF = 4
DECODE_MIN_PSNR = 80.0
# GPU-encoded JPEG against libjpeg-turbo's at the same quality; measured:
# 0.986-1.004x the size, PSNR against the source 0.85 dB better to 0.01 worse
SIZE_RATIO = (0.95, 1.05)
PSNR_LOSS_DB = 0.25

PHOTOS = ["astronaut.png", "chelsea.png", "coffee.png", "horse.png"]


def psnr(a, b):
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


def load(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def photo_jpegs(folder, scale=1):
    """The sample photos as JPEGs: 4:2:0 at quality 90 and 4:4:4 at 95
    (what cameras and the web write), and the sample that is a JPEG."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in PHOTOS:
        img = Image.fromarray(np.ascontiguousarray(gftest.photo(name, "RGB")))
        if scale != 1:
            img = img.resize((img.width * scale, img.height * scale), Image.Resampling.BICUBIC)
        stem = name.rsplit(".", 1)[0]
        for quality, subsampling, tag in ((90, 2, "420"), (95, 0, "444")):
            path = folder / f"{stem}-{tag}.jpg"
            img.save(path, quality=quality, subsampling=subsampling)
            paths.append(path)
    shutil.copy(gftest.IMAGES_DIR / "hubble_deep_field.jpg", folder / "hubble.jpg")
    paths.append(folder / "hubble.jpg")
    return paths


def batch(gf, codec, inputs, out, *args):
    return gf.run("--backend", "cuda", "--codec", codec, "-o", out, *args, *inputs)


# ---- on any machine --------------------------------------------------------


def test_version_names_the_gpu_codec(gf):
    r = gf.run("--version").ok()
    assert re.search(rb"GPU JPEG: (nvJPEG \d+\.\d+\.\d+|libnvjpeg\S* not found|not built in)",
                     r.out), r.out


def test_nvjpeg_can_be_turned_off(gf):
    """GPUFILTER_NVJPEG=none turns a built-in GPU codec off; a build without
    nvjpeg.h (a CUDA toolkit without nvJPEG) says that instead."""
    built_in = b"GPU JPEG: not built in" not in gf.run("--version").ok().out
    r = gf.run("--version", env={"GPUFILTER_NVJPEG": "none"}).ok()
    want = b"GPU JPEG: off (GPUFILTER_NVJPEG=none)" if built_in else b"GPU JPEG: not built in"
    assert want in r.out, r.out


@pytest.mark.parametrize("args, message", [
    (["--codec", "png"], "unknown codec 'png' (auto, cpu, gpu)"),
    (["--codec", "gpu", "--backend", "cpu"], "--codec gpu runs on the GPU"),
    (["--codec", "gpu", "--backend", "reference"], "--codec gpu runs on the GPU"),
    (["--codec", "gpu", "--verify"], "--verify compares with the CPU codecs' pixels"),
])
def test_codec_usage_errors(gf, tmp_path, args, message):
    src = tmp_path / "a.jpg"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(src)
    r = gf.run(*args, "-m", "box3", src, tmp_path / "b.jpg")
    assert r.rc == 2, r.describe()
    assert message in r.err


def test_codec_gpu_without_a_gpu_fails_clearly(gf, gpu_usable, tmp_path):
    if gpu_usable:
        pytest.skip("a GPU is usable here")
    src = tmp_path / "a.jpg"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(src)
    r = gf.run("--codec", "gpu", "-m", "box3", "-o", tmp_path / "out", src)
    assert r.rc == 1 and "--codec gpu needs the GPU: no usable GPU" in r.err, r.describe()
    r = gf.run("--codec", "gpu", "-m", "box3", src, tmp_path / "b.jpg")
    assert r.rc == 1 and "no usable GPU" in r.err, r.describe()
    assert not (tmp_path / "b.jpg").exists() and not list((tmp_path / "out").glob("*"))


def test_codec_cpu_is_the_default_bytes_on_the_cpu(gf, tmp_path):
    inputs = photo_jpegs(tmp_path / "in")
    gf.run("--backend", "cpu", "-m", "gaussian5", "-o", tmp_path / "a", *inputs).ok()
    gf.run("--backend", "cpu", "--codec", "cpu", "-m", "gaussian5", "-o", tmp_path / "b",
           *inputs).ok()
    for p in inputs:
        assert (tmp_path / "a" / p.name).read_bytes() == (tmp_path / "b" / p.name).read_bytes()


# ---- on the GPU -------------------------------------------------------------


@pytest.mark.cuda_only
@pytest.mark.parametrize("mask", [None, "gaussian5", "sobel"])
def test_gpu_decode_is_within_the_bound_of_the_cpu_decode(gf, tmp_path, mask):
    """Decoded (and filtered) on each codec path, written as PNG: the
    difference is the decoders' only."""
    inputs = photo_jpegs(tmp_path / "in", scale=2)
    ops = ["-m", mask] if mask else []
    batch(gf, "gpu", inputs, tmp_path / "gpu", "--format", "png", *ops).ok()
    batch(gf, "cpu", inputs, tmp_path / "cpu", "--format", "png", *ops).ok()
    for p in inputs:
        got = load(tmp_path / "gpu" / (p.stem + ".png"))
        want = load(tmp_path / "cpu" / (p.stem + ".png"))
        diff = int(np.abs(got.astype(int) - want.astype(int)).max())
        print(f"{p.name} {mask}: max |diff| {diff}, PSNR {psnr(got, want):.1f} dB")
        assert diff <= DECODE_MAX_DIFF, p.name
        assert psnr(got, want) >= DECODE_MIN_PSNR, p.name


@pytest.mark.cuda_only
@pytest.mark.parametrize("quality", [92, 75])
def test_gpu_encoded_jpeg_matches_libjpeg_turbo(gf, tmp_path, quality):
    """Same quality, no operation: sizes and PSNR against the decoded source
    within the README's bounds; the files read back with Pillow and OpenCV."""
    import cv2
    inputs = photo_jpegs(tmp_path / "in", scale=2)
    batch(gf, "gpu", inputs, tmp_path / "gpu", "-q", quality).ok()
    batch(gf, "cpu", inputs, tmp_path / "cpu", "-q", quality).ok()
    for p in inputs:
        source = load(p)
        gpu, cpu = tmp_path / "gpu" / p.name, tmp_path / "cpu" / p.name
        assert cv2.imread(str(gpu)) is not None
        ratio = gpu.stat().st_size / cpu.stat().st_size
        loss = psnr(load(cpu), source) - psnr(load(gpu), source)
        print(f"{p.name} q{quality}: size {ratio:.3f}x libjpeg-turbo's, PSNR {loss:+.2f} dB below")
        assert SIZE_RATIO[0] <= ratio <= SIZE_RATIO[1], p.name
        assert loss <= PSNR_LOSS_DB, p.name
        assert gftest.MAGIC["jpg"] == gpu.read_bytes()[:3] and b"gpufilter" in gpu.read_bytes()[:200]


def hostile_jpegs(folder, rng):
    """JPEGs the GPU decoder must leave to the CPU, or fail as the CPU path
    does: the fuzz regressions, truncated and damaged streams, progressive,
    gray and CMYK files."""
    folder.mkdir()
    for p in (gftest.REPO / "tests" / "fuzz" / "regressions").glob("*.jpg"):
        shutil.copy(p, folder / p.name)
    img = Image.fromarray(np.ascontiguousarray(gftest.photo("chelsea.png", "RGB")))
    good = folder / "good.jpg"
    img.save(good, quality=90)
    data = good.read_bytes()
    (folder / "truncated-half.jpg").write_bytes(data[: len(data) // 2])
    (folder / "truncated-header.jpg").write_bytes(data[:300])
    (folder / "no-eoi.jpg").write_bytes(data[:-2])
    for k, where in enumerate((0.3, 0.5, 0.7)):  # nvJPEG's decoder pads over some of these
        damaged = bytearray(data)
        at = int(len(damaged) * where)
        damaged[at:at + 64] = rng.integers(0, 256, 64, dtype=np.uint8).tobytes()
        (folder / f"damaged-entropy-{k}.jpg").write_bytes(bytes(damaged))
    img.save(folder / "progressive.jpg", quality=90, progressive=True)
    img.convert("L").save(folder / "gray.jpg", quality=90)
    img.convert("CMYK").save(folder / "cmyk.jpg", quality=90)
    return sorted(folder.iterdir())


@pytest.mark.cuda_only
def test_hostile_jpegs_end_as_on_the_cpu_path(gf, rng, tmp_path):
    inputs = hostile_jpegs(tmp_path / "in", rng)
    gpu = batch(gf, "gpu", inputs, tmp_path / "gpu", "-m", "box3")
    cpu = batch(gf, "cpu", inputs, tmp_path / "cpu", "-m", "box3")
    assert gpu.rc == cpu.rc, gpu.describe() + "\n" + cpu.describe()
    assert sorted(gpu.err_lines) == sorted(cpu.err_lines)
    written = {p.name for p in (tmp_path / "gpu").iterdir()}
    assert written == {p.name for p in (tmp_path / "cpu").iterdir()}
    assert not [n for n in written if n.startswith(".")], "a temporary file was left"
    for name in written:  # whole files: each decodes
        assert load(tmp_path / "gpu" / name).size > 0


@pytest.mark.cuda_only
def test_verbose_says_where_each_file_was_decoded(gf, rng, tmp_path):
    inputs = photo_jpegs(tmp_path / "in")
    img = Image.fromarray(np.ascontiguousarray(gftest.photo("chelsea.png", "RGB")))
    img.save(tmp_path / "in" / "progressive.jpg", quality=90, progressive=True)
    gftest.write_png(tmp_path / "in" / "photo.png", gftest.photo("coffee.png", "RGB"))
    inputs += [tmp_path / "in" / "progressive.jpg", tmp_path / "in" / "photo.png"]
    r = gf.run("-v", "--backend", "cuda", "--codec", "gpu", "-m", "sobel", "-o", tmp_path / "out",
               *inputs).ok()
    lines = {line.split(" ")[1]: line for line in r.err_lines if re.match(r"gpufilter: \S+ \d+x\d+x\d: ", line)}
    gpu = [str(p) for p in inputs if p.suffix == ".jpg" and p.name != "progressive.jpg"]
    for name in gpu:
        assert re.search(r"decode GPU \((hardware|GPU)\) [\d.]+ ms, filter [\d.]+ ms on cuda, "
                         r"encode GPU [\d.]+ ms, write [\d.]+ ms", lines[name]), lines[name]
    assert "decode CPU" in lines[str(tmp_path / "in" / "progressive.jpg")]
    assert "decode CPU" in lines[str(tmp_path / "in" / "photo.png")]
    summary = [line for line in r.err_lines if " images/s; decoded: " in line]
    assert len(summary) == 1 and f"decoded: {len(gpu)} on the GPU" in summary[0], r.err
    assert "2 on the CPU; encoded:" in summary[0], summary


@pytest.mark.cuda_only
def test_one_file_on_the_gpu_codec(gf, tmp_path):
    src = photo_jpegs(tmp_path / "in")[0]
    r = gf.run("-v", "--codec", "gpu", "-m", "sobel", src, tmp_path / "out.jpg").ok()
    assert re.search(r"decode GPU \((hardware|GPU)\)", r.err), r.err
    assert load(tmp_path / "out.jpg").shape == load(src).shape


def sparse_input(folder, mib=300, name="large.jpg", head=b"\xff\xd8\xff"):
    """A file of 'mib' MiB that starts as a JPEG (by default) and is none (it
    fails): with it a small batch counts as large enough for --codec auto to
    try nvJPEG."""
    path = folder / name
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(mib << 20)
    return path


@pytest.mark.cuda_only
def test_auto_keeps_small_batches_on_the_cpu_codecs(gf, tmp_path):
    inputs = photo_jpegs(tmp_path / "in")[:2]
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", tmp_path / "a", *inputs).ok()
    assert re.search(r"JPEG on the CPU codecs: [\d.]+ MiB of JPEG input, under the 256 MiB", r.err), r.err
    assert "decoded: 0 on the GPU, 2 on the CPU" in r.err, r.err


@pytest.mark.cuda_only
def test_auto_counts_only_jpeg_input(gf, tmp_path):
    """300 MiB of PNG beside two JPEGs: the PNG never reaches nvJPEG, so
    the batch stays on the CPU codecs."""
    inputs = photo_jpegs(tmp_path / "in")[:2]
    inputs.append(sparse_input(tmp_path, name="large.png", head=b"\x89PNG\r\n\x1a\n"))
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", tmp_path / "a", *inputs)
    assert r.rc == 1 and "large.png" in r.err, r.describe()
    assert re.search(r"JPEG on the CPU codecs: [\d.]+ MiB of JPEG input, under the 256 MiB", r.err), r.err
    assert "decoded: 0 on the GPU, 2 on the CPU" in r.err, r.err


@pytest.mark.cuda_only
def test_auto_takes_nvjpeg_for_large_batches(gf, tmp_path):
    inputs = photo_jpegs(tmp_path / "in")[:2] + [sparse_input(tmp_path)]
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", tmp_path / "a", *inputs)
    assert r.rc == 1 and "large.jpg" in r.err, r.describe()
    assert "JPEG decoded on the GPU (hardware)" in r.err, r.err
    assert "decoded: 2 on the GPU (hardware), 0 on the CPU" in r.err, r.err


@pytest.mark.cuda_only
def test_without_libnvjpeg_the_batch_takes_the_cpu_codecs(gf, tmp_path):
    inputs = photo_jpegs(tmp_path / "in")[:2] + [sparse_input(tmp_path)]
    env = {"GPUFILTER_NVJPEG": str(tmp_path / "missing.so")}
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", tmp_path / "a", *inputs, env=env)
    assert r.rc == 1, r.describe()
    assert "JPEG on the CPU codecs: no GPU JPEG codec: libnvjpeg.so" in r.err, r.err
    inputs = inputs[:2]
    r = gf.run("--backend", "cuda", "--codec", "gpu", "-m", "box3", "-o", tmp_path / "b", *inputs,
               env=env)
    assert r.rc == 1 and "--codec gpu: no GPU JPEG codec" in r.err, r.describe()


@pytest.mark.cuda_only
def test_auto_leaves_the_gpu_backend_of_nvjpeg_to_gpu_only(gf, tmp_path):
    """Without the hardware decoder (forced here) --codec auto keeps the CPU
    codecs, faster than nvJPEG's GPU backend; --codec gpu still takes it."""
    inputs = photo_jpegs(tmp_path / "in")[:2]
    env = {"GPUFILTER_NVJPEG_BACKEND": "gpu"}
    r = gf.run("-v", "--backend", "cuda", "-m", "box3", "-o", tmp_path / "a", *inputs,
               sparse_input(tmp_path), env=env)
    assert r.rc == 1, r.describe()
    assert "JPEG on the CPU codecs: no hardware JPEG decoder on this GPU" in r.err, r.err
    r = gf.run("-v", "--backend", "cuda", "--codec", "gpu", "-m", "box3", "-o", tmp_path / "b",
               *inputs, env=env).ok()
    assert "decoded: 2 on the GPU (GPU)" in r.err, r.err
