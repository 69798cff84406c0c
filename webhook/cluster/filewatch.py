"""One way to notice that files changed: the policy file and the serving certificate."""

from __future__ import annotations

from pathlib import Path

# (mtime_ns, size, inode) per file, None for a file that cannot be read now.
Stamp = tuple[tuple[int, int, int] | None, ...]


class FileWatcher:
    """Tells whether a set of files changed since the content last taken in.

    ConfigMap and Secret volumes update by swapping a symlink, so the resolved file is
    compared. The caller decides what "taken in" means: the policy holder takes a change
    even when the new file is invalid (it reports it once), the certificate reload only
    once the new pair loads (a half-written pair is retried).
    """

    def __init__(self, *paths: str | Path) -> None:
        self.paths = tuple(Path(p) for p in paths)
        self._seen = self.stamp()

    def stamp(self) -> Stamp:
        """The files' stamp now."""
        return tuple(_file_stamp(path) for path in self.paths)

    def changed(self) -> Stamp | None:
        """The new stamp if the files differ from the last one taken in, else None."""
        stamp = self.stamp()
        return None if stamp == self._seen else stamp

    def take(self, stamp: Stamp) -> None:
        """Record `stamp` as taken in: changed() compares with it from now on."""
        self._seen = stamp


def _file_stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.resolve().stat()
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)
