"""--diffuse: linear heat and Perona-Malik diffusion (docs/diffuse.md), on
the reference backend and the one under test (cpu; cuda runs the same host
code through its on_host path).

The oracle is an independent numpy implementation of the same explicit
scheme in float64: u' = u + step * (f(u_N - u) + f(u_S - u) + f(u_W - u)
+ f(u_E - u)), f(d) = g(|d|) d, neighbours from np.pad with the border's
numpy mode; K from numpy.percentile (linear) of the forward-difference
gradient magnitudes of the input over the filtered channels; np.rint and
clip once at the end. Rule: exact equality, except by one where the
float64 value lies within 1e-6 of k + 1/2 (the two sum in other orders).
On --backend cuda the state is float32 (kernels/diffuse_gpu.cu): off by one
is allowed where the float64 value lies within CUDA_WINDOW(top) of k + 1/2
(docs/diffuse.md: 20 iterations x 8 roundings of 2^-24 relative at the
depth's top value), never by more.

    python3 -m pytest tests/cli/test_diffuse.py -q --backend cpu
"""

import re

import numpy as np
import pytest

from conftest import grid_mode
from gftest import as3d, read_deep, write_png
from test_cli import check_error
from test_depth16_ops import write16

BORDERS = ["nearest", "constant", "reflect", "mirror", "wrap"]
NUMPY_MODE = {"nearest": "edge", "constant": "constant", "reflect": "symmetric",
              "mirror": "reflect", "wrap": "wrap"}
KINDS = ["heat", "pm-exp", "pm-rational"]


# ---------------------------------------------------------------------------
# the oracle


def pad(u, border):
    return np.pad(u, 1, mode=NUMPY_MODE[border])


def flux(kind, d, k):
    if kind == "heat":
        return d
    r = (d / k) ** 2
    return (np.exp(-r) if kind == "pm-exp" else 1.0 / (1.0 + r)) * d


def percentile_k(planes, border, percentile):
    mags = []
    for u in planes:
        p = pad(u, border)
        dx, dy = p[1:-1, 2:] - u, p[2:, 1:-1] - u
        mags.append(np.sqrt(dx * dx + dy * dy).ravel())
    return float(np.percentile(np.concatenate(mags), percentile))


def diffuse_plane(u, kind, iterations, step, k, border):
    if kind != "heat" and k == 0.0:
        return u
    for _ in range(iterations):
        p = pad(u, border)
        north, south = p[:-2, 1:-1], p[2:, 1:-1]
        west, east = p[1:-1, :-2], p[1:-1, 2:]
        total = ((flux(kind, north - u, k) + flux(kind, south - u, k)) +
                 flux(kind, west - u, k)) + flux(kind, east - u, k)
        u = u + step * total
    return u


def oracle(img, kind, iterations=16, step=0.2, k=None, percentile=90.0, border="nearest",
           filter_alpha=False):
    """(the unrounded float64 result, K used)."""
    img = as3d(img)
    c = img.shape[2]
    filtered = c - 1 if c in (2, 4) and not filter_alpha else c
    planes = [img[:, :, i].astype(np.float64) for i in range(filtered)]
    if kind != "heat" and not k:
        k = percentile_k(planes, border, percentile)
    out = img.astype(np.float64)
    for i, u in enumerate(planes):
        out[:, :, i] = diffuse_plane(u, kind, iterations, step, k or 0.0, border)
    return out, k


# the backend the `on` fixture runs now: the cuda one gets the float32 window
RUNNING = {"backend": "reference"}


def cuda_window(top):
    return 20 * 8 * 2.0 ** -24 * top


def check(got, exact, top, what):
    got = as3d(got).astype(np.int64)
    want = np.clip(np.rint(exact), 0, top).astype(np.int64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    window = cuda_window(top) if RUNNING["backend"] == "cuda" else 1e-6
    tie = np.abs(exact - np.floor(exact) - 0.5) < window
    bad = (got != want) & ~(tie & (np.abs(got - want) <= 1))
    if bad.any():
        y, x, c = np.argwhere(bad)[0]
        pytest.fail(f"{what}: {int(bad.sum())} samples differ; first at ({x}, {y}) channel {c}: "
                    f"got {got[y, x, c]}, expected {want[y, x, c]} (exact {exact[y, x, c]!r})")


# ---------------------------------------------------------------------------
# running


def spec(kind, iterations=None, step=None, k=None, percentile=None):
    keys = [f"{n}={v}" for n, v in (("iterations", iterations), ("step", step), ("k", k),
                                    ("percentile", percentile)) if v is not None]
    return f"--diffuse={kind}" + (":" + ",".join(keys) if keys else "")


def run(gf, tmp_path, img, args, backend, depth=8, tag="x", env=None):
    src = tmp_path / f"in-{tag}.png"
    if depth == 16:
        write16(src, img)
    else:
        write_png(src, img)
    dst = tmp_path / f"out-{tag}-{backend}.png"
    r = gf.run("--backend", backend, *args, str(src), str(dst), env=env).ok()
    got = read_deep(dst)
    assert got.dtype == (np.uint16 if depth == 16 else np.uint8)
    return got, r


def smooth_noise(rng, h, w, c, top=255):
    """Flat regions, a step edge and noise: something for K to separate."""
    y, x = np.mgrid[0:h, 0:w]
    base = np.where(x < w // 2, 0.25, 0.75) * top + (y * 0.1 * top / max(h, 1))
    img = base[:, :, None] + rng.normal(0, top * 0.04, (h, w, c))
    return np.clip(np.rint(img), 0, top).astype(np.uint16 if top > 255 else np.uint8)


@pytest.fixture(params=["reference", "tested"])
def on(request, backend):
    RUNNING["backend"] = "reference" if request.param == "reference" else backend
    return RUNNING["backend"]


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


# ---------------------------------------------------------------------------
# against the oracle


@pytest.mark.reduce(3)
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("kind", KINDS)
def test_kinds_and_borders(gf, tmp_path, rng, on, kind, border):
    img = smooth_noise(rng, 19, 23, 3)
    got, _ = run(gf, tmp_path, img, [spec(kind, iterations=20), "-b", border], on)
    exact, _ = oracle(img, kind, iterations=20, border=border)
    check(got, exact, 255, f"{kind} -b {border}")
    assert not np.array_equal(got, img), "nothing diffused"


@pytest.mark.parametrize("filter_alpha", [False, True], ids=["alpha-kept", "filter-alpha"])
@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_channels(gf, tmp_path, rng, on, channels, filter_alpha):
    img = smooth_noise(rng, 16, 21, channels)
    extra = ["--filter-alpha"] if filter_alpha else []
    got, _ = run(gf, tmp_path, img, [spec("pm-rational", iterations=5), "-b", "reflect", *extra], on)
    exact, _ = oracle(img, "pm-rational", iterations=5, border="reflect", filter_alpha=filter_alpha)
    check(got, exact, 255, f"{channels} channels")
    if channels in (2, 4) and not filter_alpha:
        assert np.array_equal(as3d(got)[:, :, -1], as3d(img)[:, :, -1]), "alpha changed"


@pytest.mark.parametrize("border", ["nearest", "constant", "wrap"])
@pytest.mark.parametrize("kind", KINDS)
def test_16_bit(gf, tmp_path, rng, on, kind, border):
    img = smooth_noise(rng, 17, 15, 3, top=65535)
    got, _ = run(gf, tmp_path, img, [spec(kind, iterations=8, step=0.25), "-b", border], on,
                 depth=16)
    exact, _ = oracle(img, kind, iterations=8, step=0.25, border=border)
    check(got, exact, 65535, f"16-bit {kind} -b {border}")


@pytest.mark.parametrize("iterations", [1, 20])
@pytest.mark.parametrize("k", [None, 6.5, 40])
def test_k_given_or_percentile(gf, tmp_path, rng, on, k, iterations):
    img = smooth_noise(rng, 20, 20, 1)
    got, _ = run(gf, tmp_path, img, [spec("pm-exp", iterations=iterations, k=k)], on)
    exact, _ = oracle(img, "pm-exp", iterations=iterations, k=k)
    check(got, exact, 255, f"k={k} iterations={iterations}")


@pytest.mark.parametrize("percentile", [0, 50, 99.5, 100])
def test_percentile_and_verbose_k(gf, tmp_path, rng, on, percentile):
    img = smooth_noise(rng, 18, 13, 4)
    got, r = run(gf, tmp_path, img, ["-v", spec("pm-exp", iterations=3, percentile=percentile),
                                      "-b", "mirror"], on)
    exact, k = oracle(img, "pm-exp", iterations=3, percentile=percentile, border="mirror")
    check(got, exact, 255, f"percentile {percentile}")
    line = re.search(r"diffuse: pm-exp, 3 iterations, step 0\.2, K (\S+) \(percentile", r.err)
    assert line, f"no -v line for the diffusion: {r.err!r}"
    assert float(line.group(1)) == pytest.approx(k, rel=1e-5)


def test_positional_values_and_default_kind(gf, tmp_path, rng, on):
    img = smooth_noise(rng, 12, 14, 1)
    got, _ = run(gf, tmp_path, img, ["--diffuse=heat:7,0.125"], on)
    check(got, oracle(img, "heat", iterations=7, step=0.125)[0], 255, "heat:7,0.125")
    got, _ = run(gf, tmp_path, img, ["--diffuse"], on, tag="bare")
    check(got, oracle(img, "pm-exp")[0], 255, "bare --diffuse (pm-exp, defaults)")


@pytest.mark.parametrize("kind", KINDS)
def test_constant_image_stays(gf, tmp_path, on, kind):
    img = np.full((9, 11, 3), 137, np.uint8)
    got, _ = run(gf, tmp_path, img, [spec(kind, iterations=20, step=0.25)], on)
    assert np.array_equal(got, img)


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("shape", [(1, 9), (9, 1), (2, 2), (1, 1)], ids=lambda s: f"{s[1]}x{s[0]}")
def test_awkward_sizes(gf, tmp_path, rng, on, shape, border):
    img = rng.integers(0, 256, (*shape, 1), dtype=np.uint8)
    got, _ = run(gf, tmp_path, img, [spec("pm-exp", iterations=4, k=30), "-b", border], on)
    check(got, oracle(img, "pm-exp", iterations=4, k=30, border=border)[0], 255,
          f"{shape[1]}x{shape[0]} -b {border}")


def test_composes_in_order(gf, tmp_path, rng, on):
    """--diffuse then --auto-level: the stretch works on the rounded diffusion."""
    img = smooth_noise(rng, 15, 15, 1)
    got, _ = run(gf, tmp_path, img, ["--diffuse=heat:iterations=2", "--auto-level"], on)
    u = np.clip(np.rint(oracle(img, "heat", iterations=2)[0]), 0, 255)
    lo, hi = u.min(), u.max()
    want = np.floor((u - lo) * 255.0 / (hi - lo) + 0.5) if hi > lo else u
    assert np.abs(as3d(got).astype(int) - want.astype(int)).max() <= 1


# ---------------------------------------------------------------------------
# refused


@pytest.mark.parametrize("value, tokens", [
    ("blur", ("unknown kind", "heat, pm-exp, pm-rational")),
    ("heat:step=0.3", ("step", "0.25")),
    ("pm-exp:step=0", ("step",)),
    ("pm-exp:iterations=0", ("iterations",)),
    ("pm-exp:iterations=2.5", ("iterations", "whole number")),
    ("pm-exp:k=-1", ("k",)),
    ("pm-exp:percentile=101", ("percentile",)),
    ("heat:k=4", ("iterations, step",)),
    ("pm-exp:sigma=2", ("iterations, step, k, percentile",)),
    ("pm-exp:iterations=3,iterations=4", ("given twice",)),
    ("pm-exp:iterations=3,0.2", ("without its key",)),
    ("pm-rational:4,0.1,5,50,9", ("iterations, step, k, percentile",)),
])
def test_refused(gf, tmp_path, value, tokens):
    src = tmp_path / "in.png"
    write_png(src, np.zeros((4, 4), np.uint8))
    r = gf.run(f"--diffuse={value}", str(src), str(tmp_path / "out.png"))
    check_error(r, 2, tokens)
    assert not (tmp_path / "out.png").exists()


# ---------------------------------------------------------------------------
# the GPU ladder (--backend cuda only)

# (--kernel, --tile): the tiled versions on 8x8 tiles; stream on strips of
# 64 and 128 columns (2 and 4 a lane) and chunks that leave a short one
CUDA_VERSIONS = [("global", "8x8"), ("shared", "8x8"), ("temporal", "8x8"), ("temporal:1", "8x8"),
                 ("temporal:3", "8x8"), ("temporal:8", "8x8"), ("stream", None),
                 ("stream:1", "64x16"), ("stream:3", "128x16"), ("stream:3", "64x5"),
                 ("stream:8", "64x8"), ("stream:8", "128x40")]


def versions_to_run(config, kind, border):
    """Every version on the full grid. On the reduced one, global and a third
    of the others, turning with the case: each version still meets every
    kind and every border."""
    if grid_mode(config) == "full":
        return CUDA_VERSIONS
    case = KINDS.index(kind) * len(BORDERS) + BORDERS.index(border)
    return [v for i, v in enumerate(CUDA_VERSIONS) if i == 0 or (i - case) % 3 == 0]


@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("kind", KINDS)
def test_cuda_versions_agree(gf, request, tmp_path, rng, backend, kind, border):
    """Every version runs the same float operations: the same bytes, and
    within the bound of the reference; tiles of 8x8 put edge blocks, corner
    blocks and interior ones in a 45x37 image, 19 iterations leave a
    remainder after every k; a strip is wider than the image."""
    if backend != "cuda":
        pytest.skip("the GPU versions run on --backend cuda")
    RUNNING["backend"] = "cuda"
    img = smooth_noise(rng, 37, 45, 2)
    exact, _ = oracle(img, kind, iterations=19, border=border, filter_alpha=True)
    first = None
    for version, tile in versions_to_run(request.config, kind, border):
        extra = ["--tile", tile] if tile else []
        tag = version.replace(":", "-") + (f"-{tile}" if tile else "")
        got, _ = run(gf, tmp_path, img, [spec(kind, iterations=19), "-b", border, "--filter-alpha",
                                         "--kernel", version, *extra], backend, tag=tag)
        check(got, exact, 255, f"{kind} -b {border} --kernel {version} --tile {tile}")
        if first is None:
            first = got
        assert np.array_equal(got, first), f"--kernel {version} --tile {tile} differs from global"


# (height, width, channels, --filter-alpha, kind, iterations, stream:K, --tile[,
# the warps a wave holds]): images smaller than a strip; sizes that strips (64 - 2k
# or 128 - 2k columns written) and chunks do not divide, with interior strips
# and chunks (no border steps) beside edge ones; odd widths (scalar loads)
# and widths of 4n (vector loads); 1, 3 and 4 planes; iterations that leave a
# remainder; a small wave (GPUFILTER_DIFFUSE_WAVE), which gives the interior
# strips long chunks (1 to 8 a strip and plane) between short ones
STREAM_CASES = [
    ((1, 1), 1, False, "heat", 5, 3, "64x16"),
    ((1, 9), 3, False, "pm-exp", 7, 3, "128x4"),
    ((9, 1), 1, False, "pm-rational", 11, 8, "64x2"),
    ((2, 2), 4, True, "heat", 9, 8, "128x1"),
    ((3, 5), 4, False, "pm-exp", 10, 1, "64x16"),
    ((37, 45), 1, False, "heat", 13, 8, "64x7"),
    ((70, 131), 3, False, "pm-rational", 10, 3, "64x16"),
    ((90, 300), 4, True, "heat", 19, 8, "128x33"),
    ((90, 200), 1, False, "pm-exp", 11, 8, "64x64"),
    ((41, 260), 3, False, "heat", 17, 1, "128x8"),
    ((300, 300), 1, False, "heat", 16, 8, "64x16", 10),
    ((260, 150), 3, False, "pm-exp", 10, 3, "64x20", 6),
    ((200, 401), 4, True, "pm-rational", 9, 8, "128x8", 64),
    ((333, 200), 1, False, "heat", 12, 5, "64x10", 2),
]


@pytest.mark.reduce(3)  # the border turns fastest: each case keeps one or two
@pytest.mark.parametrize("border", BORDERS)
@pytest.mark.parametrize("case", STREAM_CASES,
                         ids=lambda c: f"{c[0][1]}x{c[0][0]}x{c[1]}-{c[3]}-{c[4]}it-k{c[5]}-{c[6]}"
                                       + (f"-wave{c[7]}" if len(c) > 7 else ""))
def test_cuda_stream_matches_global(gf, tmp_path, rng, backend, case, border):
    """The stream kernel gives global's bytes for every border mode at any
    size, strip, chunk, k, plane count and layout of long and short chunks."""
    if backend != "cuda":
        pytest.skip("the GPU versions run on --backend cuda")
    RUNNING["backend"] = "cuda"
    (h, w), channels, filter_alpha, kind, iterations, k, tile = case[:7]
    wave = case[7] if len(case) > 7 else None
    img = smooth_noise(rng, h, w, channels)
    args = [spec(kind, iterations=iterations), "-b", border] + (["--filter-alpha"] if filter_alpha else [])
    want, _ = run(gf, tmp_path, img, [*args, "--kernel", "global"], backend, tag="global")
    got, r = run(gf, tmp_path, img, [*args, "--kernel", f"stream:{k}", "--tile", tile, "-v"], backend,
                 tag="stream", env={"GPUFILTER_DIFFUSE_WAVE": str(wave)} if wave else None)
    if wave:  # the long chunks cut the redundant work below short chunks' alone
        sw, ch = map(int, tile.split("x"))
        strips = -(-w // (sw - 2 * k))
        short_only = 100.0 * (strips * sw * (h + -(-h // ch) * 2 * k) / (w * h) - 1.0)
        got_pct = float(re.search(r"redundant work ([\d.]+)%", r.err)[1])
        assert got_pct < short_only - 1.0, (got_pct, short_only)
    exact, _ = oracle(img, kind, iterations=iterations, border=border, filter_alpha=filter_alpha)
    check(got, exact, 255, f"{w}x{h}x{channels} {kind} -b {border} stream:{k} --tile {tile}")
    assert np.array_equal(got, want), f"stream:{k} --tile {tile} differs from global"


def test_cuda_stream_verbose_and_tile_refused(gf, tmp_path, rng, backend):
    """-v names the automatic choice (stream, its k, strip and chunk); a
    --tile whose width is not a strip's is a usage error for stream."""
    if backend != "cuda":
        pytest.skip("the GPU versions run on --backend cuda")
    img = smooth_noise(rng, 40, 50, 1)
    _, r = run(gf, tmp_path, img, ["-v", spec("heat", iterations=10)], backend)
    assert re.search(r"diffuse on .*: stream, k \d, strip (64|128) columns", r.err), r.err
    src = tmp_path / "in-refused.png"
    write_png(src, img)
    r = gf.run("--backend", backend, "--diffuse", "--kernel", "stream", "--tile", "32x8", str(src),
               str(tmp_path / "out.png"))
    check_error(r, 2, ("stream", "64 or 128"))


SWEEP_ROW = re.compile(r"^(global|shared|temporal|stream) +(\d+) +(\d+)x(\d+) +(.*?)( +\*)?$")


def test_cuda_tile_sweep(gf, tmp_path, rng, backend):
    """--tile sweep --diffuse: each version, k and tile once (the stream
    kernel's chunks cut to a short image's height), every timed row's
    figures, the automatic choice (the one -v reports) marked once; --csv
    the same rows."""
    if backend != "cuda":
        pytest.skip("--tile sweep times the cuda backend")
    img = smooth_noise(rng, 70, 100, 1)
    src = tmp_path / "in.png"
    write_png(src, img)
    _, r = run(gf, tmp_path, img, ["-v", spec("heat", iterations=4)], backend)
    auto = re.search(r"stream, k (\d), strip (\d+) columns \(\d a lane\) x chunk (\d+) rows", r.err)
    assert auto, r.err
    auto = ("stream", int(auto[1]), int(auto[2]), int(auto[3]))
    text = gf.run("--backend", "cuda", "--tile", "sweep", spec("heat", iterations=4), str(src)).ok().out.decode()
    lines = text.splitlines()
    assert re.match(r"100x70, 1 plane, 4 iterations; bound: a device copy of the planes, [0-9.]+ ms$",
                    lines[0]), lines[0]
    rows, marked, chunks = [], [], {}
    for line in lines[3:]:
        m = SWEEP_ROW.match(line)
        assert m, line
        key = (m[1], int(m[2]), int(m[3]), int(m[4]))
        rows.append(key)
        if m[6]:
            marked.append(key)
        if "cannot launch" in m[5]:
            assert key[0] == "temporal", line
            continue
        threads, blocks, shared, redundant, ms, x_global, bound = m[5].split()
        assert int(threads) > 0 and float(ms) > 0 and float(x_global) > 0, line
        assert int(blocks) > 0 or key[0] == "global", line  # global's occupancy is not queried
        assert float(redundant) >= 0 and float(bound) > 0, line
        if key[0] == "global":
            assert float(redundant) == 0 and float(x_global) == 1.0, line
        if key[0] == "stream":
            chunks.setdefault(key[1:3], []).append(key[3])
    assert len(rows) == len(set(rows)), text
    assert marked == [auto], text
    assert sorted(chunks) == [(k, w) for k in range(1, 9) for w in (64, 128)], text
    for (k, w), heights in chunks.items():
        assert {32, 64, 70} <= set(heights) and max(heights) == 70 and len(heights) <= 4, (k, w, heights)
    csv_text = gf.run("--backend", "cuda", "--tile", "sweep", "--csv", spec("heat", iterations=4),
                      str(src)).ok().out.decode()
    header, *csv_rows = csv_text.splitlines()
    assert header == ("version,k,tile,threads,blocks_per_sm,shared_bytes,redundant_pct,ms_per_iteration,"
                      "x_global,pct_of_copy_bound,chosen")
    csv_keys = [(c[0], int(c[1]), *map(int, c[2].split("x"))) for c in (row.split(",") for row in csv_rows)]
    assert csv_keys == rows, csv_text
    assert [k for k, row in zip(csv_keys, csv_rows) if row.endswith(",1")] == [auto], csv_text


def test_cuda_strips_run_the_reference(gf, tmp_path, rng, backend):
    """Over --gpu-memory the image goes in strips and the diffusion runs on
    the host: the reference's bytes exactly."""
    if backend != "cuda":
        pytest.skip("strips are the cuda backend's")
    RUNNING["backend"] = "reference"
    img = smooth_noise(rng, 64, 48, 3)
    got, _ = run(gf, tmp_path, img, [spec("pm-exp", iterations=6), "--gpu-memory", "4K"], backend)
    check(got, oracle(img, "pm-exp", iterations=6)[0], 255, "strips")


@pytest.mark.parametrize("args, tokens", [
    (["--kernel", "temporal", "-m", "box3"], ("--diffuse",)),
    (["--diffuse", "--kernel", "temporal:9"], ("temporal", "1 to 8")),
    (["--diffuse", "--kernel", "global:2"], ("temporal", "1 to 8")),
    (["--diffuse", "--kernel", "stream:0"], ("stream", "1 to 8")),
    (["--diffuse", "--kernel", "stream:9"], ("stream", "1 to 8")),
    (["--kernel", "stream", "-m", "box3"], ("--diffuse",)),
])
def test_cuda_kernel_refused(gf, tmp_path, args, tokens):
    src = tmp_path / "in.png"
    write_png(src, np.zeros((4, 4), np.uint8))
    r = gf.run(*args, str(src), str(tmp_path / "out.png"))
    check_error(r, 2, tokens)
