"""Batches: -o DIR with several inputs, --files-from, --shard, naming and
collisions, failures skipped, bounded memory, interrupts."""

import signal
import subprocess
import time

import numpy as np
import pytest

from gftest import peak_memory_kib, random_image, read_png, write_png
from test_cli import check_error


def make_folder(rng, folder, count, size=(24, 16), channels=3):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        paths.append(write_png(folder / f"img{i:04d}.png", random_image(rng, *size, channels)))
    return paths


def copies(rng, folder, count, width, height, channels):
    """count identical random images (written once, copied): a big batch fast."""
    folder.mkdir()
    first = write_png(folder / "img0000.png", random_image(rng, width, height, channels))
    data = first.read_bytes()
    paths = [first] + [folder / f"img{i:04d}.png" for i in range(1, count)]
    for p in paths[1:]:
        p.write_bytes(data)
    return paths


def outputs(folder):
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_batch_matches_single_runs(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 7)
    out = tmp_path / "out"  # created by the batch
    r = gf.run("--backend", gf.backend, "-m", "sobel", "--equalize", "-j", "3", "-o", out, *inputs)
    assert r.rc == 0, r.describe()
    assert r.err == "", "nothing on stderr when it is not a terminal"
    assert outputs(out) == [p.name for p in inputs]
    for p in inputs:
        single = tmp_path / "single.png"
        gf.run("--backend", gf.backend, "-m", "sobel", "--equalize", p, single).ok()
        assert np.array_equal(read_png(out / p.name), read_png(single)), p.name


def test_corrupt_file_in_the_middle(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 6)
    bad = tmp_path / "in" / "img0003.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    out = tmp_path / "out"
    r = gf.run("--backend", gf.backend, "-m", "box3", "-o", out, *inputs)
    assert r.rc == 1, r.describe()
    lines = r.err.splitlines()
    assert any(str(bad) in line and line.startswith("gpufilter: ") for line in lines), r.err
    assert lines[-1] == "gpufilter: 1 of 6 files failed"
    assert outputs(out) == [p.name for p in inputs if p != bad]


def test_files_from_stdin_and_file(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 5)
    listing = "\n".join(str(p) for p in inputs) + "\n\n"
    r = gf.run("--backend", gf.backend, "-m", "box3", "--files-from", "-", "-o", tmp_path / "a",
               stdin=listing.encode())
    assert r.rc == 0, r.describe()
    assert outputs(tmp_path / "a") == [p.name for p in inputs]
    (tmp_path / "list.txt").write_text(listing)
    r = gf.run("--backend", gf.backend, "-m", "box3", "--files-from", tmp_path / "list.txt",
               "-o", tmp_path / "b", "--format", "jpg", "--suffix", "-blur")
    assert r.rc == 0, r.describe()
    assert outputs(tmp_path / "b") == [p.stem + "-blur.jpg" for p in inputs]
    assert (tmp_path / "b" / "img0000-blur.jpg").read_bytes()[:3] == b"\xff\xd8\xff"


def test_shards_cover_every_file_once(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 40, size=(4, 4))
    seen = []
    for i in range(3):
        out = tmp_path / f"shard{i}"
        r = gf.run("--backend", gf.backend, "-m", "identity", "--shard", f"{i}/3", "-o", out, *inputs)
        assert r.rc == 0, r.describe()
        seen += outputs(out)
    assert sorted(seen) == sorted(p.name for p in inputs)
    assert len(outputs(tmp_path / "shard0")) not in (0, 40), "a shard took all or nothing"


def test_output_name_collision_is_refused_before_work(gf, rng, tmp_path):
    a = make_folder(rng, tmp_path / "a", 2)
    b = make_folder(rng, tmp_path / "b", 1)
    out = tmp_path / "out"
    r = gf.run("--backend", gf.backend, "-m", "box3", "-o", out, *a, *b)
    check_error(r, 2, [str(a[0]), str(b[0])])
    assert outputs(out) == []


def test_output_over_an_input_is_refused(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 3)
    before = [p.read_bytes() for p in inputs]
    r = gf.run("--backend", gf.backend, "-m", "box3", "-o", tmp_path / "in", *inputs)
    check_error(r, 2, ["overwrite"])
    assert [p.read_bytes() for p in inputs] == before
    assert outputs(tmp_path / "in") == [p.name for p in inputs]


@pytest.mark.parametrize("args", [["-j", "0"], ["-j", "x"], ["--shard", "3/3"], ["--shard", "1"],
                                  ["--shard", "-1/2"], ["--suffix", "a/b"]])
def test_bad_batch_options(gf, rng, tmp_path, args):
    inputs = make_folder(rng, tmp_path / "in", 2)
    r = gf.run("--backend", gf.backend, *args, "-o", tmp_path / "out", *inputs)
    check_error(r, 2)
    assert outputs(tmp_path / "out") == []


def test_batch_needs_an_output_folder(gf, rng, tmp_path):
    inputs = make_folder(rng, tmp_path / "in", 2)
    r = gf.run("--backend", gf.backend, "--files-from", "-", stdin="\n".join(map(str, inputs)).encode())
    check_error(r, 2, ["-o DIR"])


def test_memory_stays_bounded_over_500_images(gf, rng, tmp_path):
    """500 images of 512x512 RGB (768 KiB each, 384 MiB together) on 2
    workers: the process never holds more than a few images at once. The
    peak is compared with the same batch over 2 of the images, so that what
    the process holds whatever the batch (its code, the CUDA context and
    the kernels loaded into it) is not counted."""
    inputs = copies(rng, tmp_path / "in", 500, 512, 512, 3)

    def batch(paths, out):
        argv = [str(gf.path), "--backend", gf.backend, "-m", "box3", "-j", "2", "-o", str(out)]
        return peak_memory_kib(argv + [str(p) for p in paths])[0]

    two = batch(inputs[:2], tmp_path / "out2")
    all_of_them = batch(inputs, tmp_path / "out")
    assert len(outputs(tmp_path / "out")) == 500
    growth = (all_of_them - two) / 1024
    assert growth < 24, (f"peak memory {all_of_them / 1024:.0f} MiB for 500 images, "
                         f"{two / 1024:.0f} MiB for 2: {growth:.0f} MiB more")


def test_interrupt_stops_the_batch_cleanly(gf, rng, tmp_path):
    """SIGINT in the middle of a batch: finished outputs stay whole, nothing
    partial or temporary is left, and the process ends by the signal."""
    inputs = copies(rng, tmp_path / "in", 60, 700, 700, 4)
    out = tmp_path / "out"
    proc = subprocess.Popen([str(gf.path), "--backend", gf.backend, "-m", "gaussian5", "-j", "2",
                             "-o", str(out)] + [str(p) for p in inputs],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline and len(outputs(out)) < 3 and proc.poll() is None:
        time.sleep(0.02)
    assert proc.poll() is None, "the batch ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGINT
    names = outputs(out)
    assert names and len(names) < 60
    assert all(n.startswith("img") and n.endswith(".png") for n in names), names
    for n in names:  # every output left is complete
        assert read_png(out / n).shape == (700, 700, 4)


def cuda_device_count(gf):
    r = gf.run("--list-devices")
    return len(r.out.decode().splitlines()) if r.rc == 0 else 0


@pytest.mark.cuda_only
@pytest.mark.parametrize("devices", ["all", "0,1"])
def test_devices_spread_the_batch(gf, rng, tmp_path, devices):
    """--devices: each worker takes a device in turn; every output equals the
    CPU backend's, and with two GPUs both of them ran launches."""
    count = cuda_device_count(gf)
    if devices == "0,1" and count < 2:
        pytest.skip(f"needs 2 GPUs, this machine has {count}")
    # enough work that the second worker (the second device) surely gets some
    inputs = make_folder(rng, tmp_path / "in", 40, size=(256, 192), channels=4)
    out = tmp_path / "out"
    r = gf.run("--backend", "cuda", "--devices", devices, "-v", "-j", "2", "-m", "gaussian5",
               "-o", out, *inputs).ok()
    used = {d for d in range(count) if f"(device {d})" in r.err}
    assert used == set(range(min(count, 2))), r.err
    cpu = tmp_path / "cpu"
    gf.run("--backend", "cpu", "-m", "gaussian5", "-o", cpu, *inputs).ok()
    for p in inputs:
        assert np.array_equal(read_png(out / p.name), read_png(cpu / p.name)), p.name


@pytest.mark.cuda_only
def test_devices_that_do_not_exist(gf, rng, tmp_path):
    count = cuda_device_count(gf)
    inputs = make_folder(rng, tmp_path / "in", 2)
    out = tmp_path / "out"
    r = gf.run("--backend", "cuda", "--devices", f"0,{count}", "-m", "box3", "-o", out, *inputs)
    check_error(r, 1, [f"no CUDA device {count}", f"has {count}"])
    assert outputs(out) == []
