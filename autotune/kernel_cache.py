"""Compiled-kernel caches: an in-memory LRU and an on-disk store of object code.

A second process gets a tuned kernel without compiling: the object code and its signature are
stored under a key made of the workload, target, config, the LLVM version and a digest of
autotune's own source (so an edited or upgraded compiler never runs a stale kernel). The
directory is private to the user (0700), and every entry carries an HMAC made with a per-user
secret (0600) over the entry format, the key it answers for, its signature and its object code,
checked before the object is loaded: a corrupt, tampered or moved entry is rebuilt, never executed.
A cache directory that is shared (another owner, or group/other access, like a 1777 temp
directory) is left as it is; the cache then lives in a private per-user subdirectory of it.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import llvmlite

from tuning_db.boundary import loads as bounded_json

from . import __version__

CACHE_ENV = "AUTOTUNE_CACHE"
ENTRY_FORMAT = 2      # bump when what an entry holds or what its MAC covers changes


def cache_dir() -> Path:
    """$AUTOTUNE_CACHE, else the user's cache directory (e.g. ~/.cache/autotune)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("autotune"))


def entry_key(workload_key: str, target: str, config: dict) -> str:
    """Content key of a kernel: what it computes, where, how, and which compiler built it."""
    text = json.dumps([workload_key, target, config, __version__, llvmlite.__version__, compiler_digest()],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


@functools.cache
def compiler_digest() -> str:
    """sha256 of every source file of the autotune package: templates, passes and code generator
    all decide the object code, and an editable install changes them without a version bump."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _is_private(st: os.stat_result) -> bool:
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def _private_dir(root: Path) -> Path:
    """`root` if it is a directory only this user can reach (created so if missing), else a private
    `autotune-<uid>` subdirectory of it; OSError if neither can be had. Never changes `root`'s mode."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    if _is_private(os.stat(root)):
        return root
    sub = root / f"autotune-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        sub.mkdir(mode=0o700)
    if not _is_private(os.lstat(sub)):   # lstat: a planted symlink or foreign directory is refused
        warnings.warn(f"autotune: kernel cache disabled: {sub} exists but is not a directory private to this "
                      "user; set AUTOTUNE_CACHE to a private directory", stacklevel=4)
        raise OSError(f"{sub} is not private")
    return sub


class DiskCache:
    """Object code + signature per key, authenticated with the user's secret."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()
        self.dir = self.root           # where entries live: root, or a private subdirectory of a shared root
        self._secret: bytes | None = None

    def _prepare(self) -> None:
        if self._secret is not None:
            return
        self.dir = _private_dir(self.root)
        secret = self.dir / "secret"
        if not secret.exists():
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        self._secret = secret.read_bytes()

    def _mac(self, key: str, signature: dict, obj: bytes) -> str:
        assert self._secret is not None
        msg = json.dumps([ENTRY_FORMAT, key, signature], sort_keys=True).encode() + b"\0" + obj
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()

    def get(self, key: str) -> tuple[dict, bytes] | None:
        """The stored (signature, object) if present and authentic for `key`, else None."""
        try:
            self._prepare()
            meta = bounded_json((self.dir / f"{key}.json").read_bytes(), "kernel cache entry")
            obj = (self.dir / f"{key}.o").read_bytes()
        except (OSError, ValueError):
            return None
        if not (isinstance(meta, dict) and isinstance(meta.get("signature"), dict)
                and hmac.compare_digest(str(meta.get("mac", "")), self._mac(key, meta["signature"], obj))):
            return None
        return meta["signature"], obj

    def get_note(self, key: str) -> dict | None:
        """A small authenticated JSON note (e.g. which config a database resolved to)."""
        hit = self.get(key)
        return hit[0] if hit is not None and hit[1] == b"note" else None

    def put_note(self, key: str, note: dict) -> None:
        self.put(key, note, b"note")

    def put(self, key: str, signature: dict, obj: bytes) -> None:
        """Store atomically (write to a temporary name, then rename)."""
        try:
            self._prepare()
            meta = {"format": ENTRY_FORMAT, "signature": signature, "mac": self._mac(key, signature, obj)}
            for suffix, data in ((".o", obj), (".json", json.dumps(meta).encode())):
                tmp = self.dir / f"{key}{suffix}.{os.getpid()}.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, self.dir / f"{key}{suffix}")
        except OSError:
            pass  # an unwritable cache only costs a compile next time


class MemoryCache:
    """A thread-safe LRU (of ready-to-call kernels, resolved loads, featurized records)."""

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        """The value kept under `key`, or None."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def get_or_create(self, key: Any, create: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = create()
        self.put(key, value)
        return value

    def put(self, key: Any, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
