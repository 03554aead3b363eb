"""engine/operations/commits.py: a student repository's head commit read from its files, never
by running git (its config can make git run the student's programs), loose or packed, through
no link; what the commit says is the student's (a forged date is read as written)."""

import os
import subprocess

import pytest

from autograder.engine.operations import commits, gradebook


def git(repo, *args, date="2026-10-01T10:00:00+09:00"):
    env = {**os.environ, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date, "HOME": str(repo.parent)}
    env.update(GIT_AUTHOR_NAME="s", GIT_AUTHOR_EMAIL="s@x", GIT_COMMITTER_NAME="s", GIT_COMMITTER_EMAIL="s@x")
    return subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True)


def repository(tmp_path, dates):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for number, date in enumerate(dates):
        (repo / "f.txt").write_text(str(number) * (number + 1) * 100)
        git(repo, "add", "f.txt")
        git(repo, "commit", "-q", "-m", f"c{number}", date=date)
    return repo


@pytest.mark.parametrize("packed", [False, True])
def test_head_commit_is_read_loose_and_packed_as_git_reads_it(tmp_path, packed):
    dates = ["2026-09-30T10:00:00+09:00", "2026-10-02T03:04:05-05:00", "2026-10-03T23:59:59+00:00"]
    repo = repository(tmp_path, dates)
    if packed:
        git(repo, "gc", "-q", "--aggressive")  # deltas, packed refs
        assert not list((repo / ".git" / "objects").glob("??/*"))
    commit = commits.head_commit(repo)
    assert commit.sha == git(repo, "rev-parse", "HEAD").stdout.strip()
    assert commit.committer_time.isoformat() == "2026-10-03T23:59:59+00:00"
    assert len(commit.parents) == 1


def test_a_link_on_the_way_or_no_repository_reads_as_nothing(tmp_path, monkeypatch):
    repo = repository(tmp_path, ["2026-09-30T10:00:00+09:00"])
    assert commits.head_commit(tmp_path / "nowhere") is None
    head = repo / ".git" / "HEAD"
    (tmp_path / "elsewhere").write_text(head.read_text())
    head.unlink()
    head.symlink_to(tmp_path / "elsewhere")
    assert commits.head_commit(repo) is None
    monkeypatch.setattr(commits.os, "O_NOFOLLOW", 0)  # the defence taken out: the link is read through
    assert commits.head_commit(repo) is not None


def test_commit_times_says_the_date_is_the_students(tmp_path):
    forged = "2020-01-01T00:00:00+00:00"  # GIT_COMMITTER_DATE is anyone's to set
    repo = repository(tmp_path, [forged])
    found = gradebook.commit_times({"alice": repo})["alice"]
    assert found["at"] == "2020-01-01T00:00+00:00" and "student's to write" in found["source"]
