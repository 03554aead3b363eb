"""A zip handed in is graded as the folder it holds (autograder/engine/scan/archive.py and
staging), and a hostile one is refused with a message, never extracted outside its folder.

The zips are made here in the shapes students and LMSs make them (the package at the top, one
folder down, a whole repository, a folder holding one zip), and hostile ones are generated:
names that leave the folder in every spelling, links, devices, bombs (one member, many, a lying
size), a forged member count, encrypted members, names that collide. Each attack is also run
against the extractor with its defence taken out, to show the test sees it land."""

import os
import shutil
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from autograder.engine.judge.runner import grade
from autograder.engine.scan import archive
from autograder.engine.scan.submission import (
    NOTEBOOK_LIMIT,
    SOURCE_LIMIT,
    ZIP_LIMITS,
    StagingError,
    staging,
)
from conftest import SOLUTIONS

LIMITS = archive.Limits(members=100, total=1 << 20, depth=4, member=256 << 10)


def zip_of(path: Path, members: dict, mode=None) -> Path:
    """A zip at `path` of {name: bytes}; `mode` {name: st_mode} sets a member's Unix mode."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if mode and name in mode:
                info.external_attr = mode[name] << 16
            z.writestr(info, data)
    return path


def reference_members(prefix: str = "") -> dict:
    return {f"{prefix}mha/{p.name}": p.read_bytes() for p in sorted((SOLUTIONS / "mha").glob("*.py"))}


def everything_under(folder: Path) -> set:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")}


# --- zips as students and LMSs make them -----------------------------------------------------------


@pytest.mark.parametrize(
    "prefix, root",
    [("", "."), ("alice-hw/", "alice-hw"), ("mha-lab-main/assignments/", "mha-lab-main/assignments")],
    ids=["package at the top", "one folder down", "a whole repository"],
)
def test_a_zip_is_staged_as_the_folder_it_holds(tmp_path, prefix, root):
    path = zip_of(tmp_path / "alice.zip", {**reference_members(prefix), f"{prefix}README.md": b"notes"})
    with staging(path, "mha") as staged:
        assert sorted(p.name for p in (staged.root / "mha").glob("*.py")) == sorted(
            p.name for p in (SOLUTIONS / "mha").glob("*.py")
        )
        assert staged.package_root == root
        assert staged.graded_files == sorted(reference_members(prefix))
        folder = staged.root
    assert not folder.exists()  # the extraction is gone once staging ends


def test_a_folder_holding_only_a_zip_is_staged_from_it(tmp_path):
    """An LMS download's folder of one student: the zip they uploaded, under its own name."""
    student = tmp_path / "alice"
    student.mkdir()
    (student / "screenshot.png").write_bytes(b"\x89PNG")
    zip_of(student / "homework.zip", reference_members())
    with staging(student, "mha") as staged:
        assert staged.package_root == "homework.zip/."
        assert "homework.zip/mha/attention.py" in staged.graded_files


def test_a_zip_of_loose_step_files_or_of_a_notebook_is_graded(tmp_path):
    loose = zip_of(tmp_path / "loose.zip", {p.name: p.read_bytes() for p in (SOLUTIONS / "mha").glob("*.py")})
    with staging(loose, "mha") as staged:
        assert (staged.root / "mha" / "attention.py").read_bytes() == (SOLUTIONS / "mha" / "attention.py").read_bytes()
    notebook = zip_of(tmp_path / "nb.zip", {"hw/mha.ipynb": (SOLUTIONS / "mha.ipynb").read_bytes()})
    with staging(notebook, "mha") as staged:
        assert staged.graded_files == ["hw/mha.ipynb"]
        assert (staged.root / "mha" / "attention.py").is_file()


def test_the_reference_zipped_earns_full_marks(tmp_path, config):
    """On main 0a49a0a a .zip got 0: "no `mha` package found in .../alice.zip"."""
    result = grade(zip_of(tmp_path / "alice.zip", reference_members("hw/")), config)
    assert result.score == result.max_score, [(s.id, s.score) for s in result.steps]
    assert result.package_root == "hw" and "hw/mha/attention.py" in result.graded_files


def test_a_zip_without_the_package_says_what_it_holds(tmp_path, config):
    path = zip_of(tmp_path / "bob.zip", {"report.pdf": b"%PDF", "notes/answers.txt": b"x", "=cmd|calc.py.txt": b""})
    with pytest.raises(StagingError) as raised, staging(path, "mha"):
        pass
    assert raised.value.message_id == "missing_package_archive"
    assert raised.value.params["contents"] == "report.pdf, notes/answers.txt, =cmd|calc.py.txt"
    result = grade(path, config)
    message = result.steps[0].checks[0].message
    assert message.startswith("no `mha` package found in the zip bob.zip: it holds report.pdf") and result.score == 0


# --- hostile zips ----------------------------------------------------------------------------------

ESCAPES = [
    "../escaped.py",
    "mha/../../escaped.py",
    "/tmp/escaped.py",
    "//server/share/escaped.py",
    "C:/escaped.py",
    "C:escaped.py",
    "..\\escaped.py",
    "mha\\..\\..\\escaped.py",
    "mha/\x1b[2Jescaped.py",
    "mha/line\nbreak.py",
]


@pytest.mark.parametrize("name", ESCAPES, ids=[repr(name) for name in ESCAPES])
def test_a_name_that_leaves_the_folder_refuses_the_archive_and_writes_nothing(tmp_path, name):
    path = zip_of(tmp_path / "evil.zip", {"mha/attention.py": b"x = 1\n", name: b"print('escaped')\n"})
    target = tmp_path / "deep" / "er" / "target"
    before = everything_under(tmp_path)
    with pytest.raises(archive.ArchiveError) as raised:
        archive.extract(path, target, LIMITS)
    assert raised.value.message_id == "archive_unsafe_name"
    assert everything_under(tmp_path) - before <= {"deep", "deep/er"}  # not even the safe member


def test_the_escape_lands_when_the_name_check_is_taken_out(tmp_path, monkeypatch):
    """The test above sees an escape: with names split naively, `../escaped.py` lands outside."""
    monkeypatch.setattr(archive, "parts_of", lambda name: name.split("/"))
    path = zip_of(tmp_path / "evil.zip", {"../escaped.py": b"print('escaped')\n"})
    target = tmp_path / "target"
    archive.extract(path, target, LIMITS)
    assert (tmp_path / "escaped.py").exists()


def test_links_and_devices_in_a_zip_are_never_created(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("the reference")
    path = zip_of(
        tmp_path / "links.zip",
        {"mha/attention.py": str(secret).encode(), "mha/fifo.py": b"", "mha/ok.py": b"x = 1\n"},
        mode={"mha/attention.py": stat.S_IFLNK | 0o777, "mha/fifo.py": stat.S_IFIFO | 0o644},
    )
    extracted = archive.extract(path, tmp_path / "out", LIMITS)
    assert extracted.files == ["mha/ok.py"]
    assert sorted(extracted.skipped) == [("mha/attention.py", "link"), ("mha/fifo.py", "special")]
    for entry in (tmp_path / "out").rglob("*"):
        assert stat.S_ISDIR(os.lstat(entry).st_mode) or stat.S_ISREG(os.lstat(entry).st_mode), entry


def test_a_bomb_of_one_member_is_cut_at_its_cap(tmp_path):
    huge = 64 << 20
    path = tmp_path / "bomb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mha/attention.py", b"#" * huge)
    assert path.stat().st_size < huge // 500
    extracted = archive.extract(path, tmp_path / "out", ZIP_LIMITS, cap=lambda name: SOURCE_LIMIT + 1)
    assert (tmp_path / "out" / "mha" / "attention.py").stat().st_size == SOURCE_LIMIT + 1
    assert extracted.inflated == SOURCE_LIMIT + 1


def test_many_members_that_inflate_past_the_total_are_refused(tmp_path):
    path = zip_of(tmp_path / "bombs.zip", {f"mha/f{i}.py": b"#" * (200 << 10) for i in range(8)})
    with pytest.raises(archive.ArchiveError) as raised:
        archive.extract(path, tmp_path / "out", LIMITS)
    assert raised.value.message_id == "archive_too_large"
    written = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert written <= LIMITS.total


def test_a_member_that_lies_about_its_size_is_still_cut(tmp_path):
    """The size a zip declares is not what bounds the extraction: the bytes inflated are."""
    path = zip_of(tmp_path / "liar.zip", {"mha/a.py": b"#" * (300 << 10)})
    data = bytearray(path.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # the local and central sizes: 10 bytes
        at = data.find(signature)
        data[at + offset : at + offset + 4] = struct.pack("<I", 10)
    path.write_bytes(bytes(data))
    try:
        extracted = archive.extract(path, tmp_path / "out", LIMITS)
    except archive.ArchiveError as error:  # zipfile may see the lie itself
        assert error.message_id == "archive_unreadable"
    else:
        assert extracted.inflated <= LIMITS.member + 1


def test_a_forged_member_count_is_refused_before_the_directory_is_read(tmp_path, monkeypatch):
    path = zip_of(tmp_path / "many.zip", {"mha/a.py": b"x = 1\n"})
    data = bytearray(path.read_bytes())
    end = data.rfind(b"PK\x05\x06")
    data[end + 8 : end + 12] = struct.pack("<HH", 60000, 60000)
    path.write_bytes(bytes(data))
    monkeypatch.setattr(zipfile, "ZipFile", None)  # never reached
    with pytest.raises(archive.ArchiveError) as raised:
        archive.extract(path, tmp_path / "out", LIMITS)
    assert raised.value.message_id == "archive_too_many"


def test_too_deep_encrypted_corrupt_and_colliding_zips(tmp_path):
    deep = zip_of(tmp_path / "deep.zip", {"a/b/c/d/e/f/g.py": b""})
    with pytest.raises(archive.ArchiveError, match="archive_too_deep"):
        archive.extract(deep, tmp_path / "o1", LIMITS)
    encrypted = zip_of(tmp_path / "enc.zip", {"mha/a.py": b"x"})
    data = bytearray(encrypted.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(signature)
        data[at + offset] |= 1
    encrypted.write_bytes(bytes(data))
    with pytest.raises(archive.ArchiveError, match="archive_encrypted"):
        archive.extract(encrypted, tmp_path / "o2", LIMITS)
    corrupt = tmp_path / "corrupt.zip"
    corrupt.write_bytes(zip_of(tmp_path / "c.zip", {"mha/a.py": os.urandom(1000)}).read_bytes()[:200])
    with pytest.raises(archive.ArchiveError, match="archive_unreadable"):
        archive.extract(corrupt, tmp_path / "o3", LIMITS)
    colliding = tmp_path / "collide.zip"
    with zipfile.ZipFile(colliding, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("mha/a.py", b"first")
        z.writestr("mha/a.py", b"second")
        z.writestr("mha", b"a file where a folder is")
        z.writestr("mha/a.py/b.py", b"under a file")
    extracted = archive.extract(colliding, tmp_path / "o4", LIMITS)
    assert extracted.files == ["mha/a.py"] and (tmp_path / "o4" / "mha" / "a.py").read_bytes() == b"first"
    assert sorted(name for name, _ in extracted.skipped) == ["mha", "mha/a.py", "mha/a.py/b.py"]


def test_a_hostile_zip_costs_its_student_only(tmp_path, config):
    """Graded, a refused zip is every step's message; its neighbour is graded."""
    evil = zip_of(tmp_path / "evil.zip", {"../../x.py": b""})
    result = grade(evil, config)
    assert {check.message_id for step in result.steps for check in step.checks} == {"archive_unsafe_name"}
    assert "../../x.py" in result.steps[0].checks[0].message
    good = grade(zip_of(tmp_path / "good.zip", reference_members()), config)
    assert good.score == good.max_score


@pytest.mark.parametrize("files", [{"mha/attention.py": SOURCE_LIMIT + 5}, {"mha.ipynb": NOTEBOOK_LIMIT + 5}])
def test_a_file_over_stagings_limit_is_refused_as_in_a_folder(tmp_path, files):
    """A zip's file is kept one byte over staging's limit, so that staging refuses it by its size."""
    members = {**reference_members(), **{name: b"#" * size for name, size in files.items()}}
    if "mha.ipynb" in files:
        members = {"mha.ipynb": b"#" * files["mha.ipynb"]}
    path = zip_of(tmp_path / "big.zip", members)
    with staging(path, "mha") as staged:
        if "mha.ipynb" in files:
            assert staged.graded_files == ["mha.ipynb"] and not list((staged.root / "mha").glob("*.py"))
        else:
            assert "mha/attention.py" not in staged.graded_files  # refused by its size


def test_every_tree_zipped_stages_as_the_tree_itself(tmp_path):
    """Property: a folder and the zip of its contents stage the same files, for generated layouts
    (a package at the top, one folder down, under assignments/; names in Korean, with spaces)."""
    import random

    rng = random.Random(7)
    sources = {p.name: p.read_bytes() for p in (SOLUTIONS / "mha").glob("*.py")}
    for trial in range(12):
        prefix = rng.choice(["", "hw/", "src/", "김민수_과제/", "x y/", "a.b/"])
        under = rng.choice(["", "assignments/"])
        members = {f"{prefix}{under}mha/{name}": data for name, data in sources.items()}
        members[f"{prefix}notes.txt"] = b"x"
        folder = tmp_path / f"tree{trial}"
        for name, data in members.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        path = zip_of(tmp_path / f"tree{trial}.zip", members)
        with staging(folder, "mha") as from_folder, staging(path, "mha") as from_zip:
            assert from_zip.graded_files == from_folder.graded_files, prefix
            assert from_zip.package_root == from_folder.package_root
            for name in sources:
                assert (from_zip.root / "mha" / name).read_bytes() == (from_folder.root / "mha" / name).read_bytes()
        shutil.rmtree(folder)
