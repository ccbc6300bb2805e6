#!/usr/bin/env bash
# A/B of one kernel object on the GPU machine, side by side in one run: the
# bench and the tool linked with BASE (the object built from the code to
# compare against) and with the current one, run alternately ROUNDS times
# (default 2) so that both see the same clocks and the same machine.
#
#   BASE=build/base/conv2d.o bash bench/ab.sh [gpufilter-bench options]
#   AB_SWEEPS="--kernel direct -m sobel out/big4.png;-m box3 out/big1.png"
#
# Run after `bash bench/gpu_check.sh build` (which links the current one);
# build/ is left linked with the current object. AB_SWEEPS: ';'-separated
# `gpufilter --tile sweep` arguments, each run with both builds (the auto
# tile's row and the auto-versus-best line are printed).
set -euo pipefail
cd "$(dirname "$0")/.."
base=${BASE:?BASE=the baseline kernel object, e.g. build/base/conv2d.o}
current=build/obj/$(basename "$base")
libs=()
[ -d .deps/lib ] && libs=(LIBDEFLATE=1 TURBOJPEG=1 CFLAGS="-O2 -g -L$PWD/.deps/lib")

link_with() {  # object -> build/{gpufilter,gpufilter-bench}-$2
    cp "$1" "$current"
    touch build/obj/*.o  # newer than the sources: relink only
    make -s -j"$(nproc)" STB_CFLAGS="${STB_CFLAGS:--I.deps/stb}" "${libs[@]}" all bench >/dev/null
    # the copies stay in build/, where the bench finds bench/masks (beside its folder)
    cp build/gpufilter "build/gpufilter-$2"
    cp build/gpufilter-bench "build/gpufilter-bench-$2"
}

cp "$current" "build/ab-current.o"
link_with "$base" base
link_with "build/ab-current.o" new
IFS=';' read -r -a sweeps <<<"${AB_SWEEPS:-}"
for round in $(seq "${ROUNDS:-2}"); do
    for build in base new; do
        echo "==== $build, round $round"
        "build/gpufilter-bench-$build" "$@" | grep -E '^(copy|conv2d|histogram|reduce|scan|lut|equalize) ' |
            sed -E 's/  +/ /g' | cut -c1-"${AB_WIDTH:-100}"
        for args in "${sweeps[@]}"; do
            # shellcheck disable=SC2086  # each entry is a list of arguments
            "build/gpufilter-$build" --backend cuda --tile sweep $args |
                grep -E '^conv2d|<- auto|^auto ' | cut -c1-"${AB_WIDTH:-100}"
        done
    done
done
rm -f "build/ab-current.o"
