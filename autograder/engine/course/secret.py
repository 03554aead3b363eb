"""The course secret: what makes the hidden checks' inputs known to the instructor alone.

    secret = read_secret()                 # bytes, or None where this course has none
    secret, made = ensure_secret()         # `release`, `gradescope` and `secret` make one once
    seed = hidden_seed(secret, "mha")      # the assignment's grading seed: a keyed hash

It is 32 random bytes made once per course by the instructor's kit and kept in the instructor's
files only: `.mha-lab/course-secret` in the kit (git-ignored; the folder 0700, the file 0600,
written whole or not at all), or the environment variable MHA_LAB_COURSE_SECRET (a grading
machine that has no copy of the file: an Actions secret, a Slurm job's environment), and
MHA_LAB_COURSE_DIR moves the folder. Each assignment's hidden seed is HMAC-SHA256(secret, its id):
the same secret gives the same hidden inputs on every run and every machine, another course's
secret other ones, and the seed of one assignment tells nothing of another's or of the secret.
Nothing here is shipped with a secret in it: the release, the notebooks and Classroom
repositories carry the code, never `.mha-lab/` (tests/test_secret.py greps them).
"""

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from autograder import KIT

SECRET_ENV = "MHA_LAB_COURSE_SECRET"
DIR_ENV = "MHA_LAB_COURSE_DIR"
FILE_NAME = "course-secret"
SECRET_BYTES = 32
MIN_HEX = 32  # 128 bits at least: a secret anyone could guess is no secret
PURPOSE = b"mha-lab hidden seed v1\0"


class SecretError(ValueError):
    """A course secret that cannot be read or used (exit code 2, as a bad grading.yml): the
    message names where."""


def course_dir() -> Path:
    """The instructor's private folder: MHA_LAB_COURSE_DIR, else `.mha-lab/` in the kit."""
    return Path(os.environ.get(DIR_ENV) or KIT / ".mha-lab")


def secret_path() -> Path:
    return course_dir() / FILE_NAME


def _parse(text: str, where: str) -> bytes:
    value = "".join(text.split())
    try:
        secret = bytes.fromhex(value)
    except ValueError:
        secret = b""
    if len(value) < MIN_HEX or not secret:
        raise SecretError(
            f"{where}: not a course secret (at least {MIN_HEX} hexadecimal digits, as "
            "`python -m autograder secret` writes)"
        )
    return secret


def source() -> str:
    """Where the secret in use comes from, in words (never the secret itself), or "" if none."""
    if os.environ.get(SECRET_ENV, "").strip():
        return f"the environment variable {SECRET_ENV}"
    return str(secret_path()) if secret_path().exists() else ""


def read_secret():
    """The course secret (bytes), or None where none is set; SecretError for one that is set but
    unreadable or malformed (never a silent fallback: it would change every hidden input)."""
    given = os.environ.get(SECRET_ENV, "")
    if given.strip():
        return _parse(given, SECRET_ENV)
    path = secret_path()
    try:
        text = path.read_text(encoding="ascii")
        chosen = chosen_by_others(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise SecretError(f"{path}: cannot read the course secret ({error})") from None
    if chosen:  # another user could have put there a secret they know: every hidden input theirs
        raise SecretError(
            f"{path}: another user of this machine could have written this course secret ({chosen}); "
            f"make the file and its folder yours and private (chmod 600, chmod 700) after checking it, "
            f"or set {SECRET_ENV}"
        )
    return _parse(text, str(path))


def chosen_by_others(path: Path) -> str:
    """Why someone else than this user (or root) could have chosen the secret at `path` ("" where
    no one could): the file, or the folder it is in, belongs to another user or is writable by
    others (a folder's sticky bit keeps them from replacing ours). Root reads whoever's file it is
    given (a container's bind mount), but not one that others can write."""
    problems, uid = [], os.geteuid()
    for target, kind in ((path, "the file"), (Path(os.path.realpath(path)).parent, "its folder")):
        info = os.stat(target)
        if uid != 0 and info.st_uid not in (uid, 0):
            problems.append(f"{kind} belongs to uid {info.st_uid}")
        elif info.st_mode & 0o022 and not (kind == "its folder" and info.st_mode & stat.S_ISVTX):
            problems.append(f"{kind} has mode {stat.S_IMODE(info.st_mode):o}")
    return "; ".join(problems)


def exposure(path: Path = None) -> str:
    """Why the secret's file is not private ("" where it is): a link, another owner, or bits
    that let others read it or its folder. `doctor` says so."""
    path = Path(path or secret_path())
    problems = []
    for target, allowed in ((path.parent, 0o700), (path, 0o600)):
        try:
            info = os.lstat(target)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode):
            problems.append(f"{target} is a link")
        elif info.st_uid != os.geteuid():
            problems.append(f"{target} belongs to uid {info.st_uid}")
        elif stat.S_IMODE(info.st_mode) & ~allowed & 0o077:
            problems.append(f"{target} has mode {stat.S_IMODE(info.st_mode):o} (others may read it)")
    return "; ".join(problems)


def ensure_secret():
    """(the course secret, whether it was made now). Made where none is set: 32 bytes from the
    system's random source, into a 0600 file in a 0700 folder, linked into place only if no
    secret is there yet (two at once leave one, and both use it), after it is on disk."""
    secret = read_secret()
    if secret is not None:
        return secret, False
    directory = course_folder()
    made = secrets.token_bytes(SECRET_BYTES)
    temporary = directory / f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(made.hex() + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(temporary, secret_path())  # never over an existing secret
        except FileExistsError:
            return read_secret(), False
    finally:
        temporary.unlink(missing_ok=True)
    return made, True


def course_folder() -> Path:
    """The course folder, made if need be (0700), with a .gitignore of `*`: whatever the kit's own
    .gitignore says, `git add -A` never takes the secret into a repository."""
    directory = course_dir()
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ignore = directory / ".gitignore"
    if not ignore.exists():
        try:
            ignore.write_text("# the course secret and the release manifests: the instructor's only\n*\n")
        except OSError:
            pass
    return directory


def hidden_seed(secret: bytes, assignment_id: str) -> int:
    """The grading seed of `assignment_id` in the course of `secret`: HMAC-SHA256, 63 bits."""
    digest = hmac.new(secret, PURPOSE + assignment_id.encode("utf-8"), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % (2**63)
