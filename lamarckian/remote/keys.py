"""CurveZMQ key pairs and the allow-list of worker public keys.

``keygen DIR NAME`` writes ``DIR/NAME.key`` (the public key, safe to copy anywhere) and ``DIR/NAME.key_secret``
(the secret key, readable by its owner only), in ZeroMQ's certificate format. The server trusts the workers whose
public keys lie in its keys folder; deleting a file revokes that worker within :data:`RESCAN_SECONDS`.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import zmq
import zmq.auth

RESCAN_SECONDS = 1.0    # how often the allow-list folder is re-read


def keygen(folder: Path, name: str) -> tuple[Path, Path]:
    """A new key pair ``folder/name.key`` and ``folder/name.key_secret`` (mode 0600); ValueError rather than
    overwrite a key someone may already trust."""
    if not name or any(c in name for c in "/\\") or name.startswith("."):
        raise ValueError(f"key name {name!r}: expected a plain file name")
    folder = Path(folder)
    public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise ValueError(f"{path} exists; remove it first to replace the key")
    folder.mkdir(parents=True, exist_ok=True)
    zmq.auth.create_certificates(str(folder), name)
    os.chmod(secret, 0o600)
    return public, secret


def _certificate(path: Path | str) -> tuple[bytes | None, bytes | None]:
    try:
        return zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a ZeroMQ key file ({error})") from None


def load_public(path: Path | str) -> bytes:
    """The Z85 public key in a ``.key`` or ``.key_secret`` file; ValueError naming the file if it holds none."""
    public = _certificate(path)[0]
    if not public:
        raise ValueError(f"{path}: holds no public key")
    return public


def load_pair(path: Path | str) -> tuple[bytes, bytes]:
    """The (public, secret) Z85 keys in a ``.key_secret`` file; ValueError naming the file if the secret is
    missing (a ``.key`` file was given)."""
    public, secret = _certificate(path)
    if not secret:
        raise ValueError(f"{path}: holds no secret key (give the NAME.key_secret file that keygen wrote)")
    if not public:
        raise ValueError(f"{path}: holds no public key")
    return public, secret


class AllowList:
    """The public keys (``*.key``) of a folder, re-read every :data:`RESCAN_SECONDS`; the ZAP handler's
    credentials provider (``callback``) and the server's per-message check (``name_of``).

    Args:
        folder: the keys folder (every ``NAME.key`` in it is a worker named NAME).
        exclude: public keys never accepted as workers (the server's own, the trainer's).
    """

    def __init__(self, folder: Path, exclude: tuple[bytes, ...] = ()) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ValueError(f"--keys {folder}: not a folder")
        self.exclude = set(exclude)
        self.lock = threading.Lock()
        self.names: dict[bytes, str] = {}
        self.refused = 0                 # connections refused for an unknown key
        self.banned: dict[bytes, float] = {}   # key → monotonic time its ban ends
        self.scanned = -RESCAN_SECONDS
        self.rescan()

    def rescan(self) -> None:
        """Re-read the folder now (unreadable files are skipped)."""
        names = {}
        for path in sorted(self.folder.glob("*.key")):
            try:
                key = load_public(path)
            except ValueError:
                continue
            if key not in self.exclude:
                names[key] = path.stem
        with self.lock:
            self.names, self.scanned = names, time.monotonic()

    def refresh(self) -> None:
        """Rescan if the last scan is older than :data:`RESCAN_SECONDS`."""
        if time.monotonic() - self.scanned >= RESCAN_SECONDS:
            self.rescan()

    def ban(self, key: bytes, seconds: float) -> None:
        """Refuse ``key`` (connections and messages) for ``seconds``."""
        with self.lock:
            self.banned[key] = time.monotonic() + seconds

    def name_of(self, key: bytes) -> str | None:
        """The worker name of an allowed, not banned public key; None otherwise."""
        with self.lock:
            until = self.banned.get(key)
            if until is not None:
                if time.monotonic() < until:
                    return None
                del self.banned[key]
            return self.names.get(key)

    def callback(self, domain: str, key: bytes) -> bool:
        """ZAP: accept a connection from ``key`` (Z85)? Refusals are counted."""
        self.refresh()
        if self.name_of(key) is not None:
            return True
        with self.lock:
            self.refused += 1
        return False
