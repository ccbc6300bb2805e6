#!/usr/bin/env bash
# One whole check on a GPU machine, in one command: build what is missing,
# then run the stages named on the command line, in order, with every log
# under $LOGS (default $OUT, else out/gpu-check) and a short summary last.
#
#   bash bench/gpu_check.sh build bench tone sweep test sanitize
#
# Stages:
#   build     make all, build/cuda-hold and the bench (first, always)
#   bench     build/gpufilter-bench --kernels conv2d (every version, NPP peer)
#   tone      build/gpufilter-bench --kernels histogram,reduce,scan,lut,equalize
#   sweep     gpufilter --tile sweep for box3, gaussian5, sobel, gaussian7,
#             box9, random15, box15, box31, gaussian15, gaussian31 (RGBA) and
#             box3, gaussian3, box9, box31, gaussian15, gaussian31 (gray) on
#             an 8192x8192 image
#   verbose   gpufilter -v on a 8192x8192 RGBA image: the stage breakdown
#   ncu       Nsight Compute on the direct kernel (gaussian3, gray and RGBA)
#             and the instruction counts of its SASS
#   kernels   build/conv2d-check --backend cuda (tests/kernels; KERNELS_ARGS
#             adds --quick or --verbose): every conv2d version and tile
#             against the reference backend in one process
#   quick     test_oracle.py's CUDA-only tests (QUICK_K: their -k filter)
#   test      make test-gpu (PYTEST_ARGS passed through)
#   sanitize  the CLI suite's GPU tests under compute-sanitizer memcheck,
#             racecheck and synccheck, and the tensor-core tiles' tests
#             (SANITIZE_TESTS picks the files,
#             SANITIZE_TOOLS the tools, SANITIZE_ARGS adds pytest options
#             such as --part I/N, SANITIZE_TIMEOUT bounds each tool's run)
#
# At most 8 files come back from a device call, so a run of every stage
# writes 8 logs at most: JSON only with BENCH_JSON=1, the bench object (to
# carry next time) only with KEEP_BENCH_OBJ=1, the SASS into ncu.txt, the
# verbose lines into sweep.txt, the three sanitizers into sanitize.log.
#
# The stb headers are not installed on the GPU machine, nor libdeflate's
# and libturbojpeg's: carry .deps, holding .deps/stb (see DESIGN.md) and
# .deps/lib/libdeflate.a and libturbojpeg.a, which the carried objects
# link. Objects carried in build/ are kept (touched newer than the
# sources) unless REBUILD=1, so that a kernel built here is the one run.
set -uo pipefail
cd "$(dirname "$0")/.."
LOGS=${LOGS:-${OUT:-out/gpu-check}}
mkdir -p "$LOGS" out
rm -f "$LOGS/sweep.txt" "$LOGS/sanitize.log"  # the stages that append
export PYTHONUNBUFFERED=1
# the GPU machine reaches no package registry: never try to install there
export GF_INSTALL=0
# the static libdeflate and libturbojpeg the carried objects were built
# with (carried in .deps/lib): every make of this script links the same
if [ -d .deps/lib ]; then
    export LIBDEFLATE=1 TURBOJPEG=1 JPEGLIB=1 CFLAGS="-O2 -g -L$PWD/.deps/lib"
fi
STB=${STB_CFLAGS:--I.deps/stb}
summary=()

note() { summary+=("$*"); echo "== $*"; }

build() {
    if [ "${REBUILD:-0}" != 1 ] && [ -d build/obj ]; then
        find build -type f -exec touch {} +
        # touched in no set order, a program can end up newer than an object
        # it links: remove the programs, so that every one is linked again
        # from the carried objects
        find build -maxdepth 1 -type f -perm -u+x -delete
    fi
    # the static libdeflate and libturbojpeg the carried objects were built
    # with, where the GPU machine lacks their headers (carried in .deps/lib)
    local libs=()
    [ -d .deps/lib ] && libs=(LIBDEFLATE=1 TURBOJPEG=1 JPEGLIB=1 CFLAGS="-O2 -g -L$PWD/.deps/lib")
    # BUILD_TARGETS: what to build (without bench: no NPP object to compile,
    # for a call that only tests)
    make -j"$(nproc)" STB_CFLAGS="$STB" "${libs[@]}" ${BUILD_TARGETS:-all build/cuda-hold bench} \
        >"$LOGS/build.log" 2>&1 ||
        { tail -n 30 "$LOGS/build.log"; note "build: FAILED"; return 1; }
    [ -n "${OUT:-}" ] && [ "${KEEP_BENCH_OBJ:-0}" = 1 ] &&
        cp build/obj/gpufilter_bench-npp.o "$OUT/"  # to carry next time
    note "build: ok ($(build/gpufilter --version | head -n 1))"
}

big_image() {  # an 8192x8192 RGBA and a gray PNG made from a test photo
    [ -f out/big4.png ] && return 0
    python3 - <<'EOF'
import numpy as np
from PIL import Image
img = np.asarray(Image.open("tests/data/images/astronaut.png").convert("RGBA"))
big = np.tile(img, (8192 // img.shape[0] + 1, 8192 // img.shape[1] + 1, 1))[:8192, :8192]
Image.fromarray(np.ascontiguousarray(big)).save("out/big4.png", compress_level=1)
Image.fromarray(np.ascontiguousarray(big[:, :, 0])).save("out/big1.png", compress_level=1)
EOF
}

sanitize_timings() {  # tool folder: the slowest runs, and those a time limit cut
    { echo "== $1: the slowest runs (seconds, test, command)"
      sort -rn "$2/durations.tsv" 2>/dev/null | head -n "${SANITIZE_SLOWEST:-15}"
      for f in "$2"/*.running; do
          [ -e "$f" ] && echo "in flight when the run ended, for $(( $(date +%s) - $(stat -c %Y "$f") )) s: $(cat "$f")"
      done
    } | cut -c1-300 >>"$LOGS/sanitize.log"
    # runs the harness killed as hung: their processes, threads and stacks
    for f in "$2"/*.hang; do
        [ -e "$f" ] && { echo "== $1: $f"; head -c 20000 "$f"; } >>"$LOGS/sanitize.log"
    done
    local cut
    cut=$(find "$2" -name '*.running' | wc -l)
    [ "$cut" -gt 0 ] && note "sanitize $1: $cut runs in flight when the time ran out (listed in $LOGS/sanitize.log)"
    return 0
}

for stage in "$@"; do
    case $stage in
    build) build || exit 1 ;;
    bench)
        build/gpufilter-bench --kernels conv2d ${BENCH_ARGS:-} \
            ${BENCH_JSON:+--json "$LOGS/bench-conv2d.json"} \
            >"$LOGS/bench-conv2d.txt" 2>&1
        note "bench conv2d: rc $? ($LOGS/bench-conv2d.txt)" ;;
    tone)
        build/gpufilter-bench --kernels histogram,reduce,scan,lut,equalize \
            ${BENCH_JSON:+--json "$LOGS/bench-tone.json"} \
            >"$LOGS/bench-tone.txt" 2>&1
        note "bench tone: rc $? ($LOGS/bench-tone.txt)" ;;
    sweep)
        big_image
        for m in box3 gaussian5 sobel gaussian7 box9 random15 box15 box31 gaussian15 gaussian31; do
            GPUFILTER_MASKS=bench/masks build/gpufilter --backend cuda --tile sweep -m $m out/big4.png \
                >>"$LOGS/sweep.txt" 2>&1
            echo >>"$LOGS/sweep.txt"
        done
        for m in box3 gaussian3 box9 box31 gaussian15 gaussian31; do
            GPUFILTER_MASKS=bench/masks build/gpufilter --backend cuda --tile sweep -m $m out/big1.png \
                >>"$LOGS/sweep.txt" 2>&1
            echo >>"$LOGS/sweep.txt"
        done
        note "sweep: $(grep -c '^auto' "$LOGS/sweep.txt") sweeps ($LOGS/sweep.txt)" ;;
    verbose)
        big_image
        for m in sobel gaussian5; do
            build/gpufilter --backend cuda -v -m $m out/big4.png out/big-$m.png 2>&1 | tee -a "$LOGS/sweep.txt"
        done
        note "verbose: in $LOGS/sweep.txt" ;;
    ncu)  # hardware counters of version 4 (gaussian3, gray and RGBA) and its SASS
        ncu --clock-control none -k regex:conv2d_kernel4 -c 4 --section SpeedOfLight \
            --section Occupancy --section LaunchStats --section WarpStateStats \
            --section MemoryWorkloadAnalysis --section SchedulerStats \
            build/gpufilter-bench --kernels conv2d --mask gaussian3 --reps 1 --warmup 0 \
            >"$LOGS/ncu.txt" 2>&1
        note "ncu: rc $? ($LOGS/ncu.txt)"
        cuobjdump -sass build/obj/conv2d.o | awk '/Function : .*conv2d_kernel4ILi1ELi1ELi1ELi3ELi8E/ {p = 1; print; next}
            /Function : / {p = 0} p' >/tmp/sass-kernel4-gray3.txt
        cat /tmp/sass-kernel4-gray3.txt >>"$LOGS/ncu.txt"
        note "sass: $(grep -c LDG /tmp/sass-kernel4-gray3.txt) LDG, $(grep -c FFMA /tmp/sass-kernel4-gray3.txt) FFMA, $(grep -cE 'LDL|STL' /tmp/sass-kernel4-gray3.txt) local, $(grep -cE '^ +/\*[0-9a-f]+\*/' /tmp/sass-kernel4-gray3.txt) instructions" ;;
    kernels)  # every conv2d version and tile against the reference, one process
        make STB_CFLAGS="$STB" build/conv2d-check >>"$LOGS/build.log" 2>&1 &&
            build/conv2d-check --backend cuda ${KERNELS_ARGS:-} >"$LOGS/kernels.log" 2>&1
        rc=$?
        grep -E '^FAIL' "$LOGS/kernels.log" | head -n 20
        note "kernels: rc $rc: $(tail -n 1 "$LOGS/kernels.log")" ;;
    quick)  # the CUDA-only oracle tests: every kernel version, tile, border
        python3 -m pytest tests/cli/test_oracle.py -q --backend cuda --gpufilter build/gpufilter \
            -k "${QUICK_K:-cuda_}" -n "$(nproc)" -p no:cacheprovider >"$LOGS/quick.log" 2>&1
        rc=$?
        grep -E '^(FAILED|ERROR)' "$LOGS/quick.log" | head -n 20
        note "quick: rc $rc: $(tail -n 1 "$LOGS/quick.log")" ;;
    test)
        # -vv (the Makefile passes -q): every test's name and outcome as it
        # finishes, so that a run cut short by a time limit still says which
        # test failed
        make STB_CFLAGS="$STB" test-gpu PYTEST_ARGS="${PYTEST_ARGS:--n $(nproc)} -vv -rfE" \
            >"$LOGS/test-gpu.log" 2>&1
        rc=$?
        note "test-gpu: rc $rc: $(grep -E '^[0-9]+ (passed|failed)|[0-9]+ passed' "$LOGS/test-gpu.log" | tail -n 1)" ;;
    sanitize)
        # the three files do not reach the tensor cores' tiles that keep
        # their outputs in shared memory behind the column pass (RGBA 27x27
        # to 31x31 from 32 pixels wide): their own tests, 50 runs, two of
        # them with several tiles a block
        mma_tests="tests/cli/test_oracle.py::test_cuda_direct_mma_planar tests/cli/test_oracle.py::test_cuda_direct_mma_planar_walk tests/cli/test_oracle.py::test_cuda_direct_mma_tiles"
        # SANITIZE_TOOLS: which of the three; SANITIZE_ARGS: more pytest options,
        # read with the shell's quoting (-k "a or b" stays one option value)
        eval "extra=(${SANITIZE_ARGS:-})"
        # (--part I/N, -k). The logs go to a known folder, so that the
        # processes checked are counted even when the time limit cuts the run.
        for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
            folder=/tmp/sanitize-$tool; rm -rf "$folder"
            GPUFILTER_SANITIZER_LOGS=$folder timeout "${SANITIZE_TIMEOUT:-600}" python3 -m pytest \
                ${SANITIZE_TESTS:-tests/cli/test_cli.py tests/cli/test_strips.py tests/cli/test_tone.py $mma_tests} \
                -q -rfE --backend cuda --gpufilter build/gpufilter --sanitizer $tool --grid reduced \
                -n "$(nproc)" -p no:cacheprovider "${extra[@]}" >/tmp/sanitize-$tool.log 2>&1
            rc=$?
            cat /tmp/sanitize-$tool.log >>"$LOGS/sanitize.log"
            sanitize_timings "$tool" "$folder"
            grep -E '^(FAILED|ERROR)' /tmp/sanitize-$tool.log | head -n 10
            # counted from the logs, so that a run the time limit cut is counted too
            note "sanitize $tool: rc $rc: $(python3 -c "import sys; sys.path.insert(0, 'tests/cli')
from conftest import sanitizer_report; print(sanitizer_report('$tool', '$folder'))" | cut -c1-200);" \
                 "$(grep -E '[0-9]+ (passed|failed)' /tmp/sanitize-$tool.log | tail -n 1)"
        done ;;
    *) echo "gpu_check: unknown stage '$stage'"; exit 2 ;;
    esac
done

echo
echo "==== summary"
printf '%s\n' "${summary[@]}"
for f in "$LOGS"/bench-conv2d.txt "$LOGS"/bench-tone.txt; do
    [ -f "$f" ] && grep -E '^(copy|histogram|reduce|scan|lut|equalize) |^conv2d +v[2-9]' "$f" |
        sed -E 's/  +/ /g' | cut -c1-${SUMMARY_WIDTH:-112}
done
exit 0
