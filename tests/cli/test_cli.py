"""The command line: help, version, mask listing and lookup, error paths and
exit statuses, backend selection."""

import io
import re

import numpy as np
import pytest
from PIL import Image

from gftest import (MAGIC, apply_mask, apply_masks, assert_close,
                    builtin_mask_names, format_matrix, load_mask, parse_mask, parse_paths,
                    photo_with_channels, random_image, read_png, write_png)

BUILTIN = ["sobel", "sobel-x", "sobel-y", "prewitt", "scharr", "laplacian", "laplacian8",
           "gaussian3", "gaussian5", "gaussian7", "box3", "box5", "box9", "sharpen",
           "emboss", "outline", "motion9", "identity"]


# ---------------------------------------------------------------------------
# help, version, --list-masks


HELP_OPTIONS = ["-m", "--mask", "-b", "--border", "--backend", "--tile", "--kernel",
                "-f", "--format", "-q", "--quality", "--filter-alpha", "-v", "--verbose",
                "--list-masks", "--list-devices", "--list-paths", "-h", "--help", "-V", "--version"]
HELP_VALUES = ["nearest", "constant", "reflect", "mirror", "wrap", "auto", "cuda", "cpu",
               "naive", "tiled", "blocked", "separable", "direct", "sweep", "--csv", "--gpu-memory",
               "--devices", "png", "jpg", "bmp", "tga"]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(gf, flag):
    r = gf.run(flag).ok()
    text = r.out.decode()
    assert text.strip(), "--help printed nothing on stdout"
    missing = [o for o in HELP_OPTIONS if not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", text)]
    assert not missing, f"--help does not mention {missing}"
    missing = [v for v in HELP_VALUES if v not in text]
    assert not missing, f"--help does not mention the values {missing}"
    assert r.err == ""


def test_help_short_equals_long(gf):
    assert gf.run("-h").ok().out == gf.run("--help").ok().out


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(gf, flag):
    r = gf.run(flag).ok()
    assert re.match(r"gpufilter \S*\d", r.out.decode()), r.out
    assert len(r.out.decode().strip().splitlines()) == 1


LIST_LINE = re.compile(r"^(\S+)\s+(\d+)x(\d+)\s+(\S.*)$")


PARAMETRIC_HEADER = "# parametric: "


def parse_list(text):
    """The mask files and built-ins of --list-masks (the lines before its
    parametric section)."""
    rows = {}
    for line in text.split(PARAMETRIC_HEADER)[0].splitlines():
        if not line.strip() or line.startswith("# masks from: "):
            continue
        m = LIST_LINE.match(line)
        assert m, f"--list-masks line not 'NAME  WxH  description': {line!r}"
        name, w, h, desc = m.groups()
        assert name not in rows, f"{name} listed twice"
        rows[name] = (int(w), int(h), desc.strip())
    return rows


def test_list_masks(gf):
    r = gf.run("--list-masks").ok()
    rows = parse_list(r.out.decode())
    assert sorted(rows) == sorted(BUILTIN)
    parametric = r.out.decode().split(PARAMETRIC_HEADER)[1].splitlines()[1:]
    assert [line.split(":")[0] for line in parametric] == ["gaussian", "box", "unsharp", "sharpen",
                                                           "log", "dog"], parametric
    assert sorted(BUILTIN) == builtin_mask_names()
    for name, (w, h, desc) in rows.items():
        m = load_mask(name)
        assert (w, h) == (m.width, m.height), f"{name}: listed {w}x{h}, file {m.width}x{m.height}"
        assert desc, f"{name} has no description"
        assert desc in m.description or m.description in desc, (name, desc, m.description)


# ---------------------------------------------------------------------------
# finding masks


MY_MASK = "# my test mask: right neighbour minus left, plus 100\n3 3 1 100\n0 0 0\n-1 0 1\n0 0 0\n"


def test_env_mask_folder(gf, rng, tmp_path):
    folder = tmp_path / "mymasks"
    folder.mkdir()
    (folder / "my.mask").write_text(MY_MASK)
    img = random_image(rng, 23, 14, 3)
    src = write_png(tmp_path / "in.png", img)
    env = {"GPUFILTER_MASKS": str(folder)}
    gf.run("--backend", gf.backend, "-m", "my", src, tmp_path / "out.png", env=env).ok()
    assert_close(read_png(tmp_path / "out.png"), apply_mask(img, parse_mask(MY_MASK)))
    # several folders, ':'-separated; a missing one is skipped
    env = {"GPUFILTER_MASKS": f"{tmp_path / 'absent'}:{folder}"}
    gf.run("--backend", gf.backend, "-m", "my", "-b", "wrap", src, tmp_path / "out2.png",
           env=env).ok()
    assert_close(read_png(tmp_path / "out2.png"), apply_mask(img, parse_mask(MY_MASK), "wrap"))
    # without the variable the name is unknown
    r = gf.run("--backend", gf.backend, "-m", "my", src, tmp_path / "out3.png")
    assert r.rc == 2 and not (tmp_path / "out3.png").exists(), r.describe()


def test_env_mask_folder_listed(gf, tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "my.mask").write_text(MY_MASK)
    rows = parse_list(gf.run("--list-masks", env={"GPUFILTER_MASKS": str(folder)}).ok().out.decode())
    assert "my" in rows and rows["my"][:2] == (3, 3), rows.get("my")
    assert rows["my"][2], "no description for my"
    assert set(BUILTIN) <= set(rows)


@pytest.mark.parametrize("form", ["./rel.mask", "rel.mask", "sub/noext", "ABSOLUTE"])
def test_mask_path(gf, rng, tmp_path, form):
    """A value with a '/' or ending in .mask is a file (relative to the cwd)."""
    (tmp_path / "sub").mkdir()
    text = "# shift\n" + format_matrix(np.array([[0, 0, 0], [1, 0, 0], [0, 0, 2]]), scale=3, offset=-7)
    (tmp_path / "rel.mask").write_text(text)
    (tmp_path / "sub" / "noext").write_text(text)
    value = str(tmp_path / "rel.mask") if form == "ABSOLUTE" else form
    img = random_image(rng, 19, 8, 4)
    write_png(tmp_path / "in.png", img)
    gf.run("--backend", gf.backend, "--mask", value, "--border", "reflect", "in.png", "out.png",
           cwd=tmp_path).ok()
    assert_close(read_png(tmp_path / "out.png"), apply_mask(img, parse_mask(text), "reflect"))


def test_short_and_long_options_agree(gf, rng, tmp_path):
    img = random_image(rng, 30, 30, 3)
    src = write_png(tmp_path / "in.png", img)
    a = gf.run("--backend", gf.backend, "-m", "emboss", "-b", "wrap", "-f", "bmp", src, tmp_path / "a").ok()
    b = gf.run("--backend", gf.backend, "--mask", "emboss", "--border", "wrap", "--format", "bmp",
               src, tmp_path / "b").ok()
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert (tmp_path / "a").read_bytes().startswith(MAGIC["bmp"])
    del a, b


# ---------------------------------------------------------------------------
# errors


def check_truncations_refused(gf, folder, data, cuts, ext):
    """Each cut of the file's bytes (data[:cut]) is refused: exit 1, one
    line naming the file and 'truncated', no output."""
    for cut in cuts:
        src = folder / f"cut{cut}.{ext}"
        src.write_bytes(data[:cut])
        out = folder / f"cut{cut}-out.png"
        r = gf.run("--backend", gf.backend, src, out)
        check_error(r, 1, [str(src), "truncated"])
        assert not out.exists()


def check_error(r, rc, tokens=()):
    """Exit status rc; the message is one line starting 'gpufilter: ' that
    contains every token (a tuple token: any one of its strings). A usage
    error (2) may add one hint line pointing at --help."""
    assert r.rc == rc, f"expected exit {rc}\n" + r.describe()
    lines = r.err_lines
    assert lines, "no message on stderr\n" + r.describe()
    msg = lines[0]
    assert msg.startswith("gpufilter: "), f"message does not start with 'gpufilter: ': {msg!r}"
    extra = lines[1:]
    if rc == 2 and len(extra) == 1 and "--help" in extra[0]:
        extra = []
    assert not extra, f"the error should be one line; stderr was {r.err!r}"
    for tok in tokens:
        alts = tok if isinstance(tok, tuple) else (tok,)
        assert any(a in msg for a in alts), f"message {msg!r} does not name {alts}"
    assert r.out == b"", "something was written on stdout"
    return msg


def jpeg_bytes(rng, progressive=False):
    img = photo_with_channels(rng, 3)[100:300, 50:350]
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img)).save(buf, format="JPEG", quality=90,
                                                     progressive=progressive)
    return buf.getvalue()


def cut_in_scan(data):
    sos = data.index(b"\xff\xda")
    return data[:sos + (len(data) - sos) // 2]


MALFORMED_MASKS = {
    "missing-row": "3 3 1 0\n1 1 1\n1 1 1\n",
    "short-row": "3 3 1 0\n1 1 1\n1 1\n1 1 1\n",
    "long-row": "3 3 1 0\n1 1 1\n1 1 1 1\n1 1 1\n",
    "not-a-number": "3 3 1 0\n1 1 1\n1 x 1\n1 1 1\n",
    "bad-header": "3 x 3\n1 1 1\n1 1 1\n1 1 1\n",
    "zero-width": "0 3 1 0\n",
    "negative-size": "-3 3 1 0\n1 1 1\n",
    "empty": "",
    "only-comments": "# nothing here\n# at all\n",
    "two-matrices-no-combine": "1 1\n1\n1 1\n2\n",
    "unknown-combine": "combine average\n1 1\n1\n1 1\n2\n",
    "header-too-long": "3 3 1 0 7\n1 1 1\n1 1 1\n1 1 1\n",
    "trailing-junk": "1 1 1 0\n1\nhello\n",
    # limits of the project's mask format (src/mask.h)
    "scale-zero": "3 3 0 0\n1 1 1\n1 1 1\n1 1 1\n",
    "nan-weight": "1 1\nnan\n",
    "width-4096": "4096 1\n" + " ".join(["1"] * 4096) + "\n",
    "height-4096": "1 4096\n" + "1\n" * 4096,
    "mixed-sizes": "combine max\n1 1\n1\n3 3\n0 0 0\n0 1 0\n0 0 0\n",
    "five-matrices": "combine sum\n" + "1 1\n1\n" * 5,
    "combine-after-matrix": "1 1\n1\ncombine max\n1 1\n2\n",
}


def setup_case(case, tmp_path, rng):
    """Build the files for one error case. Returns (args, status, tokens,
    output path or None, stdin bytes or None)."""
    work = tmp_path / "work"
    outdir = tmp_path / "outdir"
    work.mkdir()
    outdir.mkdir()
    out = outdir / "out.png"
    good = write_png(work / "in.png", random_image(rng, 16, 12, 3))
    stdin = None

    def bad_input(name, data, rc=1):
        p = work / name
        p.write_bytes(data)
        return ["-m", "box3", p, out], rc, [name], out

    kind, _, arg = case.partition(":")
    if kind == "missing-input":
        args, rc, tokens = ["-m", "box3", work / "nope.png", out], 1, ["nope.png"]
    elif kind == "truncated-png":
        data = good.read_bytes()
        cut = len(data) // 2 if arg == "half" else len(data) - 20
        args, rc, tokens, out = bad_input("trunc.png", data[:cut])
    elif kind == "truncated-jpeg":
        args, rc, tokens, out = bad_input("trunc.jpg", cut_in_scan(jpeg_bytes(rng, arg == "progressive")))
    elif kind == "text-as-png":
        args, rc, tokens, out = bad_input("notimage.png", b"this is a text file, not a PNG\n" * 4)
    elif kind == "empty-input":
        args, rc, tokens, out = bad_input("empty.png", b"")
    elif kind == "input-is-directory":
        (work / "adir.png").mkdir()
        args, rc, tokens = ["-m", "box3", work / "adir.png", out], 1, ["adir.png"]
    elif kind == "empty-stdin":
        args, rc, tokens, stdin = ["-m", "box3", "-", out], 1, [("standard input", "stdin", "'-'")], b""
    elif kind == "garbage-stdin":
        args, rc, tokens, stdin = ["-", out], 1, [("standard input", "stdin", "'-'")], b"\x00garbage" * 10
    elif kind == "unknown-mask":
        args, rc, tokens = ["-m", "nosuchmask", good, out], 2, ["nosuchmask"]
    elif kind == "malformed-mask":
        (work / f"{arg}.mask").write_text(MALFORMED_MASKS[arg])
        args, rc, tokens = ["-m", "box3", "-m", work / f"{arg}.mask", good, out], 2, [f"{arg}.mask"]
    elif kind == "missing-mask-file":
        args, rc, tokens = ["-m", work / "absent.mask", good, out], 2, ["absent.mask"]
    elif kind == "output-dir-missing":
        out = outdir / "nodir" / "out.png"
        args, rc, tokens = ["-m", "box3", good, out], 1, [("nodir", "out.png")]
    elif kind == "output-parent-is-file":
        (outdir / "afile").write_bytes(b"x")
        out = outdir / "afile" / "out.png"
        args, rc, tokens = ["-m", "box3", good, out], 1, [("afile", "out.png")]
    elif kind == "output-is-directory":
        out = outdir / "isdir.png"
        out.mkdir()
        args, rc, tokens = ["-m", "box3", good, out], 1, ["isdir.png"]
    elif kind == "option":
        opt, value = arg.split("=", 1)
        args, rc, tokens = [opt, value, "-m", "box3", good, out], 2, [value]
    elif kind == "unknown-option":
        args, rc, tokens = ["--frobnicate", "-m", "box3", good, out], 2, ["frobnicate"]
    elif kind == "unknown-short-option":
        args, rc, tokens = ["-Z", "-m", "box3", good, out], 2, ["Z"]
    elif kind == "option-without-value":
        args, rc, tokens = [good, out, arg], 2, [arg]
    elif kind == "missing-output":
        args, rc, tokens = ["-m", "box3", good], 2, []
    elif kind == "no-arguments":
        args, rc, tokens = [], 2, []
    elif kind == "too-many-arguments":
        args, rc, tokens = ["-m", "box3", good, out, outdir / "third.png"], 2, []
    elif kind == "unknown-output-format":
        out = outdir / "out.xyz"
        args, rc, tokens = ["-m", "box3", good, out], 2, ["out.xyz"]
    else:
        raise ValueError(case)
    return args, rc, tokens, out, stdin


BAD_OPTIONS = ["--border=foo", "-b=", "--tile=0x8", "--tile=abc", "--tile=32769x1",
               "--tile=32x", "--tile=x8", "--tile=-4x8", "--tile=513x64", "--quality=0",
               "--quality=101", "-q=abc", "--quality=9.5", "--backend=gpu", "--format=gif",
               "-f=webp", "--kernel=fast", "--gpu-memory=0", "--gpu-memory=12Q",
               "--gpu-memory=-1M", "--gpu-memory=99999999999999999999", "--devices=",
               "--devices=0,,1", "--devices=1,1", "--devices=x", "--devices=0,", "--devices=-1"]

ERROR_CASES = (
    ["missing-input", "truncated-png:half", "truncated-png:end", "truncated-jpeg:baseline",
     "truncated-jpeg:progressive", "text-as-png", "empty-input", "input-is-directory",
     "empty-stdin", "garbage-stdin", "unknown-mask", "missing-mask-file"]
    + [f"malformed-mask:{k}" for k in MALFORMED_MASKS]
    + ["output-dir-missing", "output-parent-is-file", "output-is-directory"]
    + [f"option:{o}" for o in BAD_OPTIONS]
    + ["unknown-option", "unknown-short-option", "option-without-value:-m",
       "option-without-value:--tile", "missing-output", "no-arguments", "too-many-arguments",
       "unknown-output-format"]
)
# cases whose output path is an ordinary file path: also run with it existing
PLAIN_OUTPUT = {c for c in ERROR_CASES if not c.startswith(("output-", "missing-output", "no-arg"))}


def snapshot(folder):
    return {p.relative_to(folder): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


ERROR_PARAMS = [pytest.param(c, e, id=f"{c}-{'existing-output' if e else 'no-output'}")
                for c in ERROR_CASES for e in (False, True) if c in PLAIN_OUTPUT or not e]


@pytest.mark.parametrize("case,existing", ERROR_PARAMS)
def test_error(gf, rng, tmp_path, case, existing):
    args, rc, tokens, out, stdin = setup_case(case, tmp_path, rng)
    old = b"previous output, must survive\n"
    if existing:
        out.write_bytes(old)
    work_before = snapshot(tmp_path / "work")
    out_before = snapshot(tmp_path / "outdir")
    r = gf.run("--backend", gf.backend, *args, stdin=stdin)
    check_error(r, rc, tokens)
    assert snapshot(tmp_path / "outdir") == out_before, "the output folder changed (partial output?)"
    assert snapshot(tmp_path / "work") == work_before, "an input file changed"
    if existing:
        assert out.read_bytes() == old
    elif out is not None and out.name not in ("isdir.png",):
        assert not out.exists(), "an output file was created"


@pytest.mark.parametrize("tile,kernel,limit", [("2048x1", "tiled", "1024 threads"),
                                               ("32x33", "naive", "1024 threads"),
                                               ("32768x2", "auto", "32768 output pixels")])
def test_tile_limit_message(gf, rng, tmp_path, tile, kernel, limit):
    """A tile over the limit of the kernel version (one thread per pixel for
    naive and tiled; 32768 pixels for the others: the gray row streams at
    512x64) is refused
    as bad usage on any backend, whatever the order of the options."""
    src = write_png(tmp_path / "in.png", random_image(rng, 8, 8, 1))
    for args in (["--tile", tile, "--kernel", kernel], ["--kernel", kernel, "--tile", tile]):
        r = gf.run("--backend", gf.backend, *args, "-m", "box3", src, tmp_path / "o.png")
        check_error(r, 2, [tile, limit])
        assert not (tmp_path / "o.png").exists()


def test_error_stdout_output_untouched(gf, tmp_path):
    """A failure with OUTPUT '-' writes nothing on stdout."""
    r = gf.run("--backend", gf.backend, "-m", "box3", tmp_path / "missing.png", "-")
    check_error(r, 1, ["missing.png"])


def test_valid_option_boundaries(gf, rng, tmp_path):
    """The ends of the valid ranges are accepted."""
    src = write_png(tmp_path / "in.png", random_image(rng, 12, 9, 3))
    for extra in (["-q", "1"], ["-q", "100"], ["--tile", "1024x1"], ["--tile", "1x1024"],
                  ["--tile", "32x32"], ["--tile", "auto"], ["--kernel", "naive"],
                  ["--kernel", "tiled"], ["--format", "jpeg"]):
        dst = tmp_path / "o.jpg"
        gf.run("--backend", gf.backend, *extra, "-m", "box3", src, dst).ok()
        assert dst.exists()
        dst.unlink()


# ---------------------------------------------------------------------------
# backends


def test_list_devices(gf, backend):
    r = gf.run("--list-devices")
    if r.rc == 0:
        assert r.out.strip(), "--list-devices printed no device"
    else:
        check_error(r, 1, [("GPU", "CUDA", "gpu", "cuda", "device")])
    if backend == "cuda":
        assert r.rc == 0, "--backend cuda asked for, but no usable GPU:\n" + r.describe()


def test_list_paths(gf):
    """The direct kernel's paths, the order it tries them, what each runs:
    the same facts the oracle tests of each path rely on (test_oracle.py),
    with no GPU needed."""
    r = gf.run("--list-paths").ok()
    assert r.err == ""
    paths = parse_paths(r.out.decode())
    names = [name for name, _, _ in paths]
    assert names[0] == "gradient pair, 16-bit lanes" and names[-1] == "float", names
    assert all(masks for _, masks, _ in paths), paths
    by_name = {}
    for name, masks, sizes in paths:
        by_name.setdefault(name, []).append(sizes)
    odd = lambda lo, hi: list(range(lo, hi + 1, 2))
    # the gradient pairs in lanes: RGBA 3x3 only (gray pairs take DP4A)
    assert by_name["gradient pair, 16-bit lanes"] == [{"RGBA": [3], "RGBA --filter-alpha": [3]}]
    # any weights: 3x3 to 7x7, RGB to 5x5
    assert by_name["float"] == [{"gray": [3, 5, 7], "gray+alpha": [3, 5, 7], "RGB": [3, 5],
                                 "RGBA": [3, 5, 7], "RGBA --filter-alpha": [3, 5, 7]}]
    assert by_name["DP4A"][0]["gray"] == [3, 5, 7, 15] and "RGB" not in by_name["DP4A"][0]
    # the running sums: RGBA boxes of 5x5 to 31x31 (test_oracle's RUNNING_SIZES)
    assert by_name["box, running sums in 16-bit lanes"] == [
        {"RGBA": odd(5, 31), "RGBA --filter-alpha": odd(5, 31)}]
    # the tensor cores, twice: gray boxes first, then any column times row
    # of bytes: 11x11 to 31x31, never RGB
    assert by_name["separable integer, tensor cores"] == [
        {"gray": odd(11, 31)}, {"gray": odd(11, 31), "RGBA": odd(11, 31), "RGBA --filter-alpha": odd(11, 31)}]
    assert names.index("separable integer, tensor cores") < names.index("box, prefix sums across a warp")
    # every path the oracle tests name in -v is listed
    assert {"box, prefix sums across a warp", "separable integer, row streams in 16-bit lanes",
            "separable integer", "DP2A"} <= set(names)


def test_cuda_without_gpu_fails(gf, rng, tmp_path, gpu_usable):
    if gpu_usable:
        pytest.skip("a GPU is usable here")
    src = write_png(tmp_path / "in.png", random_image(rng, 10, 10, 3))
    out = tmp_path / "out.png"
    r = gf.run("--backend", "cuda", "-m", "box3", src, out)
    msg = check_error(r, 1)
    assert re.search(r"gpu|cuda", msg, re.I), msg
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--backend", "auto"], []], ids=["auto", "default"])
def test_auto_without_gpu_is_quiet(gf, rng, tmp_path, gpu_usable, flags):
    """The auto route runs small work on the CPU without a word; -v says why
    in one line (the estimates). Large work with no usable GPU: test_backends."""
    if gpu_usable:
        pytest.skip("a GPU is usable here")
    img = random_image(rng, 40, 20, 4)
    src = write_png(tmp_path / "in.png", img)
    r = gf.run(*flags, "-m", "sobel", src, tmp_path / "auto.png").ok()
    assert r.err == "", r.err
    r = gf.run(*flags, "-v", "-m", "sobel", src, tmp_path / "auto.png").ok()
    why = [line for line in r.err_lines if "auto: the CPU (estimates: cpu" in line]
    assert len(why) == 1 and "running on the CPU" not in r.err, r.err
    gf.run("--backend", "cpu", "-m", "sobel", src, tmp_path / "cpu.png").ok()
    assert (tmp_path / "auto.png").read_bytes() == (tmp_path / "cpu.png").read_bytes()
    assert_close(read_png(tmp_path / "auto.png"), apply_masks(img, ["sobel"]))


def test_tile_on_the_cpu_says_it_is_ignored(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 20, 10, 3))
    r = gf.run("--backend", "cpu", "--tile", "32x8", "-m", "box3", src, tmp_path / "o.png").ok()
    assert len(r.err_lines) == 1 and "--tile" in r.err_lines[0] and "ignores" in r.err_lines[0]
    r = gf.run("--backend", "cpu", "--quiet", "--tile", "32x8", "-m", "box3", src,
               tmp_path / "o.png").ok()
    assert r.err == ""


@pytest.mark.parametrize("flags", [["--backend", "auto"], []], ids=["auto", "default"])
def test_auto_with_gpu_is_quiet(gf, rng, tmp_path, gpu_usable, flags):
    if not gpu_usable:
        pytest.skip("no usable GPU here")
    img = random_image(rng, 40, 20, 4)
    src = write_png(tmp_path / "in.png", img)
    r = gf.run(*flags, "-m", "sobel", src, tmp_path / "auto.png").ok()
    assert r.err == "", f"unexpected stderr: {r.err!r}"
    assert_close(read_png(tmp_path / "auto.png"), apply_masks(img, ["sobel"]))


def test_cpu_backend_is_quiet(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 10, 10, 3))
    r = gf.run("--backend", "cpu", "-m", "box3", src, tmp_path / "o.png").ok()
    assert r.err == ""


@pytest.mark.cuda_only
def test_cuda_verbose(gf, rng, tmp_path):
    src = write_png(tmp_path / "in.png", random_image(rng, 300, 200, 3))
    r = gf.run("--backend", "cuda", "-v", "-m", "gaussian5", "--tile", "32x8", src,
               tmp_path / "o.png").ok()
    text = r.err.lower()
    for word in ["32x8", "block", "grid", "occupancy", "shared"]:
        assert word in text, f"-v output does not mention {word!r}:\n{r.err}"
