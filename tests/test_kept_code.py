"""What grading keeps of the code it accepted, beside each result of `grade --out` (kept_code.py):
the files staging took (never through a link, a pipe or a device), whole up to a limit, each
with its digest, and a result that names the digest of what is kept."""

import hashlib
import json
import os
from pathlib import Path

from autograder.engine.judge import kept_code
from autograder.engine.judge.result_files import write_json
from autograder.engine.judge.results import GradeResult
from autograder.engine.operations.shard import merge
from autograder.engine.scan.submission import SOURCE_LIMIT, read_regular, submission_files


def test_grading_takes_only_regular_files_never_through_a_link_a_pipe_or_a_device(tmp_path):
    classmate = tmp_path / "classmate.py"
    classmate.write_text("def scaled_dot_product_attention(q, k, v, mask=None):\n    return q, k\n")
    package = tmp_path / "student" / "mha"
    (package / "util").mkdir(parents=True)
    (package / "heads.py").write_text("def split_heads(x, n):\n    return x\n")
    (package / "util" / "helpers.py").write_text("X = 1\n")
    os.symlink(classmate, package / "attention.py")
    os.symlink("/dev/zero", package / "zero.py")
    os.mkfifo(package / "pipe.py")
    (package / "big.py").write_bytes(b"#" * (SOURCE_LIMIT + 1))
    (package / "not-a-module.py").write_text("x = 1\n")
    taken = submission_files(tmp_path / "student", "mha")
    assert sorted(taken) == ["heads.py", "util/helpers.py"]
    for path in (package / "attention.py", package / "zero.py", package / "pipe.py", package / "big.py", package):
        assert read_regular(path, SOURCE_LIMIT) is None
    assert read_regular(package / "heads.py", 10) is None  # over the limit asked for
    assert read_regular(package / "heads.py", 100) == (package / "heads.py").read_bytes()


def test_the_smallest_files_are_kept_whole_up_to_the_limit_and_every_file_has_its_digest():
    files = {"a.py": b"a" * 10, "b.py": b"b" * (kept_code.KEEP_BYTES - 20), "c.py": b"c" * 30, "d.py": b"\xff\xfe"}
    kept = kept_code.keep(files)
    records = {r["path"]: r for r in kept["files"]}
    assert set(records) == set(files) and all(len(r["sha256"]) == 64 for r in records.values())
    assert [path for path, r in sorted(records.items()) if "text" in r] == ["a.py", "c.py", "d.py"]  # b: no room left
    assert records["d.py"]["text"] == "\ufffd\ufffd" and records["c.py"]["bytes"] == 30
    ref = kept_code.reference(kept)
    assert (ref["files"], ref["kept"], ref["bytes"]) == (4, 3, sum(map(len, files.values())))
    assert kept_code.keep({"a.py": b"a" * 10, "b.py": b"b" * (kept_code.KEEP_BYTES - 10)})["files"][1]["text"]


def test_a_result_believes_only_the_kept_code_whose_digest_it_names(tmp_path):
    out = tmp_path / "grades"
    kept = kept_code.keep({"attention.py": b"x = 1\n"})
    ref = kept_code.write(out, "ann", kept)
    assert kept_code.read(out, "ann", ref) == ({"attention.py": "x = 1\n"}, None)
    assert kept_code.read(out, "ann", None) == (None, "code_not_kept")  # graded by an older kit
    assert kept_code.read(out, "bo", ref) == (None, "code_missing")
    kept_code.write(out, "ann", kept_code.keep({"attention.py": b"x = 2\n"}))  # a later run, an edit
    assert kept_code.read(out, "ann", ref) == (None, "code_mismatch")
    (out / "code" / "ann.json").unlink()
    os.symlink("/dev/zero", out / "code" / "ann.json")
    assert kept_code.read(out, "ann", ref) == (None, "code_missing")
    garbage = b"{not json"
    (out / "code" / "cy.json").write_bytes(garbage)
    assert kept_code.read(out, "cy", {"sha256": hashlib.sha256(garbage).hexdigest()}) == (None, "code_unreadable")
    partial = kept_code.keep({"a.py": b"1", "b.py": b"#" * kept_code.KEEP_BYTES})
    assert kept_code.read(out, "di", kept_code.write(out, "di", partial)) == ({"a.py": "1"}, "code_partial")


def test_a_result_names_the_digest_of_the_code_written_before_it(tmp_path):
    out = tmp_path / "grades"
    result = GradeResult(assignment="MHA", submission="s", steps=[], code=kept_code.keep({"a.py": b"x = 1\n"}))
    ref = kept_code.write(out, "s", result.code)
    write_json(result, out / "s.json", extra={"code": ref})
    data = json.loads((out / "s.json").read_text())
    assert data["code"] == ref and "files" not in data  # the code itself is not in the result
    assert kept_code.read(out, "s", data["code"])[0] == {"a.py": "x = 1\n"}


def test_merged_shards_keep_the_code_each_result_was_graded_from(tmp_path):
    """merge copies each result's kept code beside it, first, as grading writes them."""
    for shard, sid in (("shard1", "a"), ("shard2", "b")):
        out = tmp_path / shard
        result = GradeResult(assignment="MHA", submission=sid, steps=[], code=kept_code.keep({"a.py": sid.encode()}))
        write_json(result, out / f"{sid}.json", extra={"code": kept_code.write(out, sid, result.code)})
    merge([tmp_path / "shard1", tmp_path / "shard2"], tmp_path / "merged", allow_missing=True)
    merged = tmp_path / "merged"
    for sid in ("a", "b"):
        ref = json.loads((merged / f"{sid}.json").read_text())["code"]
        assert kept_code.read(merged, sid, ref) == ({"a.py": sid}, None)
    assert sorted(Path(p).name for p in (merged / "code").iterdir()) == ["a.json", "b.json"]
