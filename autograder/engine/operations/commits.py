"""The commit a student's repository is at, read from its .git folder without running git.

    commit = head_commit(Path("mha-lab-submissions/alice"))   # None where there is none to read
    commit.committer_time, commit.parents

A student's repository is hostile: its .git/config can make a git command run a program of
theirs (core.fsmonitor, a pager, a textconv driver, ...), its refs can be links, its objects
huge. So nothing here starts git: HEAD, the ref and the commit object are read as files, only
regular ones, never through a link, each within a size limit (a loose object inflated up to
OBJECT_LIMIT; a packed one found through its pack index, its deltas applied within DELTA_DEPTH).
Alternates (objects borrowed from another repository) are not followed. What the commit says
(its committer date included) is the student's to write: a caller weighs it, it proves nothing.
"""

import dataclasses
import datetime
import os
import re
import stat
import zlib
from pathlib import Path

OBJECT_LIMIT = 1 << 20  # bytes of a commit object, inflated
FILE_LIMIT = 1 << 20  # bytes of HEAD, a ref file, packed-refs
INDEX_LIMIT = 256 << 20  # bytes of a pack index
DELTA_DEPTH = 64  # deltas applied on the way to one object
PACKS = 64  # pack files looked into
SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclasses.dataclass(frozen=True)
class Commit:
    sha: str
    committer_time: datetime.datetime  # with the committer's UTC offset, as written
    author_time: datetime.datetime
    parents: tuple


def head_commit(repository) -> Commit | None:
    """The commit HEAD names in `repository` (a folder holding .git/), or None where it cannot
    be read safely (no .git folder, a link anywhere on the way, a ref or object not found, a
    file over its limit, a SHA-256 repository)."""
    git = Path(repository) / ".git"
    if not _is_dir(Path(repository)) or not _is_dir(git):
        return None
    try:
        sha = _resolve(git, "HEAD")
        return read_commit(git, sha) if sha else None
    except (OSError, ValueError, zlib.error, IndexError, KeyError):
        return None


def read_commit(git: Path, sha: str) -> Commit | None:
    kind, body = _object(git, sha)
    if kind != "commit":
        return None
    headers = body.split(b"\n\n", 1)[0].decode("utf-8", "replace").splitlines()
    parents = tuple(line.split()[1] for line in headers if line.startswith("parent "))
    committer = next((line for line in headers if line.startswith("committer ")), None)
    author = next((line for line in headers if line.startswith("author ")), None)
    if committer is None:
        return None
    return Commit(sha, _when(committer), _when(author) if author else None, parents)


def _when(line: str) -> datetime.datetime:
    """The time of an author/committer line: `... <email> 1727794740 +0900`."""
    seconds, offset = line.rsplit(" ", 2)[-2:]
    sign = -1 if offset.startswith("-") else 1
    minutes = sign * (int(offset[1:3]) * 60 + int(offset[3:5]))
    zone = datetime.timezone(datetime.timedelta(minutes=minutes))
    return datetime.datetime.fromtimestamp(int(seconds), zone)


def _is_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _read(path: Path, limit: int) -> bytes:
    """A regular file's bytes (never through a link: O_NOFOLLOW, and no link among `path`'s
    folders below .git either, as _safe_path checks), ValueError past `limit`."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError(f"{path}: not a regular file")
        if info.st_size > limit:
            raise ValueError(f"{path}: over {limit} bytes")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(limit + 1)[:limit]
    finally:
        os.close(descriptor)


def _safe_path(git: Path, *parts: str) -> Path:
    """git/parts..., each folder on the way a real folder (no link): ValueError otherwise."""
    path = git
    for part in parts[:-1]:
        path = path / part
        if not _is_dir(path):
            raise ValueError(f"{path}: not a folder")
    return path / parts[-1]


def _resolve(git: Path, name: str, depth: int = 0) -> str | None:
    """The SHA-1 a ref names (HEAD, refs/heads/main), through symbolic refs and packed-refs."""
    if depth > 8 or ".." in name.split("/") or name.startswith("/"):
        return None
    parts = name.split("/")
    try:
        text = _read(_safe_path(git, *parts), FILE_LIMIT).decode("ascii", "replace").strip()
    except (OSError, ValueError):
        text = None
    if text is None:
        try:
            packed = _read(git / "packed-refs", FILE_LIMIT).decode("ascii", "replace")
        except (OSError, ValueError):
            return None
        for line in packed.splitlines():
            words = line.split()
            if len(words) == 2 and words[1] == name and SHA.match(words[0]):
                return words[0]
        return None
    if text.startswith("ref:"):
        return _resolve(git, text[4:].strip(), depth + 1)
    return text if SHA.match(text) else None


def _object(git: Path, sha: str, depth: int = 0) -> tuple:
    """(kind, body) of object `sha`: loose, or in a pack."""
    if depth > DELTA_DEPTH or not SHA.match(sha):
        raise ValueError("no such object")
    try:
        raw = _read(_safe_path(git, "objects", sha[:2], sha[2:]), OBJECT_LIMIT * 4)
    except (OSError, ValueError):
        raw = None
    if raw is not None:
        data = _inflate(raw)
        header, _, body = data.partition(b"\0")
        return header.split(b" ")[0].decode("ascii"), body
    for pack in _packs(git):
        offset = _pack_offset(pack.with_suffix(".idx"), sha)
        if offset is not None:
            return _packed(git, pack, offset, depth)
    raise ValueError("no such object")


def _inflate(raw: bytes) -> bytes:
    """zlib-inflate `raw` to at most OBJECT_LIMIT bytes (ValueError beyond: a bomb)."""
    inflater = zlib.decompressobj()
    data = inflater.decompress(raw, OBJECT_LIMIT + 1)
    if len(data) > OBJECT_LIMIT:
        raise ValueError("object over the limit")
    return data


def _packs(git: Path) -> list:
    folder = _safe_path(git, "objects", "pack", "x").parent
    found = sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".pack"))[:PACKS]
    return [folder / name for name in found]


def _pack_offset(index: Path, sha: str):
    """Where object `sha` starts in the pack whose index (version 2) is `index`, or None."""
    data = _read(index, INDEX_LIMIT)
    if data[:4] != b"\377tOc" or int.from_bytes(data[4:8], "big") != 2:
        return None
    fanout = [int.from_bytes(data[8 + 4 * i : 12 + 4 * i], "big") for i in range(256)]
    count, first = fanout[255], int(sha[:2], 16)
    low, high = (fanout[first - 1] if first else 0), fanout[first]
    names = 8 + 1024
    wanted = bytes.fromhex(sha)
    while low < high:  # binary search of the sorted names
        middle = (low + high) // 2
        name = data[names + 20 * middle : names + 20 * middle + 20]
        if name == wanted:
            break
        low, high = (middle + 1, high) if name < wanted else (low, middle)
    else:
        return None
    offsets = names + 20 * count + 4 * count
    offset = int.from_bytes(data[offsets + 4 * middle : offsets + 4 * middle + 4], "big")
    if offset & 0x80000000:  # in the table of large offsets
        large = offsets + 4 * count + 8 * (offset & 0x7FFFFFFF)
        offset = int.from_bytes(data[large : large + 8], "big")
    return offset


KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}


def _packed(git: Path, pack: Path, offset: int, depth: int) -> tuple:
    """(kind, body) of the object at `offset` of `pack`, its deltas applied."""
    descriptor = os.open(pack, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise ValueError("not a regular file")
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            file.seek(offset)
            head = file.read(32 + OBJECT_LIMIT * 2)
    finally:
        os.close(descriptor)
    byte, position = head[0], 1
    kind, size, shift = (byte >> 4) & 7, byte & 15, 4
    while byte & 0x80:
        byte = head[position]
        position += 1
        size |= (byte & 0x7F) << shift
        shift += 7
    if size > OBJECT_LIMIT:
        raise ValueError("object over the limit")
    if kind in KINDS:
        return KINDS[kind], _inflate(head[position:])[:size]
    if kind == 6:  # OFS_DELTA: the base is an offset back in this pack
        byte = head[position]
        position += 1
        back = byte & 0x7F
        while byte & 0x80:
            byte = head[position]
            position += 1
            back = ((back + 1) << 7) | (byte & 0x7F)
        base_kind, base = _packed(git, pack, offset - back, depth + 1)
    elif kind == 7:  # REF_DELTA: the base is named
        base_kind, base = _object(git, head[position : position + 20].hex(), depth + 1)
        position += 20
    else:
        raise ValueError("unknown object kind")
    return base_kind, _apply_delta(base, _inflate(head[position:]))


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    def size(position):
        value, shift = 0, 0
        while True:
            byte = delta[position]
            position += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, position

    _, position = size(0)
    target_size, position = size(position)
    if target_size > OBJECT_LIMIT:
        raise ValueError("object over the limit")
    out = bytearray()
    while position < len(delta):
        op = delta[position]
        position += 1
        if op & 0x80:  # copy from the base
            start = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    start |= delta[position] << (8 * bit)
                    position += 1
            for bit in range(3):
                if op & (1 << (4 + bit)):
                    length |= delta[position] << (8 * bit)
                    position += 1
            out += base[start : start + (length or 0x10000)]
        elif op:  # insert the next `op` bytes
            out += delta[position : position + op]
            position += op
        else:
            raise ValueError("bad delta")
        if len(out) > OBJECT_LIMIT:
            raise ValueError("object over the limit")
    return bytes(out)
