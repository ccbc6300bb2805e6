#!/usr/bin/env bash
# End-to-end time of one call, from the start of the process to the output
# file written (decode + filter + encode + start-up), gpufilter beside its
# peers, on the same files, the same masks and the same output format.
#
#   bash bench/e2e.sh                                  # backends auto, cpu
#   BACKENDS="auto cuda cpu" OUT=/some/dir bash bench/e2e.sh    # GPU machine
#   QUICK=1 R=1 bash bench/e2e.sh                      # small machine
#
# Inputs, made once under WORK (default /tmp/gpufilter-e2e) from the photos in
# PHOTOS (default tests/data/images), tiled and scaled with Pillow plus a
# light grain: 512x512.png, 4000x3000.jpg (quality 92), 8192x8192.png, RGB.
# SIZES="WxH.ext ..." makes other ones; IMAGES="a.png b.jpg" uses those files
# instead; QUICK=1 leaves out the 8192x8192 one.
# Masks (MASKS): sobel (magnitude sqrt(gx^2 + gy^2) of the 3x3 pair),
# gaussian5 (binomial 5x5 / 256), box31 (31x31 mean, a mask file written
# into WORK), border nearest / replicate everywhere.
# Outputs take the input's format: PNG at each tool's default level, JPEG at
# quality 92 without chroma subsampling (4:4:4, as gpufilter writes it).
#
# Columns, seconds, the median of R (default 3) runs after one warm-up run
# (page cache, driver); a call over TIMEOUT (default 300) s reads "timeout":
#   gf:B       gpufilter --backend B for each B in BACKENDS (default "auto cpu"),
#              binary BIN (default build/gpufilter); the whole process
#   opencv     one Python process with all cores (cv2.setNumThreads(cpus)):
#              from just before imread to just after imwrite
#   opencv+py  the same run's whole process, import cv2 included
#   pillow     in the process as opencv (Kernel 5x5; BoxBlur(15) = 31x31);
#              sobel n/a (no gradient magnitude)
#   vips       vips convsep --precision integer (the separable route, its
#              fastest) with the masks' 1-D halves; vips sobel
#   magick     ImageMagick -morphology Convolve (sobel n/a)
#   best       the fastest peer: opencv (in-process), pillow, vips, magick
#   B x        best peer time / gpufilter time: > 1 means gpufilter is faster
# Peers not installed read "not installed"; PYTHON picks the interpreter
# (default build/venv/bin/python if present, else python3). Nothing is
# installed or downloaded. With OUT set, the table is also written to
# $OUT/e2e.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-/tmp/gpufilter-e2e}
BIN=${BIN:-$ROOT/build/gpufilter}
BACKENDS=${BACKENDS:-auto cpu}
MASKS=${MASKS:-sobel gaussian5 box31}
R=${R:-3}
TIMEOUT=${TIMEOUT:-300}
QUICK=${QUICK:-0}
if [[ -z ${PYTHON:-} ]]; then
    if [[ -x $ROOT/build/venv/bin/python ]]; then PYTHON=$ROOT/build/venv/bin/python; else PYTHON=python3; fi
fi
if [[ $QUICK == 1 ]]; then SIZES=${SIZES:-512x512.png 4000x3000.jpg}
else SIZES=${SIZES:-512x512.png 4000x3000.jpg 8192x8192.png}; fi
PEERS="$ROOT/bench/e2e_peers.py"

[[ -x $BIN ]] || { echo "e2e: no gpufilter binary at $BIN (set BIN)" >&2; exit 2; }
BIN_STAMP=$(stat -L -c %Y "$BIN")   # a rebuild during the run is reported at the end
mkdir -p "$WORK/out"

# --- inputs -----------------------------------------------------------------
if [[ -n ${IMAGES:-} ]]; then
    read -ra INPUTS <<<"$IMAGES"
else
    "$PYTHON" "$PEERS" make "$WORK" $SIZES
    INPUTS=()
    for s in $SIZES; do INPUTS+=("$WORK/in-$s"); done
fi

# --- masks: box31 for gpufilter; matrix files (same layout, no comments) for vips
{ echo "# Box blur 31x31, the mean of the neighbourhood"; echo "31 31 961 0"
  for _ in $(seq 31); do printf '1%.0s ' $(seq 31); echo; done; } >"$WORK/box31.mask"
grep -v '^#' "$WORK/box31.mask" >"$WORK/box31.mat"
printf '5 5 256 0\n1 4 6 4 1\n4 16 24 16 4\n6 24 36 24 6\n4 16 24 16 4\n1 4 6 4 1\n' >"$WORK/gaussian5.mat"
# vips convsep's 1-D halves (its fastest route for both)
printf '5 1 16 0\n1 4 6 4 1\n' >"$WORK/gaussian5.sep.mat"
{ echo "31 1 31 0"; printf '1%.0s ' $(seq 31); echo; } >"$WORK/box31.sep.mat"
gf_mask() { if [[ $1 == box31 ]]; then echo "$WORK/box31.mask"; else echo "$1"; fi; }
# ImageMagick kernel strings ("WxH: w,w,..."), normalised by convolve:scale=!
im_kernel() { local m=$WORK/$1.mat; echo "$(head -1 "$m" | awk '{print $1"x"$2}'): $(tail -n +2 "$m" | tr -s ' \n' ',' | sed 's/^,//; s/,$//')"; }

# --- which peers are here ----------------------------------------------------
HAVE_CV=0; "$PYTHON" -c "import cv2" 2>/dev/null && HAVE_CV=1
HAVE_PIL=0; "$PYTHON" -c "import PIL" 2>/dev/null && HAVE_PIL=1
HAVE_VIPS=0; command -v vips >/dev/null && HAVE_VIPS=1
VIPS_SOBEL=0; [[ $HAVE_VIPS == 1 && $(vips -l 2>/dev/null) == *"(sobel)"* ]] && VIPS_SOBEL=1
IM=""  # 'convert' may be some other program: take it only if it says ImageMagick
for c in magick convert; do
    if command -v $c >/dev/null && [[ $($c -version 2>/dev/null) == *ImageMagick* ]]; then IM=$c; break; fi
done

# --- timing ------------------------------------------------------------------
now_us() { if [[ -n ${EPOCHREALTIME:-} ]]; then echo "${EPOCHREALTIME//[.,]/}"; else echo $(($(date +%s%N) / 1000)); fi; }

# once OUTPUT CMD...: one call; sets STATUS (ok, timeout, n/a, failed), WALL
# (s, whole process) and INPROC (the last line the command printed)
once() {
    local out=$1 t0 t1 rc=0; shift
    rm -f "$out"                      # a fresh path: no overwrite guard
    t0=$(now_us)
    timeout -k 10 "$TIMEOUT" "$@" >"$WORK/stdout" 2>"$WORK/stderr" || rc=$?
    t1=$(now_us)
    WALL=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e6 }')
    INPROC=$(tail -n 1 "$WORK/stdout")
    if ((rc == 124 || rc == 137)); then STATUS=timeout
    elif ((rc == 3)) && [[ $1 == "$PYTHON" ]]; then STATUS=n/a
    elif ((rc != 0)) || [[ ! -s $out ]]; then
        STATUS=failed; echo "  failed (status $rc): $(head -c 300 "$WORK/stderr")" >&2
    else STATUS=ok; fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { printf "%.3f", (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A RES
# measure KEY PY OUTPUT CMD...: a warm-up call, then R timed ones; RES[KEY] is
# the median wall time, or with PY=1 the median in-process time and
# RES[KEY+py] the median wall time
measure() {
    local key=$1 py=$2 out=$3 walls=() inprocs=() i; shift 3
    once "$out" "$@"                                  # warm-up
    if [[ $STATUS == ok ]]; then
        for ((i = 0; i < R; i++)); do
            once "$out" "$@"
            [[ $STATUS == ok ]] || break
            walls+=("$WALL"); inprocs+=("$INPROC")
        done
    fi
    if [[ $STATUS != ok ]]; then
        RES[$key]=$STATUS; [[ $py == 1 ]] && RES[$key+py]=$STATUS
    elif [[ $py == 1 ]]; then
        RES[$key]=$(median "${inprocs[@]}"); RES[$key+py]=$(median "${walls[@]}")
    else
        RES[$key]=$(median "${walls[@]}")
    fi
    printf '  %-40s %s%s  (%s bytes)\n' "$key" "${RES[$key]}" \
        "$([[ $py == 1 ]] && echo " / process ${RES[$key+py]}")" "$(stat -c %s "$out" 2>/dev/null || echo -)" >&2
}

echo "e2e: $($BIN --version 2>&1 | head -1); python $PYTHON (cv2 $HAVE_CV, PIL $HAVE_PIL);" \
     "vips $(vips --version 2>/dev/null || echo no); ImageMagick ${IM:-no}; $(nproc) cores; R=$R TIMEOUT=$TIMEOUT" >&2

TSV="$WORK/e2e.tsv"
{ printf 'image\tmask'; for b in $BACKENDS; do printf '\tgf:%s' "$b"; done
  printf '\topencv\topencv+py\tpillow\tvips\tmagick\n'; } >"$TSV"

outp() { echo "$WORK/out/$1-$m.$ext"; }   # each tool's own output: TOOL-MASK.EXT
for in in "${INPUTS[@]}"; do
    name=$(basename "$in"); name=${name#in-}; ext=${in##*.}
    jpeg=0; [[ ${ext,,} == jpg || ${ext,,} == jpeg ]] && jpeg=1
    cat "$in" >/dev/null                              # page cache
    for m in $MASKS; do
        echo "e2e: $name $m" >&2
        row="$name	$m"
        for b in $BACKENDS; do
            q=(); [[ $jpeg == 1 ]] && q=(-q 92)
            measure "gf:$b" 0 "$(outp gf-$b)" \
                "$BIN" --backend "$b" -m "$(gf_mask "$m")" "${q[@]}" "$in" "$(outp gf-$b)"
            row+="	${RES[gf:$b]}"
        done
        if [[ $HAVE_CV == 1 ]]; then
            measure opencv 1 "$(outp opencv)" "$PYTHON" "$PEERS" opencv "$m" "$in" "$(outp opencv)"
        else RES[opencv]="not installed"; RES[opencv+py]="not installed"; fi
        if [[ $HAVE_PIL == 1 ]]; then
            measure pillow 1 "$(outp pillow)" "$PYTHON" "$PEERS" pillow "$m" "$in" "$(outp pillow)"
        else RES[pillow]="not installed"; fi
        if [[ $HAVE_VIPS == 0 ]]; then RES[vips]="not installed"
        else
            vo=$(outp vips); vopt=""; [[ $jpeg == 1 ]] && vopt="[Q=92,subsample_mode=off]"
            if [[ $m == sobel ]]; then
                if [[ $VIPS_SOBEL == 1 ]]; then measure vips 0 "$vo" vips sobel "$in" "$vo$vopt"; else RES[vips]=n/a; fi
            else measure vips 0 "$vo" vips convsep "$in" "$vo$vopt" "$WORK/$m.sep.mat" --precision integer; fi
        fi
        if [[ -z $IM ]]; then RES[magick]="not installed"
        elif [[ $m == sobel ]]; then RES[magick]=n/a   # no magnitude in one -morphology
        else
            q=(); [[ $jpeg == 1 ]] && q=(-quality 92 -sampling-factor 1x1)
            measure magick 0 "$(outp magick)" $IM "$in" -define convolve:scale='!' \
                -morphology Convolve "$(im_kernel "$m")" "${q[@]}" "$(outp magick)"
        fi
        row+="	${RES[opencv]}	${RES[opencv+py]}	${RES[pillow]}	${RES[vips]}	${RES[magick]}"
        echo "$row" >>"$TSV"
    done
done

# --- the table: best peer and gpufilter's ratio to it, columns padded --------
TABLE=$(awk -F'\t' '
NR == 1 { for (i = 1; i <= NF; i++) { h[i] = $i; if ($i ~ /^gf:/) gf[++ng] = i
                                       if ($i ~ /^(opencv|pillow|vips|magick)$/) peer[++np] = i }
          n = NF; for (i = 1; i <= ng; i++) h[n + 1 + i] = substr(h[gf[i]], 4) " x"
          h[n + 1] = "best"; n += 1 + ng }
NR > 1  { best = ""; bname = "-"
          for (j = 1; j <= np; j++) { v = $peer[j]
              if (v ~ /^[0-9.]+$/ && (best == "" || v + 0 < best + 0)) { best = v; bname = h[peer[j]] } }
          for (i = 1; i <= NF; i++) c[NR, i] = $i
          c[NR, NF + 1] = bname
          for (i = 1; i <= ng; i++) { g = $gf[i]
              c[NR, NF + 1 + i] = (best != "" && g ~ /^[0-9.]+$/ && g > 0) ? sprintf("%.2f", best / g) : "-" } }
END     { for (i = 1; i <= n; i++) w[i] = length(h[i])
          for (r = 2; r <= NR; r++) for (i = 1; i <= n; i++) if (length(c[r, i]) > w[i]) w[i] = length(c[r, i])
          for (i = 1; i <= n; i++) printf "%-*s%s", (i < n ? w[i] : 0), h[i], (i < n ? "  " : "\n")
          for (r = 2; r <= NR; r++) for (i = 1; i <= n; i++) printf "%-*s%s", (i < n ? w[i] : 0), c[r, i], (i < n ? "  " : "\n") }
' "$TSV")
LEGEND="seconds, median of $R after a warm-up; $(nproc) cores; opencv/pillow: imread..imwrite in the process, opencv+py: the whole process; best: fastest peer; B x: best / gf:B (>1: gpufilter faster)"
if [[ $(stat -L -c %Y "$BIN") != "$BIN_STAMP" ]]; then
    LEGEND+=$'\n'"WARNING: $BIN was rebuilt during the run: its rows mix two builds"
fi
echo
echo "$TABLE"
echo "$LEGEND"
if [[ -n ${OUT:-} ]]; then mkdir -p "$OUT"; { echo "$TABLE"; echo "$LEGEND"; } >"$OUT/e2e.txt"; fi
