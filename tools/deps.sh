#!/bin/sh
# deps.sh build|unit|python BUILD_DIR [STB_DIR] - make sure what a step
# needs is installed. What is missing is installed where this user may
# (root, or sudo without a password; never with GF_INSTALL=0), saying what;
# otherwise the missing packages are named with the command that installs
# them. Optional packages that cannot be installed only leave a note.
#
#   build:  the stb headers (libstb-dev; STB_DIR, default /usr/include/stb)
#           and, optional, the faster codecs libdeflate-dev and
#           libturbojpeg0-dev (with libjpeg-dev's header, large JPEGs
#           stream), which the build links when their headers are there
#   unit:   cmocka (libcmocka-dev), for the unit tests
#   python: a Python with numpy, scipy, pytest, Pillow and OpenCV for the
#           CLI tests: the system's when it has them all, else a virtual
#           environment in BUILD_DIR/venv (python3-venv) that pip fills.
#           BUILD_DIR/python names the interpreter to use.
set -eu
step=${1:?usage: deps.sh build|unit|python BUILD_DIR [STB_DIR]}
build=${2:?usage: deps.sh build|unit|python BUILD_DIR [STB_DIR]}
stb=${3:-/usr/include/stb}

required="" optional=""
need() {  # need required|optional PACKAGE FILE: PACKAGE is missing when FILE is
    [ -e "$3" ] && return 0
    if [ "$1" = required ]; then required="$required $2"; else optional="$optional $2"; fi
}

python_ok() {
    [ -x "$(command -v "$1" 2>/dev/null || echo "$1")" ] &&
        "$1" -c "import numpy, scipy, pytest, PIL, cv2" 2>/dev/null
}

case $step in
build)
    need required libstb-dev "$stb/stb_image.h"
    need optional libdeflate-dev /usr/include/libdeflate.h
    need optional libturbojpeg0-dev /usr/include/turbojpeg.h
    need optional libjpeg-dev /usr/include/jpeglib.h ;;
unit)
    need required libcmocka-dev /usr/include/cmocka.h ;;
python)
    if ! python_ok python3 && ! python_ok "$build/venv/bin/python"; then
        command -v python3 >/dev/null 2>&1 || required="$required python3"
        python3 -c "import ensurepip, venv" 2>/dev/null || required="$required python3-venv"
    fi ;;
*)
    echo "usage: deps.sh build|unit|python BUILD_DIR [STB_DIR]" >&2
    exit 2 ;;
esac

# How this user installs packages: "" (root), "sudo", or "no".
installer() {
    if [ "${GF_INSTALL:-1}" = 0 ]; then
        echo no
    elif [ "$(id -u)" = 0 ]; then
        echo ""
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        echo sudo
    else
        echo no
    fi
}

missing="$required$optional"
if [ -n "$missing" ]; then
    how=$(installer)
    installed=no
    if [ "$how" != no ]; then
        echo "gpufilter: installing the missing Debian packages:$missing"
        export DEBIAN_FRONTEND=noninteractive
        # shellcheck disable=SC2086
        if $how apt-get update -qq && $how apt-get install -y -qq $missing >/dev/null; then
            installed=yes
        fi
    fi
    if [ "$installed" = no ] && [ -n "$required" ]; then
        echo "gpufilter: missing Debian packages:$required"
        echo "gpufilter: install them with: sudo apt-get install$missing (then run make again)"
        exit 1
    fi
    if [ "$installed" = no ]; then
        echo "gpufilter: note: building without$optional (slower codecs); install with:" \
             "sudo apt-get install$optional"
    fi
fi

[ "$step" = python ] || exit 0
mkdir -p "$build"
if python_ok python3; then
    command -v python3 >"$build/python"
    exit 0
fi
if ! python_ok "$build/venv/bin/python"; then
    echo "gpufilter: installing numpy, scipy, pytest, Pillow and OpenCV into $build/venv (pip)"
    python3 -m venv --system-site-packages "$build/venv"
    "$build/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        numpy scipy pytest pytest-xdist pillow opencv-python-headless
fi
echo "$build/venv/bin/python" >"$build/python"
