#!/usr/bin/env bash
# The constants of --backend auto's cost model (src/cost_model.c), measured
# on this machine from gpufilter's own -v stage times:
#
#   bash bench/cost_model.sh            # BIN=build/gpufilter, R=3 runs each (median)
#
# CPU rates come from `--backend cpu` on all the cores (CORES, default
# nproc) on a 4000x3000 RGB image, per mask, as a core's share: filter time
# x cores / values (the model divides by the cores again, so the rates
# carry how far the cores scale: hyperthreads, shared memory bandwidth),
# the taps counted as the model counts them; the GPU's start, copy
# rate, first launch and exit from `--backend cuda` (skipped without a GPU); the
# decode rates from the same calls. Prints one row per measurement, then the
# block of #defines to put in cost_model.c.
set -euo pipefail
BIN=${BIN:-build/gpufilter}
R=${R:-3}
DIR=${DIR:-/tmp/gpufilter-cost}
mkdir -p "$DIR"
PYTHON=${PYTHON:-$( [ -x build/venv/bin/python ] && echo build/venv/bin/python || echo python3)}

"$PYTHON" - "$DIR" <<'EOF'
import sys
import numpy as np
from PIL import Image
out = sys.argv[1]
photo = Image.open("tests/data/images/astronaut.png").convert("RGB")
img = photo.resize((4000, 3000), Image.LANCZOS)
img.save(f"{out}/in.png", compress_level=3)
img.save(f"{out}/in.jpg", quality=92)
rng = np.random.default_rng(7)
weights = rng.integers(-4, 5, size=(15, 15))
with open(f"{out}/int15.mask", "w") as f:  # integer, not separable: every tap
    f.write("15 15 113 128\n")
    for row in weights:
        f.write(" ".join(map(str, row)) + "\n")
with open(f"{out}/box31.mask", "w") as f:  # separable, running sums
    f.write("31 31 961 0\n" + "\n".join(["1 " * 31] * 31) + "\n")
with open(f"{out}/frac7.mask", "w") as f:  # fractional: the double path
    f.write("7 7 1 0\n")
    for row in rng.uniform(0, 0.04, size=(7, 7)).round(4):
        f.write(" ".join(map(str, row)) + "\n")
EOF
VALUES=$((4000 * 3000 * 3))
CORES=${CORES:-$(nproc)}

# median of R runs of one stage's ms from the -v line
stage_ms() {  # stage, args...
    local stage=$1; shift
    for _ in $(seq "$R"); do
        "$BIN" -v --force "$@" 2>&1 | grep -o "$stage [0-9.]* ms" | head -n 1 | awk '{print $2}'
    done | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'
}

printf '%-34s %10s %14s\n' "measurement" "ms" "rate"
# all cores: ms and the taps a value its path costs (from the -v line)
: > "$DIR/cpu_rows"
for spec in "sobel 2" "gaussian5 1" "$DIR/box31.mask 1" "$DIR/int15.mask 1" "$DIR/frac7.mask 1" \
            "gaussian:sigma=100 1"; do
    set -- $spec
    ms=$(stage_ms filter --backend cpu -j "$CORES" -m "$1" "$DIR/in.png" "$DIR/out.png")
    line=$("$BIN" -v --force --backend cpu -j "$CORES" -m "$1" "$DIR/in.png" "$DIR/out.png" 2>&1 | grep "gpufilter: cpu: ")
    taps=$(echo "$line" | grep -o "([0-9]* taps" | tr -dc 0-9)
    path=integer
    echo "$line" | grep -q "double sums" && path=double
    echo "$line" | grep -q "separable float sums" && path=float
    printf '%-34s %10s %14s\n' "cpu -j $CORES $(basename "$1") ($path, $taps taps)" "$ms" \
        "$(awk -v ms="$ms" -v v=$VALUES -v n="$CORES" 'BEGIN {printf "%.2f", ms * 1e6 * n / v}') ns/value"
    echo "$path $2 $taps $ms" >> "$DIR/cpu_rows"
done
# a tone operation runs on one thread (the model does not divide it)
ms=$(stage_ms filter --backend cpu -j 1 --equalize "$DIR/in.png" "$DIR/out.png")
printf '%-34s %10s %14s\n' "cpu -j 1 --equalize" "$ms" "$(awk -v ms="$ms" -v v=$VALUES 'BEGIN {printf "%.2f", ms * 1e6 / v}') ns/value"
for f in in.png in.jpg; do
    ms=$(stage_ms decode --backend cpu "$DIR/$f" "$DIR/out.png")
    printf '%-34s %10s %14s\n' "decode $f" "$ms" "$(awk -v ms="$ms" -v v=$VALUES 'BEGIN {printf "%.2f", ms * 1e6 / v}') ns/value"
done
if "$BIN" --list-devices >/dev/null 2>&1; then
    for _ in $(seq "$R"); do
        "$BIN" -v --force --backend cuda -m sobel "$DIR/in.png" "$DIR/out.png" 2>&1 |
            grep -o "cuda start [0-9.]* ms" | awk '{print $3}'
    done | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}' > "$DIR/start"
    printf '%-34s %10s\n' "cuda start (beside the decode)" "$(cat "$DIR/start")"
    up=$(stage_ms upload --backend cuda -m sobel "$DIR/in.png" "$DIR/out.png")
    down=$(stage_ms download --backend cuda -m sobel "$DIR/in.png" "$DIR/out.png")
    filt=$(stage_ms filter --backend cuda -m sobel "$DIR/in.png" "$DIR/out.png")
    printf '%-34s %10s %14s\n' "cuda upload" "$up" "$(awk -v ms="$up" -v v=$VALUES 'BEGIN {printf "%.2f", v / (ms * 1e6)}') B/ns"
    printf '%-34s %10s %14s\n' "cuda download" "$down" "$(awk -v ms="$down" -v v=$VALUES 'BEGIN {printf "%.2f", v / (ms * 1e6)}') B/ns"
    printf '%-34s %10s\n' "cuda filter, first launch (sobel)" "$filt"
    # the exit: from the output's last write to the process's end (the
    # driver's teardown of the context; GPUFILTER_EARLY_EXIT unset)
    exit_ms=$(env -u GPUFILTER_EARLY_EXIT "$PYTHON" - "$BIN" "$DIR" "$R" <<'EOF'
import os, statistics, subprocess, sys, time
binary, folder, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
out, ms = os.path.join(folder, "exit.png"), []
for _ in range(runs):
    subprocess.run([binary, "--force", "--backend", "cuda", "-m", "sobel",
                    os.path.join(folder, "in.png"), out], check=True)
    ms.append((time.time_ns() - os.stat(out).st_mtime_ns) / 1e6)
print(f"{statistics.median(ms):.1f}")
EOF
)
    printf '%-34s %10s\n' "cuda exit (the context's teardown)" "$exit_ms"
fi
echo
# the model's CPU constants: value and tap by least squares over the
# one-matrix integer rows; a further matrix's cost from the rows with more
# (sobel's pair, finished in floats, can cost less a value than one
# matrix: then 0); the double path's tap from the fractional mask, the
# float 1-D passes' from the gaussian of sigma 100 (near where the routes
# cross for a 12 Mpx JPEG)
"$PYTHON" - "$DIR/cpu_rows" "$VALUES" "$CORES" <<'EOF'
import sys
import numpy as np
rows = [line.split() for line in open(sys.argv[1])]
values = float(sys.argv[2]) / float(sys.argv[3])  # a core's share
ints = [(float(m), float(t), float(ms) * 1e6 / values) for p, m, t, ms in rows if p == "integer"]
one = [(t, ns) for m, t, ns in ints if m == 1]
a = np.array([[1.0, t] for t, _ in one])
value_ns, tap_ns = np.linalg.lstsq(a, np.array([ns for _, ns in one]), rcond=None)[0]
more = [(ns - value_ns - tap_ns * t) / (m - 1) for m, t, ns in ints if m > 1]
matrix_ns = max(0.0, float(np.mean(more))) if more else 0.0
doubles = [(float(m), float(t), float(ms) * 1e6 / values) for p, m, t, ms in rows if p == "double"]
double_ns = np.mean([(ns - value_ns - matrix_ns * (m - 1)) / t for m, t, ns in doubles])
floats = [(float(t), float(ms) * 1e6 / values) for p, m, t, ms in rows if p == "float"]
float_ns = np.mean([(ns - value_ns) / t for t, ns in floats])
print(f"#define CPU_VALUE_NS {value_ns:.2f}\n#define CPU_MATRIX_NS {matrix_ns:.2f}\n"
      f"#define CPU_TAP_NS {tap_ns:.3f}\n#define CPU_DOUBLE_TAP_NS {double_ns:.3f}\n"
      f"#define CPU_FLOAT_TAP_NS {float_ns:.3f}")
EOF
echo "(the CPU rows on $CORES of $(nproc) cores of: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'))"
rm -f "$DIR/cpu_rows"
