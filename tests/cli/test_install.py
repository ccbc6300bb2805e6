"""What make install puts in place: the man page, bash and zsh completion,
and make uninstall taking it all away."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def long_options(text):
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", text))


def render_man_page():
    """The page as man -l renders it, or as groff does where man is missing
    or is the script a minimized Ubuntu puts in its place; None when
    neither can render it."""
    env = {**os.environ, "MANWIDTH": "100", "MAN_KEEP_FORMATTING": "0", "MANROFFSEQ": ""}
    if shutil.which("man"):
        r = subprocess.run(["man", "--warnings", "-l", str(ROOT / "gpufilter.1")],
                           capture_output=True, text=True, env=env, timeout=60)
        if "system has been minimized" not in r.stdout:
            return r
    if shutil.which("groff"):
        return subprocess.run(["groff", "-man", "-Tutf8", "-P-c", "-ww", "-rLL=100n",
                               str(ROOT / "gpufilter.1")], capture_output=True, text=True,
                              env=env, timeout=60)
    return None


def test_man_page_renders_and_covers_help(gf):
    """man -l renders the page without warnings, and it names every long
    option that --help names."""
    r = render_man_page()
    if r is None:
        pytest.skip("no man page renderer here: neither man-db nor groff is installed")
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    page = re.sub(r".\x08", "", r.stdout).replace("\u2010", "-").replace("\u2212", "-")
    assert "GPUFILTER(1)" in page and "EXIT STATUS" in page
    missing = long_options(gf.run("--help").ok().out.decode()) - long_options(page)
    assert not missing, f"the man page does not name {sorted(missing)}"


def complete(gf, *words):
    """What bash completion offers for the last word of 'gpufilter WORDS'."""
    script = f"""
source {ROOT / 'completions/gpufilter.bash'}
COMP_WORDS=({gf.path} {' '.join(repr(w) if w else "''" for w in words)})
COMP_CWORD={len(words)}
_gpufilter
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script], capture_output=True,
                       text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_bash_completion(gf):
    assert complete(gf, "-m", "sob") == {"sobel", "sobel-x", "sobel-y"}
    assert {"gaussian3", "gaussian5", "gaussian7"} <= complete(gf, "--mask", "gau")
    assert complete(gf, "-b", "m") == {"mirror"}
    assert complete(gf, "--back") == {"--backend"}
    assert complete(gf, "--backend", "c") == {"cuda", "cpu"}
    assert complete(gf, "--equalize=c") == {"--equalize=channels"}
    assert complete(gf, "--stats=j") == {"--stats=json"}
    assert {"--max-memory", "--max-pixels"} <= complete(gf, "--max-")
    assert "Makefile" in complete(gf, "-m", "box3", "Make")


def zsh_complete(gf, line):
    """The command line after typing LINE and a Tab in an interactive zsh."""
    r = subprocess.run(["zsh", "-f", str(ROOT / "tests/tools/zsh_complete.zsh"),
                        str(ROOT / "completions"), str(Path(gf.path).parent), line],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip().removeprefix("LINE:").strip()


def test_zsh_completion(gf):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed")
    assert zsh_complete(gf, "gpufilter -m emb") == "gpufilter -m emboss"
    assert zsh_complete(gf, "gpufilter -b mi") == "gpufilter -b mirror"
    assert zsh_complete(gf, "gpufilter --backe") == "gpufilter --backend"


def test_install_and_uninstall(gf, tmp_path):
    """make install DESTDIR=... puts the binary, masks, man page and both
    completions in place; make uninstall removes every one of them."""
    if gf.backend != "cpu":
        pytest.skip("runs once, with the CPU suite")
    build = Path(gf.path).parent
    dest = tmp_path / "root"
    args = ["make", "-s", f"BUILD={build}", f"DESTDIR={dest}", "PREFIX=/usr"]
    r = subprocess.run(args + ["install"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    for want in ["usr/bin/gpufilter", "usr/share/man/man1/gpufilter.1",
                 "usr/share/bash-completion/completions/gpufilter",
                 "usr/share/zsh/site-functions/_gpufilter", "usr/share/gpufilter/masks/sobel.mask"]:
        assert want in files, files
    r = subprocess.run(args + ["uninstall"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    left = [str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()]
    assert left == [], left
