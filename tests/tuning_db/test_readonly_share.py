"""Reading a tuning database shared read-only: a file or directory the reader cannot write
(a colleague's results, a read-only mount). A WAL database normally needs its -shm file next to
it even to be read; these tests check readers still work, through TuningDB, `autotune db` and
`autotune.load`, or fail with one clear line when the file cannot be read alone.

Root ignores permission bits, so when run as root each reader runs in a forked child that has
become `nobody`; the child reuses the parent's imports (it may not be able to read Python's).
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import pickle
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autotune
from autotune import runtime
from autotune.cli import run
from tuning_db import Record, TuningDB, TuningDBError

NOBODY = 65534
SHAPE = {"M": 7, "N": 11, "K": 13}


def as_unprivileged(fn: Callable[[], Any]) -> Any:
    """fn() in a forked child that permission bits apply to; its result, or its exception re-raised
    here as TuningDBError/AssertionError with the child's message."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: never returns into pytest
        os.close(r)
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
        except OSError as e:
            out: tuple = ("skip", f"cannot become an unprivileged user to test permissions: {e}")
        else:
            try:
                out = ("ok", fn())
            except BaseException as e:  # noqa: BLE001  (reported to the parent)
                out = ("error", type(e).__name__, str(e))
        with os.fdopen(w, "wb") as f:
            pickle.dump(out, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    out = pickle.loads(data)
    if out[0] == "skip":
        pytest.skip(out[1])
    if out[0] == "error":
        raise (TuningDBError if out[1] == "TuningDBError" else AssertionError)(f"{out[1]}: {out[2]}")
    return out[1]


@pytest.fixture
def shared(monkeypatch) -> Iterator[Path]:
    """A directory `nobody` can reach (pytest's tmp_path is private to root); subdirectories are
    made read-only by the tests and writable again on the way out."""
    base = Path(tempfile.mkdtemp(prefix="autotune-share-"))
    base.chmod(0o755)
    (base / "cache").mkdir(mode=0o777)
    (base / "cache").chmod(0o777)
    monkeypatch.setenv("AUTOTUNE_CACHE", str(base / "cache" / "parent"))
    monkeypatch.setenv("AUTOTUNE_DB", str(base / "unused.db"))
    yield base
    for d in base.rglob("*"):
        if d.is_dir():
            d.chmod(0o755)
    shutil.rmtree(base)


def make_db(path: Path) -> TuningDB:
    """A tuning database holding one tuned (valid) config of matmul 7x11x13, left open (so WAL)."""
    task = autotune.create_task("matmul", **SHAPE)
    index = next(i for i in range(len(task.config_space)) if task.is_valid(i))
    db = TuningDB(path)
    run_id = db.start_run(task.workload_key, "matmul", task.params, "float32", task.target_key, "random", 2, 0)
    db.add_records(run_id, [Record(task.workload_key, task.target_key, index, task.config(index).to_json(), (1e-3,),
                                   "ok", "", 0.01, time.time())])
    db.finish_run(run_id, 1)
    return db


def read_only(d: Path) -> None:
    for f in d.iterdir():
        f.chmod(0o444)
    d.chmod(0o555)


def snapshot_with_wal(src: Path, dst: Path, shm: bool) -> Path:
    """A copy of a database taken while its writer is open: the last commits are only in -wal."""
    dst.mkdir()
    for suffix in ("", "-wal") + (("-shm",) if shm else ()):
        shutil.copyfile(f"{src}{suffix}", dst / f"{src.name}{suffix}")
    assert (dst / f"{src.name}-wal").stat().st_size > 0
    return dst / src.name


def read_everything(path: Path) -> dict[str, Any]:
    """What a reader gets: records through TuningDB, `autotune db workloads` and a tuned kernel."""
    with TuningDB(path, readonly=True) as db:
        records = len(db.records())
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = run(["db", "workloads", "--db", str(path), "--json"])
    os.environ["AUTOTUNE_CACHE"] = str(path.parent.parent / "cache" / f"uid{os.getuid()}")
    runtime.clear_caches()
    kernel = autotune.load("matmul", db=str(path), **SHAPE)
    a, b = np.ones((7, 13), np.float32), np.ones((13, 11), np.float32)
    return {"records": records, "code": code, "stdout": stdout.getvalue(), "stderr": stderr.getvalue(),
            "provenance": kernel.provenance, "ok": bool(np.allclose(kernel(a, b), a @ b))}


def check_read(got: dict[str, Any], records: int = 1) -> None:
    assert got["code"] == 0, got["stderr"]
    rows = json.loads(got["stdout"])
    assert [r["key"] for r in rows] == ["matmul(M=7,N=11,K=13)float32"] and rows[0]["trials"] == records
    assert got["records"] == records and got["provenance"] == "tuned" and got["ok"]


def test_a_closed_database_in_a_read_only_directory_is_readable(shared):
    make_db(shared / "w.db").close()
    check_read(read_everything(shared / "w.db"))     # as root: warms the imports the child reuses
    d = shared / "ro"
    d.mkdir()
    shutil.copyfile(shared / "w.db", d / "t.db")     # closed: the file alone is the database
    read_only(d)
    check_read(as_unprivileged(lambda: read_everything(d / "t.db")))
    assert sorted(p.name for p in d.iterdir()) == ["t.db"]   # nothing created, nothing changed


def test_a_read_only_file_in_a_writable_directory_is_readable(shared):
    d = shared / "rw"
    d.mkdir(mode=0o777)
    d.chmod(0o777)
    make_db(d / "t.db").close()
    check_read(read_everything(d / "t.db"))
    (d / "t.db").chmod(0o444)
    check_read(as_unprivileged(lambda: read_everything(d / "t.db")))


def read_only_snapshot(shared: Path, shm: bool) -> Path:
    """A read-only directory holding a copy of a database whose last commits are in its -wal."""
    writer = make_db(shared / "w.db")
    try:
        path = snapshot_with_wal(shared / "w.db", shared / "ro", shm=shm)
    finally:
        writer.close()
    check_read(read_everything(shared / "w.db"))
    read_only(path.parent)
    return path


def test_commits_still_in_the_wal_are_read_with_its_shm(shared):
    path = read_only_snapshot(shared, shm=True)
    check_read(as_unprivileged(lambda: read_everything(path)))


def test_commits_in_a_wal_without_shm_are_one_clear_error(shared):
    path = read_only_snapshot(shared, shm=False)
    with pytest.raises(TuningDBError, match=r"its -wal file holds commits .* cannot create the -shm"):
        as_unprivileged(lambda: TuningDB(path, readonly=True).records())

    def cli() -> tuple[int, str]:
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            return run(["db", "workloads", "--db", str(path)]), stderr.getvalue()

    code, err = as_unprivileged(cli)
    assert code == 2 and err.startswith("autotune: error: cannot read tuning database") and err.count("\n") == 1


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_db_path_that_is_not_a_regular_file_is_refused_without_opening_it(tmp_path, kind):
    path = tmp_path / "t.db"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()   # opening a FIFO to read would block forever
    assert stat.S_ISFIFO(path.stat().st_mode) == (kind == "fifo")
    with pytest.raises(TuningDBError, match="not a regular file" if kind == "fifo" else "is a directory"):
        TuningDB(path, readonly=True)
    with pytest.raises(TuningDBError, match="not a regular file" if kind == "fifo" else "is a directory"):
        TuningDB(path)


def test_a_damaged_file_opened_readonly_is_one_error_not_a_driver_exception(tmp_path):
    path = tmp_path / "t.db"
    path.write_bytes(b"SQLite format 3\x00" + b"garbage" * 200)   # the magic, then nothing SQLite can read
    with pytest.raises(TuningDBError, match="file is not a database"):
        TuningDB(path, readonly=True)
