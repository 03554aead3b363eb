"""Where a notebook unpacks the grader it carries: a folder of the user's own.

The setup cell of the student notebook and of the nbgrader course's notebook carries
`grader_home` as text (nbgrader_course.installer) and calls it where the kit is not installed
(a JupyterHub, Colab), before anything of the grader can be imported: so it is one function of
the standard library alone, and what it does is what the cell does.

On a machine whose users share a temporary folder, a folder whose name anyone can predict may
already be there, made by another user, holding their code: it must never be used. The grader
goes into a folder that belongs to the user, that no one else can write, under folders that no
one else can write either (a shared /tmp counts only with its sticky bit, which keeps others from
renaming or removing what is not theirs); it is checked before every use, and filled in a new
folder of a random name beside it, renamed into place once whole.
"""


def grader_home(grader: str) -> str:
    """The folder that holds the grader `grader` (a base64 zip) unpacked, made if need be, to put
    first on sys.path. Tried in order: ~/.cache/mha-lab (or $XDG_CACHE_HOME/mha-lab), then
    <temp>/mha-lab-<uid>, then a new folder of a random name in <temp>; one that is a link,
    another user's, open to others or under a folder others can write is passed over. On
    Windows (no uids; the temporary folder is the user's own) the first that works is used."""
    import base64
    import hashlib
    import io
    import os
    import shutil
    import stat
    import tempfile
    import zipfile

    uid = os.geteuid() if hasattr(os, "geteuid") else None

    def trusted_above(path):  # `path` (a real path) and every folder above: root's or ours, shut to others
        while uid is not None:
            info = os.lstat(path)
            if not stat.S_ISDIR(info.st_mode) or info.st_uid not in (uid, 0):
                return False
            if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:  # sticky: no one renames ours
                return False
            if os.path.dirname(path) == path:
                break
            path = os.path.dirname(path)
        return True

    def private(path):  # a real folder of ours that no one else can read or write
        info = os.lstat(path)
        if uid is None:
            return stat.S_ISDIR(info.st_mode)
        return stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o077

    def whole(path):
        return private(path) and os.path.isfile(os.path.join(path, ".unpacked"))

    name = "grader-" + hashlib.sha256(grader.encode("ascii")).hexdigest()[:16]
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    temporary = tempfile.gettempdir()
    for base in (os.path.join(cache, "mha-lab"), os.path.join(temporary, f"mha-lab-{uid}"), None):
        try:
            if base is None:  # a new folder no one can have made before: 0700, of a random name
                base = tempfile.mkdtemp(prefix="mha-lab-", dir=temporary)
            else:
                os.makedirs(os.path.dirname(base), mode=0o700, exist_ok=True)
                try:
                    os.mkdir(base, 0o700)
                except FileExistsError:
                    pass  # checked below like any other
            base = os.path.join(os.path.realpath(os.path.dirname(base)), os.path.basename(base))
            if not (trusted_above(os.path.dirname(base)) and private(base)):
                continue
            target = os.path.join(base, name)
            if os.path.lexists(target) and whole(target):
                return target
            work = tempfile.mkdtemp(prefix=".unpacking-", dir=base)
            zipfile.ZipFile(io.BytesIO(base64.b64decode(grader))).extractall(work)
            open(os.path.join(work, ".unpacked"), "w").close()
            for _ in range(2):
                try:
                    os.rename(work, target)  # whole, or not there at all
                    return target
                except OSError:
                    if whole(target):  # another kernel of ours was quicker: its copy is the same
                        shutil.rmtree(work, ignore_errors=True)
                        return target
                    shutil.rmtree(target, ignore_errors=True)  # half a copy of ours (a kill): redone
            shutil.rmtree(work, ignore_errors=True)
        except OSError:
            continue
    raise RuntimeError(
        "no folder of your own to unpack the grader into (~/.cache and the temporary folder are open to "
        "other users here): set XDG_CACHE_HOME to a folder only you can write, then run this cell again"
    )
