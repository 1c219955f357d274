"""Compiled-kernel caches: an in-memory LRU and an on-disk store of object code.

A second process gets a tuned kernel without compiling: the object code and its signature are
stored under a key made of the workload, target, config and the autotune and LLVM versions. The
directory is private to the user (0700), and every entry carries an HMAC made with a per-user
secret (0600) that is checked before the object is loaded: a corrupt or tampered entry is
rebuilt, never executed.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable

import llvmlite

from . import __version__

CACHE_ENV = "AUTOTUNE_CACHE"


def cache_dir() -> Path:
    """$AUTOTUNE_CACHE, else the user's cache directory (e.g. ~/.cache/autotune)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("autotune"))


def entry_key(workload_key: str, target: str, config: dict) -> str:
    """Content key of a kernel: what it computes, where, how, and which compiler built it."""
    text = json.dumps([workload_key, target, config, __version__, llvmlite.__version__], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


class DiskCache:
    """Object code + signature per key, authenticated with the user's secret."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or cache_dir()
        self._secret: bytes | None = None

    def _prepare(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.root, 0o700)
        secret = self.root / "secret"
        if not secret.exists():
            fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secrets.token_bytes(32))
        self._secret = secret.read_bytes()

    def _mac(self, signature: dict, obj: bytes) -> str:
        assert self._secret is not None
        msg = json.dumps(signature, sort_keys=True).encode() + b"\0" + obj
        return hmac.new(self._secret, msg, hashlib.sha256).hexdigest()

    def get(self, key: str) -> tuple[dict, bytes] | None:
        """The stored (signature, object) if present and authentic, else None."""
        try:
            self._prepare()
            meta = json.loads((self.root / f"{key}.json").read_text())
            obj = (self.root / f"{key}.o").read_bytes()
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or not hmac.compare_digest(str(meta.get("mac", "")),
                                                                 self._mac(meta.get("signature", {}), obj)):
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
            for suffix, data in ((".o", obj), (".json", json.dumps({"signature": signature,
                                                                     "mac": self._mac(signature, obj)}).encode())):
                tmp = self.root / f"{key}{suffix}.{os.getpid()}.tmp"
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, self.root / f"{key}{suffix}")
        except OSError:
            pass  # an unwritable cache only costs a compile next time


class MemoryCache:
    """A thread-safe LRU of ready-to-call kernels."""

    def __init__(self, capacity: int = 128) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_create(self, key: Any, create: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = create()
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
