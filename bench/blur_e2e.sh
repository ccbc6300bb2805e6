#!/usr/bin/env bash
# End-to-end time of a large gaussian blur on a 12 Mpx JPEG: one gpufilter
# call (gaussian:sigma=S, exact sampled weights to 3 sigma) beside
# `vips gaussblur S` (its default min-ampl 0.2: a shorter mask) and
# ImageMagick `-gaussian-blur 0xS`, each a whole process from start to the
# JPEG written (quality 92). Where the vips command is missing but pyvips's
# wheels are there (pyvips-binary ships libvips without the command),
# bench/vips_gaussblur.c makes the command's calls in a process of its own
# (column vips; VIPS_LIB=path/libvips.so takes that library even where the
# command is installed), and the same gaussblur is
# also timed inside one Python process, its start and import left out
# (column pyvips); all on all cores.
#
#   bash bench/blur_e2e.sh                          # backends auto cpu; peers if installed
#   BACKENDS="auto cuda" SIGMAS="10 50 250" bash bench/blur_e2e.sh
#
# Input: WORK/in-4000x3000.jpg made by bench/e2e_peers.py (as bench/e2e.sh).
# Columns: seconds, the median of R (default 3) runs after a warm-up run;
# over TIMEOUT (default 600) s reads "timeout".
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/gpufilter-e2e}
BIN=${BIN:-$ROOT/build/gpufilter}
BACKENDS=${BACKENDS:-auto cpu}
SIGMAS=${SIGMAS:-10 50}
R=${R:-3}
TIMEOUT=${TIMEOUT:-600}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x $ROOT/build/venv/bin/python ]]; then PYTHON=$ROOT/build/venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$WORK/out"
"$PYTHON" "$ROOT/bench/e2e_peers.py" make "$WORK" 4000x3000.jpg
IN=$WORK/in-4000x3000.jpg
VIPS_CMD=()
if [[ -z ${VIPS_LIB:-} ]] && command -v vips >/dev/null; then
    VIPS_CMD=(vips gaussblur)
else
    VIPS_LIB=${VIPS_LIB:-$("$PYTHON" -c 'import glob, os, _libvips; print(glob.glob(os.path.join(os.path.dirname(_libvips.__file__), "pyvips_binary.libs", "libvips*.so*"))[0])' 2>/dev/null || true)}
    if [[ -n $VIPS_LIB ]] && cc -O2 -o "$WORK/vips-gaussblur" "$ROOT/bench/vips_gaussblur.c" -ldl; then
        VIPS_CMD=("$WORK/vips-gaussblur" "$VIPS_LIB")
    fi
fi
IM=""
for c in magick convert; do
    if command -v $c >/dev/null && [[ $($c -version 2>/dev/null) == *ImageMagick* ]]; then IM=$c; break; fi
done

now_us() { echo "${EPOCHREALTIME//[.,]/}"; }
# time_call CMD...: the median wall time of R runs after a warm-up, or a word
time_call() {
    local walls=() t0 t1 rc
    for ((i = 0; i <= R; i++)); do
        rm -f "$WORK/out/blur.jpg"
        t0=$(now_us); rc=0
        timeout -k 10 "$TIMEOUT" "$@" >/dev/null 2>"$WORK/stderr" || rc=$?
        t1=$(now_us)
        if ((rc == 124 || rc == 137)); then echo timeout; return; fi
        if ((rc != 0)) || [[ ! -s $WORK/out/blur.jpg ]]; then echo failed; head -c 300 "$WORK/stderr" >&2; return; fi
        ((i > 0)) && walls+=("$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e6 }')")
    done
    printf '%s\n' "${walls[@]}" | sort -g | awk '{ a[NR] = $1 } END { printf "%.3f", a[int((NR + 1) / 2)] }'
}

# pyvips_time SIGMA: the median in-process time of R runs after a warm-up
pyvips_time() {
    "$PYTHON" - "$IN" "$WORK/out/blur.jpg" "$1" "$R" <<'PY'
import statistics, sys, time
import pyvips
src, out, sigma, runs = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
times = []
for i in range(runs + 1):
    t0 = time.perf_counter()
    pyvips.Image.new_from_file(src, access="sequential").gaussblur(sigma).write_to_file(out + "[Q=92]")
    times.append(time.perf_counter() - t0)
print(f"{statistics.median(times[1:]):.3f}")
PY
}

printf '%-8s' sigma
for b in $BACKENDS; do printf ' %10s' "gf:$b"; done
printf ' %10s %10s %10s\n' vips pyvips magick
for s in $SIGMAS; do
    printf '%-8s' "$s"
    for b in $BACKENDS; do
        printf ' %10s' "$(time_call "$BIN" --backend "$b" -q 92 -m "gaussian:sigma=$s" "$IN" "$WORK/out/blur.jpg")"
    done
    v="n/a"; p="n/a"
    if ((${#VIPS_CMD[@]})); then v=$(time_call "${VIPS_CMD[@]}" "$IN" "$WORK/out/blur.jpg[Q=92]" "$s"); fi
    if [[ ${VIPS_CMD[0]:-} != vips ]] && "$PYTHON" -c "import pyvips" 2>/dev/null; then p=$(pyvips_time "$s"); fi
    if [[ -n $IM ]]; then m=$(time_call "$IM" "$IN" -gaussian-blur "0x$s" -quality 92 "$WORK/out/blur.jpg"); else m="n/a"; fi
    printf ' %10s %10s %10s\n' "$v" "$p" "$m"
done
echo "($(nproc) cores; $IN)"
