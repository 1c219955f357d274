"""The JSONL exchange format (one measurement per line, its workload and target inline) and
the queries that move records out to it and in from it.

Reading validates the whole file before anything is written, so a bad line rejects the file
with its line number and field instead of importing half of it. `TuningDB` owns the sessions:
the functions here run inside the one transaction it hands them.
"""
from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from sqlalchemy import Table, insert, select
from sqlalchemy.orm import Session

from .boundary import MAX_JSON_BYTES, check_params, is_number, loads, warn_skipped
from .records import Record, TuningDBError
from .schema import RecordRow, RunRow, TargetRow, WorkloadRow, get_or_create, record_row, to_record, workload_params

# The JSON type each field of a line must have, as (test, expected-in-words).
_FIELDS: dict[str, tuple[Any, str]] = {
    "workload_key": (lambda v: isinstance(v, str), "a string"),
    "op": (lambda v: isinstance(v, str), "a string"),
    "params": (lambda v: isinstance(v, dict), "a JSON object"),
    "dtype": (lambda v: isinstance(v, str), "a string"),
    "target_key": (lambda v: isinstance(v, str), "a string"),
    "config_index": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "config": (lambda v: isinstance(v, dict), "a JSON object"),
    "costs": (lambda v: isinstance(v, list), "a list of seconds"),
    "error_kind": (lambda v: isinstance(v, str), "a string"),
    "error_msg": (lambda v: isinstance(v, str), "a string"),
    "build_seconds": (is_number, "a number"),
    "timestamp": (is_number, "a number"),
}


@dataclass(frozen=True)
class Line:
    """One validated line: the record plus the workload facts the database keeps per workload."""

    record: Record
    op: str
    params: dict[str, Any]
    dtype: str


def to_line(record: Record, op: str, params: dict[str, Any], dtype: str) -> dict[str, Any]:
    """The JSON object of one record (run ids are local to a database and are not exported)."""
    return {"workload_key": record.workload_key, "op": op, "params": params, "dtype": dtype,
            "target_key": record.target_key, "config_index": record.config_index, "config": record.config,
            "costs": list(record.costs), "error_kind": record.error_kind, "error_msg": record.error_msg,
            "build_seconds": record.build_seconds, "timestamp": record.timestamp}


def write_jsonl(path: str | os.PathLike[str], lines: Iterable[dict[str, Any]]) -> int:
    """Write the lines to a temporary file and rename it over `path`: readers never see half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for obj in lines:
                # every number a record holds is checked finite; only a float parameter may be an
                # infinity (Clip's absent bound), written Infinity as Python's json reads it back
                f.write(json.dumps(obj) + "\n")
                count += 1
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise TuningDBError(f"cannot write {path}: {e.strerror or e}") from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return count


def read_jsonl(path: str | os.PathLike[str]) -> list[Line]:
    """Every line of the file, validated; TuningDBError (a ValueError) at the first bad one.

    Only a regular file is read (a FIFO would block, a device never end), a line at a time, each
    at most MAX_JSON_BYTES: nothing makes the reader hang or grow without bound."""
    lines: list[Line] = []
    workloads: dict[str, tuple[str, dict[str, Any], str]] = {}
    try:
        with _open_regular(path) as f:
            for number, text in enumerate(iter(lambda: f.readline(MAX_JSON_BYTES + 1), ""), 1):
                if not text.strip():
                    continue   # blank lines (a trailing newline, a hand edit) carry nothing
                try:
                    lines.append(_parse_unique(text, workloads))
                except ValueError as e:
                    raise TuningDBError(f"{path}, line {number}: {e}; nothing was imported") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TuningDBError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from e
    return lines


def _open_regular(path: str | os.PathLike[str]) -> Any:
    """Open a regular file for reading text; OSError (with strerror) for anything else."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # non-blocking: opening a FIFO must not wait for a writer
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(0, "not a regular file")
    os.set_blocking(fd, True)
    return open(fd, encoding="utf-8")


def _parse_unique(text: str, workloads: dict[str, tuple[str, dict[str, Any], str]]) -> Line:
    """parse_line, also checking that a workload key means the same op, params and dtype throughout."""
    line = parse_line(text)
    facts = (line.op, line.params, line.dtype)
    first = workloads.setdefault(line.record.workload_key, facts)
    if first != facts:
        raise ValueError(f"field 'op'/'params'/'dtype': workload {line.record.workload_key!r} was "
                         f"{first} on an earlier line, got {facts}")
    return line


def parse_line(text: str) -> Line:
    """One line to a Line; ValueError naming the field that is missing or wrong."""
    obj = loads(text, "the line")
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    for name, (test, expected) in _FIELDS.items():
        if name not in obj:
            raise ValueError(f"field {name!r}: missing")
        if not test(obj[name]):
            raise ValueError(f"field {name!r}: expected {expected}, got {obj[name]!r}")
    record = Record(obj["workload_key"], obj["target_key"], obj["config_index"], obj["config"],
                    tuple(obj["costs"]), obj["error_kind"], obj["error_msg"], obj["build_seconds"],
                    obj["timestamp"])
    return Line(record, obj["op"], check_params(obj["params"], "field 'params'"), obj["dtype"])


def export_records(session: Session, path: str | os.PathLike[str], source: str) -> int:
    """Write every valid record of the database in the order stored (invalid rows are skipped
    with a warning each); returns how many were written."""
    workloads = {w.id: w for w in session.scalars(select(WorkloadRow))}   # few: looked up, not joined per row
    targets = {tid: key for tid, key in session.execute(select(TargetRow.id, TargetRow.key))}
    rows = session.scalars(select(RecordRow).order_by(RecordRow.id).execution_options(yield_per=1000))
    return write_jsonl(path, _valid_lines(rows, workloads, targets, source))


def _valid_lines(rows: Iterable[RecordRow], workloads: dict[int, WorkloadRow], targets: dict[int, str],
                 source: str) -> Iterable[dict[str, Any]]:
    for row in rows:
        workload = workloads[row.workload_id]
        try:
            record = to_record(row, workload.key, targets[row.target_id])
            yield to_line(record, workload.op, workload_params(workload), workload.dtype)
        except ValueError as e:
            warn_skipped(source, f"record {row.id}", e)


def import_lines(session: Session, lines: list[Line]) -> int:
    """Add the lines' records not already present; one run (tuner "import") per (workload, target)."""
    groups: dict[tuple[str, str], list[Line]] = {}
    for line in lines:
        groups.setdefault((line.record.workload_key, line.record.target_key), []).append(line)
    return sum(_import_group(session, group) for group in groups.values())


def _import_group(session: Session, group: list[Line]) -> int:
    first = group[0]
    workload_id = get_or_create(session, WorkloadRow, first.record.workload_key,
                                op=first.op, params=first.params, dtype=first.dtype)
    target_id = get_or_create(session, TargetRow, first.record.target_key)
    # A record is the same one when its workload, target, config and measurement time match.
    seen = {(index, stamp) for index, stamp in session.execute(
        select(RecordRow.config_index, RecordRow.timestamp).where(
            RecordRow.workload_id == workload_id, RecordRow.target_id == target_id))}
    new = []
    for line in group:
        identity = (line.record.config_index, line.record.timestamp)
        if identity not in seen:
            seen.add(identity)
            new.append(line.record)
    if not new:
        return 0
    now = time.time()
    run = RunRow(workload_id=workload_id, target_id=target_id, tuner="import", trials_asked=len(new),
                 trials_done=len(new), seed=None, started_at=now, ended_at=now, status="finished")
    session.add(run)
    session.flush()
    rows = [record_row(r, run.id, workload_id, target_id) for r in new]
    session.execute(insert(cast(Table, RecordRow.__table__)), rows)
    return len(new)
