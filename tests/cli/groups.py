"""Run a group of tests' inputs through one batch call of the binary.

Every CUDA run of gpufilter pays its start-up (about 0.2 s, and on the GPU
machine the starts of parallel workers queue one behind another), so the
CUDA suite's time is mostly its count of runs. Tests whose runs share their
options form a group: each carries the mark batch_group(NAME) and calls

    member = groups.run(request, make, args)

The first member to run builds every member's input with make(rng, **params),
where rng is the stream that member's own `rng` fixture gives and params are
its parametrize values, writes them to files, and runs ONE batch call
(`gpufilter --backend B ARGS -o FOLDER INPUTS`) per backend. Each test then
checks its own member. A batch's outputs equal single runs' (test_batch.py).

The members are the collected tests of the same function with the same group
name, so -k, --part and --grid reduced shrink the batch with the run. Under
pytest-xdist the members may run on several workers: the build sits in a
folder shared by the run's workers, under a lock, and is made once (every
worker collects the same tests, so all number the members alike)."""

import contextlib
import fcntl
import json
import re
import shutil
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from gftest import write_png


def group_name(item):
    mark = item.get_closest_marker("batch_group")
    return None if mark is None else mark.args[0]


def stable_nodeid(nodeid):
    """The test id without the '@group' that pytest-xdist's --dist loadgroup
    appends (with pytest before 9), so a test draws the same inputs however
    the run is spread."""
    return re.sub(r"@[^\]]*$", "", nodeid)


def member_rng(seed, nodeid):
    """The stream conftest's rng fixture gives the test nodeid."""
    return np.random.default_rng([seed, zlib.crc32(stable_nodeid(nodeid).encode())])


@dataclass
class Member:
    """One test's part of its group's batch."""
    source: Path                                  # its input file
    outputs: dict = field(default_factory=dict)   # backend -> its output file
    stats: dict = field(default_factory=dict)     # backend -> its --stats=json document


def split_json_documents(text):
    """The JSON documents a batch's --stats=json prints, one after another."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return docs
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)


def write_bytes(path, data):
    """A writer for make's that return a file's bytes."""
    path.write_bytes(data)
    return path


@contextlib.contextmanager
def locked(path):
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class Groups:
    def __init__(self, gf, seed, root):
        self.gf = gf
        self.seed = seed
        self.root = Path(root)
        self.members = {}  # (module, function, group) -> its collected tests, in order
        self.stats = {}    # a batch's stdout file -> {input file: its --stats=json document}

    def run(self, request, make, args, backends=None, write=write_png, suffix=".png",
            out_suffix=None, tag="", chain=None):
        """This test's Member; args are the batch's options (no --backend,
        -o or inputs); backends default to the one under test. make's result
        goes to a file by write(path, result) with the name's suffix given;
        the outputs have out_suffix (default: suffix). A group running two
        batches (two sets of args) gives each a tag; chain=TAG takes as
        inputs the outputs of the group's batch of that tag, which this test
        has already asked for (one backend; its out_suffix is this suffix)."""
        me = request.node
        name = group_name(me)
        assert name is not None, f"{me.nodeid}: a grouped test needs the mark batch_group"
        key = (me.module.__name__, me.originalname, name)
        if key not in self.members:
            self.members[key] = [item for item in request.session.items
                                 if getattr(item, "originalname", None) == me.originalname
                                 and item.module is me.module and group_name(item) == name]
        members = self.members[key]
        backends = backends or (self.gf.backend,)
        base = f"{me.module.__name__}.{me.originalname}.{name}".replace("/", "_")
        folder = self.root / f"{base}{tag}"
        folder.mkdir(parents=True, exist_ok=True)
        with locked(folder / ".lock"):
            failed = folder / "failed.txt"
            if failed.exists():
                pytest.fail(failed.read_text(), pytrace=False)
            if not (folder / "done").exists():
                before = None if chain is None else self.root / f"{base}{chain}"
                self._build(folder, members, make, args, backends, write, suffix, before)
        index = next(i for i, item in enumerate(members) if item is me)
        member = Member(folder / f"{index}{suffix}")
        for backend in backends:
            member.outputs[backend] = folder / backend / f"{index}{out_suffix or suffix}"
            out = folder / f"{backend}.out"
            if out.exists():
                if out not in self.stats:
                    self.stats[out] = {d["file"]: d for d in split_json_documents(out.read_text())}
                member.stats[backend] = self.stats[out][str(member.source)]
        return member

    def _build(self, folder, members, make, args, backends, write, suffix, before):
        sources = []
        for index, item in enumerate(members):
            source = folder / f"{index}{suffix}"
            if before is not None:
                (backend,) = backends
                sources.append(shutil.copyfile(before / backend / source.name, source))
                continue
            img = make(member_rng(self.seed, stable_nodeid(item.nodeid)), **item.callspec.params)
            sources.append(write(source, img))
        stats = any(str(a).startswith("--stats=json") for a in args)
        for backend in backends:
            r = self.gf.run("--backend", backend, *args, "-o", folder / backend, *sources)
            if r.rc != 0:
                (folder / "failed.txt").write_text(f"the group's batch failed\n{r.describe()}")
                r.ok()
            if stats:
                (folder / f"{backend}.out").write_bytes(r.out)
        (folder / "done").touch()


@pytest.fixture(scope="session")
def groups(gf, pytestconfig, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    # pytest-xdist's workers each have a basetemp in the run's folder
    root = base.parent if hasattr(pytestconfig, "workerinput") else base
    return Groups(gf, pytestconfig._gpufilter_seed, root / "groups")
