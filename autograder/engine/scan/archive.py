"""Zip files, as hostile as their senders: extracted within limits, never outside the target.

    with tempfile.TemporaryDirectory() as folder:
        extracted = extract(Path("alice.zip"), Path(folder), STUDENT_LIMITS, keep=lambda name: name.endswith(".py"))

A zip may be a bomb (a small file that inflates to gigabytes, members that overlap, millions of
members), name a member outside the target (`../x`, `/etc/x`, `C:\\x`, `..\\x`), hold links,
devices or encrypted members, or have names that collide. Here:

* the member count is read from the zip's end record before its directory is parsed, and a zip
  over the limit is refused unread;
* every member's name is split at `/` and `\\`: an absolute name, a drive, a `..` part or a
  control character refuses the whole archive (no unzipper makes such a name by accident), and a
  name deeper than the limit too;
* links, devices and folders are never created (folders come from the files' own paths); a
  member whose place is taken (the same name twice, a file where a folder goes) is skipped;
* each kept member is inflated as a stream up to its own limit plus one byte (staging then
  refuses a file over its limit by its size, as for a folder) and up to the archive's total: the
  sizes a zip declares are not believed;
* files are created with O_EXCL | O_NOFOLLOW inside a target only this code writes to.

Refusals are ArchiveError (a message id and its parameters, reported like staging's own).
"""

import dataclasses
import os
import re
import stat
import struct
import zipfile
from pathlib import Path

CHUNK = 1 << 16


class ArchiveError(Exception):
    """An archive that will not be extracted: a message id of the catalogs and its parameters."""

    def __init__(self, message_id: str, **params):
        super().__init__(message_id, params)
        self.message_id, self.params = message_id, params


@dataclasses.dataclass(frozen=True)
class Limits:
    members: int  # members in the archive (folders included)
    total: int  # bytes inflated in all
    depth: int  # folders in a member's name
    member: int = None  # bytes inflated of one member (None: only `total` bounds it)
    file_size: int = 4 << 30  # bytes of the zip file itself


@dataclasses.dataclass
class Extracted:
    """What extract() wrote: `files`, the kept members' paths relative to the target; `skipped`,
    (name, why) for the members it did not write (a link, a device, a place taken, not kept)."""

    files: list = dataclasses.field(default_factory=list)
    skipped: list = dataclasses.field(default_factory=list)
    inflated: int = 0


def is_zip(path: Path) -> bool:
    """A regular file (not a link) that starts like a zip."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size < 22:
            return False
        with open(path, "rb") as file:
            return file.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def declared_members(path: Path) -> int:
    """How many members the zip's end record declares (zip64's too), read before zipfile parses
    the central directory; ArchiveError where there is no end record."""
    with open(path, "rb") as file:
        file.seek(0, os.SEEK_END)
        size = file.tell()
        tail_size = min(size, 22 + 65535 + 20)
        file.seek(size - tail_size)
        tail = file.read(tail_size)
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) < end + 22:
        raise ArchiveError("archive_unreadable", path=path.name, why="no end record")
    count = struct.unpack("<H", tail[end + 10 : end + 12])[0]
    locator = end - 20
    if count == 0xFFFF and locator >= 0 and tail[locator : locator + 4] == b"PK\x06\x07":
        offset = struct.unpack("<Q", tail[locator + 8 : locator + 16])[0]
        with open(path, "rb") as file:
            file.seek(offset)
            record = file.read(56)
        if record[:4] == b"PK\x06\x06":
            count = struct.unpack("<Q", record[32:40])[0]
    return count


def parts_of(name: str) -> list:
    """A member's name as path parts; ArchiveError("archive_unsafe_name") for a name that leaves
    the target or cannot be a file name."""
    unsafe = ArchiveError("archive_unsafe_name", name=_shown(name))
    if "\0" in name or re.search(r"[\x00-\x1f\x7f]", name):
        raise unsafe
    text = name.replace("\\", "/")
    if text.startswith("/") or re.match(r"^[A-Za-z]:", text):
        raise unsafe
    parts = [part for part in text.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise unsafe
    return parts


def _shown(name: str) -> str:
    return (repr(name)[1:-1])[:120]


def members(path: Path, limits: Limits) -> list:
    """The archive's members (zipfile.ZipInfo), after its size and member count are checked."""
    if not is_zip(path):
        raise ArchiveError("archive_unreadable", path=path.name, why="not a zip file")
    if os.lstat(path).st_size > limits.file_size:
        raise ArchiveError("archive_too_large", path=path.name, mib=limits.file_size >> 20)
    if declared_members(path) > limits.members:
        raise ArchiveError("archive_too_many", path=path.name, limit=limits.members)
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as error:
        raise ArchiveError("archive_unreadable", path=path.name, why=str(error)[:120]) from None
    if len(infos) > limits.members:
        raise ArchiveError("archive_too_many", path=path.name, limit=limits.members)
    return infos


def extract(path: Path, target: Path, limits: Limits, keep=lambda name: True, cap=None) -> Extracted:
    """Extract the members of zip `path` whose name `keep` accepts into the folder `target`
    (made, or empty and written by no one else), within `limits`; `cap(name)`: the bytes of a
    member kept at most (default limits.member), the rest cut off. Every name is checked before
    anything is written: an unsafe one refuses the archive whole."""
    path, target = Path(path), Path(target)
    infos = members(path, limits)
    planned = []
    for info in infos:
        parts = parts_of(info.filename)
        if len(parts) > limits.depth + 1:
            raise ArchiveError("archive_too_deep", path=path.name, limit=limits.depth)
        planned.append((info, parts))
    target.mkdir(parents=True, exist_ok=True)
    extracted = Extracted()
    with zipfile.ZipFile(path) as archive:
        for info, parts in planned:
            name = "/".join(parts)
            kind = stat.S_IFMT(info.external_attr >> 16)  # 0: no Unix mode (a zip made on Windows)
            if info.is_dir() or not parts:
                continue
            if kind not in (0, stat.S_IFREG):
                extracted.skipped.append((name, "link" if kind == stat.S_IFLNK else "special"))
                continue
            if not keep(name):
                extracted.skipped.append((name, "not kept"))
                continue
            if info.flag_bits & 0x1:
                raise ArchiveError("archive_encrypted", path=path.name, name=_shown(name))
            most = cap(name) if cap is not None else limits.member
            if _write(archive, info, target, parts, limits, extracted, most):
                extracted.files.append(name)
            else:
                extracted.skipped.append((name, "place taken"))
    return extracted


def _write(archive, info, target: Path, parts: list, limits: Limits, extracted: Extracted, most=None) -> bool:
    """One member into target/parts..., streamed within the limits; False where its place is
    taken (a file of that name, or a file where one of its folders goes)."""
    folder = target
    for part in parts[:-1]:
        folder = folder / part
        try:
            folder.mkdir(exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            return False
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False
    try:
        descriptor = os.open(folder / parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except (FileExistsError, IsADirectoryError):
        return False
    cap = most if most is not None else limits.total
    written = 0
    try:
        with os.fdopen(descriptor, "wb") as out, archive.open(info) as member:
            while written < cap:
                chunk = member.read(min(CHUNK, cap - written))
                if not chunk:
                    break
                written += len(chunk)
                extracted.inflated += len(chunk)
                if extracted.inflated > limits.total:
                    raise ArchiveError("archive_too_large", path=Path(archive.filename).name, mib=limits.total >> 20)
                out.write(chunk)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as error:
        raise ArchiveError("archive_unreadable", path=Path(archive.filename).name, why=str(error)[:120]) from None
    return True
