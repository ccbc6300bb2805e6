"""Hostile paths, signals and values: outputs that are not regular files,
links, long names, interrupts at any moment of a batch, limits on decoding
time and memory, and masks whose results would overflow."""

import os
import signal
import socket
import stat
import subprocess
import threading
import time

import numpy as np
import pytest

from gftest import random_image, read_png, write_png
from test_cli import check_error


def png_input(rng, folder, name="in.png", width=40, height=30, channels=3):
    img = random_image(rng, width, height, channels)
    return write_png(folder / name, img), img


def entries(folder):
    return sorted(p.name for p in folder.iterdir())


# ---- outputs that are not regular files -------------------------------------------


def test_fifo_output_is_written_into(gf, rng, tmp_path):
    """A FIFO as OUTPUT gets the image through it and stays a FIFO."""
    src, img = png_input(rng, tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = {}

    def read_all():
        with open(fifo, "rb") as f:
            received["data"] = f.read()

    reader = threading.Thread(target=read_all)
    reader.start()
    r = gf.run("--backend", gf.backend, "-f", "png", src, fifo)
    reader.join(timeout=60)
    assert r.rc == 0, r.describe()
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "got.png").write_bytes(received["data"])
    assert np.array_equal(read_png(tmp_path / "got.png"), img)
    assert entries(tmp_path) == ["got.png", "in.png", "pipe"]


def device_node(tmp_path, name, minor):
    """A character device of the test's own (1:3 is null, 1:7 full), or a
    skip where this process may not make or open one."""
    path = tmp_path / name
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        with open(path, "wb"):
            pass
    except PermissionError:
        pytest.skip("making or opening a device node needs root and a mount without nodev")
    return path


def test_null_device_output_stays_a_device(gf, rng, tmp_path):
    """Writing to a character device writes into it: the node is not replaced
    by a regular file (as root, /dev/null used to become one)."""
    src, _ = png_input(rng, tmp_path)
    null = device_node(tmp_path, "null", 3)
    gf.run("--backend", gf.backend, "-f", "png", src, null).ok()
    assert stat.S_ISCHR(os.lstat(null).st_mode)
    assert entries(tmp_path) == ["in.png", "null"]


def test_full_device_output_fails(gf, rng, tmp_path):
    """A device that is full (1:7, /dev/full) gives ENOSPC: exit 1, a message
    naming the output, the node unchanged."""
    src, _ = png_input(rng, tmp_path)
    full = device_node(tmp_path, "full", 7)
    r = gf.run("--backend", gf.backend, "-f", "png", src, full)
    check_error(r, 1, [str(full), "No space left on device"])
    assert stat.S_ISCHR(os.lstat(full).st_mode)
    assert entries(tmp_path) == ["full", "in.png"]


def test_socket_output_is_refused(gf, rng, tmp_path):
    """A file that is neither regular, a character device nor a FIFO is
    refused and left alone."""
    src, _ = png_input(rng, tmp_path)
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        r = gf.run("--backend", gf.backend, "-f", "png", src, path)
        check_error(r, 1, [str(path), "not a regular file"])
        assert stat.S_ISSOCK(os.lstat(path).st_mode)
    finally:
        server.close()
    assert entries(tmp_path) == ["in.png", "sock"]


def test_symlink_output_writes_its_target(gf, rng, tmp_path):
    """OUTPUT a symbolic link: the link stays and the file it names gets the
    image (as a shell redirection would)."""
    src, img = png_input(rng, tmp_path)
    target = tmp_path / "real.png"
    target.write_bytes(b"old")
    link = tmp_path / "link.png"
    link.symlink_to("real.png")
    gf.run("--backend", gf.backend, src, link).ok()
    assert link.is_symlink() and os.readlink(link) == "real.png"
    assert np.array_equal(read_png(target), img)
    assert entries(tmp_path) == ["in.png", "link.png", "real.png"]


def test_dangling_symlink_output_is_refused(gf, rng, tmp_path):
    src, _ = png_input(rng, tmp_path)
    link = tmp_path / "link.png"
    link.symlink_to("nowhere/real.png")
    r = gf.run("--backend", gf.backend, src, link)
    check_error(r, 1, [str(link), "symbolic link"])
    assert link.is_symlink() and entries(tmp_path) == ["in.png", "link.png"]


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_new_output_mode_follows_the_umask(gf, rng, tmp_path, umask):
    """A new output gets 0666 less the umask (read once, before any thread
    starts), in a single call and in a batch; a replaced file keeps its mode."""
    src, _ = png_input(rng, tmp_path)
    argv = [str(gf.path), "--backend", gf.backend]
    kw = dict(capture_output=True, timeout=120, preexec_fn=lambda: os.umask(umask))
    assert subprocess.run(argv + [str(src), str(tmp_path / "one.png")], **kw).returncode == 0
    assert subprocess.run(argv + ["-j", "4", "-o", str(tmp_path / "out"), str(src)],
                          **kw).returncode == 0
    for path in (tmp_path / "one.png", tmp_path / "out" / "in.png"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666 & ~umask, path
    os.chmod(tmp_path / "one.png", 0o640)
    assert subprocess.run(argv + [str(src), str(tmp_path / "one.png")], **kw).returncode == 0
    assert stat.S_IMODE(os.stat(tmp_path / "one.png").st_mode) == 0o640


# ---- names ---------------------------------------------------------------------------


@pytest.mark.parametrize("length", [248, 255])
def test_longest_output_names(gf, rng, tmp_path, length):
    """An output name of up to NAME_MAX (255) bytes is written, as a single
    file and in a batch (the temporary name does not grow with it)."""
    src, img = png_input(rng, tmp_path)
    name = "o" * (length - 4) + ".png"
    gf.run("--backend", gf.backend, src, tmp_path / name).ok()
    assert np.array_equal(read_png(tmp_path / name), img)
    (tmp_path / "in").mkdir()
    batch_in, _ = png_input(rng, tmp_path / "in", name="i" * (length - 4) + ".png")
    gf.run("--backend", gf.backend, "-o", tmp_path / "out", batch_in).ok()
    assert entries(tmp_path / "out") == [batch_in.name]


def test_empty_output_folder_is_a_usage_error(gf, rng, tmp_path):
    src, _ = png_input(rng, tmp_path)
    r = gf.run("--backend", gf.backend, "-o", "", src)
    check_error(r, 2, ["--output-dir", "empty"])
    assert entries(tmp_path) == ["in.png"]


def test_batch_output_onto_input_through_a_link(gf, rng, tmp_path):
    """-o . with an input given through a symbolic link (or a hard link) to
    the file the output would replace: refused, the link and file intact."""
    src, img = png_input(rng, tmp_path)
    before = src.read_bytes()
    (tmp_path / "alias.png").symlink_to("in.png")
    r = gf.run("--backend", gf.backend, "-m", "box3", "-o", tmp_path, tmp_path / "alias.png")
    check_error(r, 2, ["would overwrite the input", "alias.png"])
    assert (tmp_path / "alias.png").is_symlink() and src.read_bytes() == before
    sub = tmp_path / "sub"
    sub.mkdir()
    os.link(src, sub / "in.png")
    r = gf.run("--backend", gf.backend, "-m", "box3", "-o", tmp_path, sub / "in.png")
    check_error(r, 2, ["would overwrite the input"])
    assert src.read_bytes() == before


# ---- encoding ----------------------------------------------------------------------------


@pytest.mark.parametrize("ext", ["jpg", "tga"])
def test_encode_failure_names_the_file(gf, rng, tmp_path, ext):
    """An image JPEG or TGA cannot hold (over 65535 pixels a side) is refused
    with the output's name, and nothing is written."""
    src = write_png(tmp_path / "wide.png", np.full((1, 65536, 1), 7, np.uint8))
    out = tmp_path / f"out.{ext}"
    r = gf.run("--backend", gf.backend, src, out)
    check_error(r, 1, [str(out), "65535"])
    assert entries(tmp_path) == ["wide.png"]


# ---- masks ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "2 1\n1e308 -1e308\n",             # inf - inf: a NaN
    "1 1 1e-300\n1\n",                 # 255 / 1e-300 overflows
    "3 3\n1e14 0 0\n0 0 0\n0 0 -1e14\n",  # finite but past float's reach once summed
    "1 1 1 1e300\n1\n",                # the offset alone
])
def test_mask_results_out_of_range_are_refused(gf, rng, tmp_path, text):
    """A mask whose result can leave the finite range (a NaN or an infinity,
    which no byte stands for) is refused, on every backend."""
    src, _ = png_input(rng, tmp_path)
    mask = tmp_path / "huge.mask"
    mask.write_text(text)
    r = gf.run("--backend", gf.backend, "-m", mask, src, tmp_path / "out.png")
    check_error(r, 2, [str(mask), "past the limit"])
    assert not (tmp_path / "out.png").exists()


def test_large_finite_mask_clamps(gf, rng, tmp_path):
    """Weights far past 255 but within the limit clamp, on every backend."""
    img = random_image(rng, 23, 17, 1)
    src = write_png(tmp_path / "in.png", img)
    mask = tmp_path / "big.mask"
    mask.write_text("2 1\n1099511627776 -1099511627776\n")  # 2^40: exact in float sums too
    gf.run("--backend", gf.backend, "-m", mask, "-b", "nearest", src, tmp_path / "out.png").ok()
    a = img[:, :, 0].astype(np.int64)
    left = np.concatenate([a[:, :1], a[:, :-1]], axis=1)  # the anchor is (1, 0)
    want = np.where(left > a, 255, 0)
    assert np.array_equal(read_png(tmp_path / "out.png")[:, :, 0], want)


# ---- options ---------------------------------------------------------------------------------


@pytest.mark.parametrize("tile", ["50000x50000", "65536x65536", "65536x1"])
def test_huge_tiles_are_refused(gf, rng, tmp_path, tile):
    """Tile sides up to 65536 multiply past int (caught by UBSan before)."""
    src, _ = png_input(rng, tmp_path)
    r = gf.run("--backend", gf.backend, "--tile", tile, "-m", "box3", src, tmp_path / "o.png")
    check_error(r, 2, [tile])


# ---- limits on decoding ---------------------------------------------------------------------


def test_decode_timeout_fails_the_file_and_the_batch_goes_on(gf, rng, tmp_path):
    """A decode past --decode-timeout fails its file with a message naming it,
    and the other files of the batch are still written; the run ends at once
    rather than waiting for the decode."""
    folder = tmp_path / "in"
    folder.mkdir()
    y, x = np.mgrid[0:6000, 0:6000]  # patterns that deflate well: ~0.5 s or more to inflate
    big = np.stack([(x * 7 + y) % 256, (x + y * 3) % 256, (x ^ y) % 256, (x * y) % 256],
                   axis=2).astype(np.uint8)
    slow = write_png(folder / "slow.png", big, compress_level=6)
    small = [png_input(rng, folder, f"s{i}.png", 8, 8)[0] for i in range(4)]
    out = tmp_path / "out"
    started = time.monotonic()
    # 0.1 s: the small files' decodes finish in it even on a loaded machine
    r = gf.run("--backend", gf.backend, "--decode-timeout", "0.1", "-j", "2", "-o", out,
               slow, *small)
    elapsed = time.monotonic() - started
    assert r.rc == 1, r.describe()
    assert any(str(slow) in line and "--decode-timeout" in line for line in r.err_lines), r.err
    assert entries(out) == [p.name for p in small]
    r = gf.run("--backend", gf.backend, "--decode-timeout", "0.1", slow, tmp_path / "one.png")
    check_error(r, 1, [str(slow), "did not finish within 0.1 s"])
    assert not (tmp_path / "one.png").exists()
    gf.run("--backend", gf.backend, "--decode-timeout", "0", slow, tmp_path / "one.png").ok()
    assert elapsed < 60


@pytest.mark.parametrize("value", ["-1", "abc", "1e9", ""])
def test_decode_timeout_values(gf, rng, tmp_path, value):
    src, _ = png_input(rng, tmp_path)
    check_error(gf.run("--decode-timeout", value, src, tmp_path / "o.png"), 2, ["--decode-timeout"])


def test_max_memory_refuses_an_image_larger_than_the_budget(gf, rng, tmp_path):
    """An image whose decode and filter need more than --max-memory is
    refused before its pixels are allocated; one that fits is written."""
    src, img = png_input(rng, tmp_path, width=400, height=300, channels=3)
    # the estimate is (3 x channels + 6) bytes a pixel: 1.8 MB here
    r = gf.run("--backend", gf.backend, "--max-memory", "1M", src, tmp_path / "o.png")
    check_error(r, 1, [str(src), "--max-memory"])
    assert not (tmp_path / "o.png").exists()
    gf.run("--backend", gf.backend, "--max-memory", "2M", src, tmp_path / "o.png").ok()
    assert np.array_equal(read_png(tmp_path / "o.png"), img)


def test_max_memory_batch_shares_the_budget(gf, rng, tmp_path):
    """A batch whose images fit the budget one at a time but not together
    still completes: the workers wait for room instead of failing."""
    folder = tmp_path / "in"
    folder.mkdir()
    inputs = [png_input(rng, folder, f"i{i}.png", 400, 300, 3) for i in range(6)]
    out = tmp_path / "out"
    gf.run("--backend", gf.backend, "--max-memory", "3M", "-j", "4", "-m", "box3",
           "-o", out, *[p for p, _ in inputs]).ok()
    assert entries(out) == sorted(p.name for p, _ in inputs)


# ---- interrupts ------------------------------------------------------------------------------


def leftover_temporaries(folder):
    return [n for n in os.listdir(folder) if n.startswith(".")]


def interrupted_batches(gf, rng, tmp_path, stop, runs=12):
    """Batches of 300 small files on 64 threads (more than the cores, many
    outputs being created at once), each stopped by stop(proc) a little
    later after its first output than the last; yields (returncode,
    stderr, output folder, image) for each."""
    folder = tmp_path / "in"
    folder.mkdir()
    img = random_image(rng, 64, 48, 3)
    inputs = [str(write_png(folder / f"i{i:03d}.png", img)) for i in range(300)]
    for run in range(runs):
        out = tmp_path / f"out{run}"
        proc = subprocess.Popen([str(gf.path), "--backend", "cpu", "-j", "64", "-o", str(out)]
                                + inputs, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while time.time() < deadline and not (out.exists() and os.listdir(out)) \
                and proc.poll() is None:
            time.sleep(0.001)
        time.sleep(run * 0.004)
        stop(proc)
        _, err = proc.communicate(timeout=60)
        yield proc.returncode, err, out, img


def assert_outputs_whole(out, img):
    assert leftover_temporaries(out) == [], leftover_temporaries(out)
    for name in os.listdir(out):  # every output left is complete
        assert np.array_equal(read_png(out / name), img)


def test_interrupts_leave_no_temporary_files(gf, rng, tmp_path):
    """SIGINT at many moments of a batch: no temporary file is ever left, no
    spurious failure line is printed, and the process ends by the signal."""
    stop = lambda proc: proc.send_signal(signal.SIGINT)  # noqa: E731
    for rc, err, out, img in interrupted_batches(gf, rng, tmp_path, stop):
        if rc == 0:
            continue  # finished before the signal
        assert rc == -signal.SIGINT, err
        assert b"Interrupted" not in err and b"cannot create" not in err, err
        assert_outputs_whole(out, img)


def test_kill_leaves_no_temporary_for_new_outputs(gf, rng, tmp_path):
    """SIGKILL, which nothing can catch, at many moments of a batch into a new
    folder: every output there was complete the moment it got its name, and
    no temporary is left (O_TMPFILE; skipped where the file system lacks it)."""
    try:
        os.close(os.open(tmp_path, os.O_TMPFILE | os.O_WRONLY, 0o600))
    except (AttributeError, OSError):
        pytest.skip("no O_TMPFILE on this file system")
    for _, _, out, img in interrupted_batches(gf, rng, tmp_path, lambda proc: proc.kill()):
        assert_outputs_whole(out, img)


# ---- the GPU planner without its device queries -----------------------------------------


@pytest.mark.cuda_only
@pytest.mark.parametrize("kernel,mask", [
    ("blocked", "gaussian5"), ("separable", "gaussian7"), ("direct", "box3"),
    ("direct", "gaussian3"), ("auto", "box15"), ("auto", "box31"), ("auto", "sobel"),
])
def test_planner_without_device_queries(gf, rng, tmp_path, kernel, mask):
    """Where the planner cannot query the device (GPUFILTER_TEST_FAULT=query)
    every launch takes its device-independent plan, with no hard-coded SM
    count, and the output is still the CPU backend's."""
    img = random_image(rng, 517, 389, 4)
    src = write_png(tmp_path / "in.png", img)
    if mask.startswith("box") and int(mask[3:]) > 9:  # past the built-in boxes
        n = int(mask[3:])
        path = tmp_path / f"{mask}.mask"
        path.write_text(f"{n} {n} {n * n}\n" + f"{' '.join(['1'] * n)}\n" * n)
        mask = str(path)
    gpu, cpu = tmp_path / "gpu.png", tmp_path / "cpu.png"
    r = gf.run("--backend", "cuda", "--kernel", kernel, "-v", "-m", mask, src, gpu,
               env={"GPUFILTER_TEST_FAULT": "query"}).ok()
    gf.run("--backend", "cpu", "-m", mask, src, cpu).ok()
    got, want = read_png(gpu).astype(int), read_png(cpu).astype(int)
    assert np.abs(got - want).max() <= 1, r.err
    assert (got != want).mean() < 0.001, r.err
