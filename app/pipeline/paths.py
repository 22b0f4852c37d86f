"""Where the pipeline's path arguments point, checked before Spark starts: Spark's own answer to a
missing path is a page of warnings and a traceback (or, reading an archive, no rows at all)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from app.pipeline.session import PipelineError


def local_path(source: str) -> Path | None:
    """The local path a source names, or None for a URI Spark reads itself."""
    parts = urlsplit(source)
    if parts.scheme == "file":
        return Path(parts.path)
    if len(parts.scheme) > 1:  # (a one-letter "scheme" is a Windows drive)
        return None
    return Path(source)


def exists(path: Path, shown: str) -> bool:
    """Whether `path` exists; a PipelineError when this user may not even look (a directory on
    the way it may not enter: stat itself is refused)."""
    try:
        return path.exists()
    except PermissionError:
        raise PipelineError(f"{shown}: cannot be read (permission denied)") from None


def check_archive_to_read(archive: str) -> None:
    """Refuse, in one line, an archive that cannot be read: a missing path, a file, or a directory
    without Parquet files (nothing was archived there). A report of such an archive would be
    "0 messages", which says nothing of the mistake. URIs Spark reads itself (hdfs://, s3a://)
    are left to Spark."""
    path = local_path(archive)
    if path is None:
        return
    hint = "run `pqs pipeline archive` first, or give --archive"
    if not exists(path, archive):
        raise PipelineError(f"{archive}: no such directory ({hint})")
    if not path.is_dir():
        raise PipelineError(f"{archive}: an archive is a directory of Parquet files, not a file")
    if next(path.rglob("*.parquet"), None) is None:
        raise PipelineError(f"{archive}: no Parquet files in this directory, nothing archived ({hint})")
