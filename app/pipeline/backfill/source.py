"""A backfill's source, checked before Spark reads it: the path exists and can be read, it holds
the format it claims, and a text format decodes in its stated encoding. Each failure is one
PipelineError line, where Spark would print a stack of warnings and a JVM traceback. Paths with
a scheme Spark reads itself (s3a://, hdfs://...) are left to Spark."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

from app.pipeline.paths import exists, local_path
from app.pipeline.session import PipelineError

# The encodings a CSV may be stated in, by Python's name, with the name Spark's reader (Java)
# knows them by. UTF-8 with a byte order mark is read as UTF-8: Spark skips the mark.
ENCODINGS = {
    "utf-8": "UTF-8",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16LE",
    "utf-16-be": "UTF-16BE",
    "latin-1": "ISO-8859-1",
    "cp1252": "windows-1252",
    "ascii": "US-ASCII",
}
# How much of each file is decoded to check its encoding: enough for a header and many rows,
# little enough that a large file costs nothing.
PROBE_BYTES = 1 << 16
PARQUET_MAGIC = b"PAR1"


def java_encoding(encoding: str) -> str:
    """The Java name of a supported encoding (any of Python's spellings of it)."""
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        name = encoding
    aliases = {codecs.lookup(e).name: java for e, java in ENCODINGS.items()}
    if name not in aliases:
        raise PipelineError(f"unsupported encoding {encoding!r}: one of {', '.join(ENCODINGS)}")
    return aliases[name]


def _data_files(path: Path) -> list[Path]:
    """The files Spark reads for this path: the file, or a directory's files, without the ones
    Spark skips (names starting with `_` or `.`: _SUCCESS, .crc files)."""
    if path.is_file():
        return [path]
    try:
        found = sorted(p for p in path.rglob("*") if p.is_file())
    except PermissionError:
        raise PipelineError(f"{path}: cannot be read (permission denied)") from None
    return [p for p in found if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)]


def _head(path: Path, size: int) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(size)
    except PermissionError:
        raise PipelineError(f"{path}: cannot be read (permission denied)") from None
    except OSError as exc:
        raise PipelineError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _check_text(path: Path, encoding: str) -> None:
    decoder = codecs.getincrementaldecoder(encoding)()
    head = _head(path, PROBE_BYTES)
    try:
        decoder.decode(head, final=len(head) < PROBE_BYTES)  # a cut character at the end is fine
    except UnicodeDecodeError as exc:
        raise PipelineError(
            f"{path} is not {encoding} text (byte {exc.start}: {exc.reason}): state its encoding with --encoding"
        ) from None


def check_source(source: str, fmt: str, encoding: str = "utf-8") -> None:
    """Refuse, in one line, a source Spark could not read as `fmt`."""
    java_encoding(encoding)
    path = local_path(source)
    if path is None:
        return
    if not exists(path, source):
        raise PipelineError(f"{source}: no such file or directory")
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise PipelineError(f"{source}: cannot be read (permission denied)")
    files = _data_files(path)
    if not files:
        raise PipelineError(f"{source}: no files to read in this directory")
    if not any(f.stat().st_size for f in files):
        raise PipelineError(f"{source}: empty, nothing to backfill")
    for file in files:
        if fmt == "parquet":
            if file.stat().st_size and _head(file, len(PARQUET_MAGIC)) != PARQUET_MAGIC:
                raise PipelineError(f"{file} is not a Parquet file: give its format with --format (csv, json)")
        else:
            _check_text(file, encoding if fmt == "csv" else "utf-8")


def csv_line_separator(source: str, encoding: str = "utf-8") -> str | None:
    """How a local CSV's records end: CR LF, LF or CR, from the first line break outside quotes
    in its first file (None: a remote source, or no line break). Spark, told it, keeps line
    breaks inside quoted fields as they are (else it makes each CR LF there an LF). The files of
    a directory are taken to end their records alike."""
    path = local_path(source)
    if path is None or not path.exists():
        return None
    files = [f for f in _data_files(path) if f.stat().st_size]
    if not files:
        return None
    text = codecs.getincrementaldecoder(encoding)(errors="replace").decode(_head(files[0], PROBE_BYTES))
    quoted = False
    for at, char in enumerate(text):
        if char == '"':
            quoted = not quoted  # a doubled quote flips twice: still inside
        elif not quoted and char in "\r\n":
            if char == "\n":
                return "\n"
            return "\r\n" if text[at + 1 : at + 2] == "\n" else "\r"
    return None


# Spark's error classes of a source it cannot parse, most telling first.
READ_ERRORS = ("MALFORMED_CSV_RECORD", "MALFORMED_RECORD_IN_PARSING", "FAILED_READ_FILE")


def read_error(exc: BaseException, source: str) -> PipelineError | None:
    """Spark's failure to read or parse the source, as one line (None: another failure). Spark
    raises it from a task, wrapped in a JVM traceback; its innermost error class says what."""
    lines = [line.strip() for line in str(exc).splitlines()]
    for error_class in READ_ERRORS:
        for line in reversed(lines):
            at = line.find(f"[{error_class}")
            if at >= 0:
                reason = line[at:].split(" SQLSTATE:")[0]
                return PipelineError(f"{source}: cannot be read: {reason}")
    return None
