"""Install paths: CPU torch from PyTorch's CPU index in what the kit generates, and the fake CUDA
guard built with the C++ standard the installed torch needs (or the reason it was not)."""

import subprocess
import zipfile

import pytest
import torch

from autograder.harness import fake_cuda
from autograder.publish.gradescope import CPU_INDEX, gradescope_zip
from autograder.publish.student_readme import student_readme
from autograder.publish.student_release import requirements_text


@pytest.mark.parametrize(
    "version,standard",
    [
        ("2.3.0", "c++17"),
        ("2.13.0", "c++17"),
        ("2.13.1+cpu", "c++17"),
        ("2.14.0", "c++20"),
        ("2.14.1+cu130", "c++20"),
        ("2.15.0.dev20260301+cpu", "c++20"),
        ("3.0.0", "c++20"),
    ],
)
def test_the_cxx_standard_follows_the_torch_version(version, standard):
    assert fake_cuda.cxx_standard(version) == standard


def fake_compiler(monkeypatch, error=None):
    """Run build_guard without compiling: record the command; fail like the compiler if asked."""
    commands = []

    def run(command, **kwargs):
        commands.append(command)
        if error:
            raise subprocess.CalledProcessError(1, command, output=b"", stderr=error.encode())
        open(command[command.index("-o") + 1], "wb").close()

    monkeypatch.setattr(fake_cuda, "compiler", lambda: "/usr/bin/c++")
    monkeypatch.setattr(fake_cuda.subprocess, "run", run)
    monkeypatch.setattr(fake_cuda, "_state", {})
    return commands


@pytest.mark.parametrize("version,flag", [("2.13.0", "-std=c++17"), ("2.14.1+cu130", "-std=c++20")])
def test_the_guard_is_built_with_that_standard(tmp_path, monkeypatch, version, flag):
    commands = fake_compiler(monkeypatch)
    monkeypatch.setattr(torch, "__version__", version)
    assert fake_cuda.build_guard(tmp_path / "guard.so")
    assert flag in commands[0]


def test_a_failed_build_keeps_the_compilers_reason(tmp_path, monkeypatch):
    fake_compiler(monkeypatch, error="c10/util/Foo.h:12: error: 'requires' does not name a type")
    assert not fake_cuda.build_guard(tmp_path / "guard.so")
    assert "'requires' does not name a type" in fake_cuda.build_error()
    assert "no C++ compiler" not in fake_cuda.build_error()


def test_the_student_requirements_take_torch_from_the_cpu_index():
    lines = [line for line in requirements_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == f"--extra-index-url {CPU_INDEX}" and CPU_INDEX.endswith("/whl/cpu")
    assert any(line.startswith("torch") for line in lines)
    from autograder.engine.course import config as grading_config

    readme = student_readme(grading_config.load_all())
    assert CPU_INDEX in readme and "CUDA build" in readme  # and how to get one instead


def test_gradescope_setup_installs_cpu_torch(tmp_path):
    with zipfile.ZipFile(gradescope_zip(tmp_path / "autograder.zip")) as archive:
        setup = archive.read("setup.sh").decode()
    assert f"--index-url {CPU_INDEX}" in setup and "{" not in setup
