"""`python -m autograder doctor`: is this machine ready to grade in the sandbox, GPU or not?

One line per layer, PASS / FAIL / SKIP with the reason, and a hint where something is missing:
the environment (torch and its CUDA build, driver, kernel, Landlock, bubblewrap, libseccomp,
user namespaces, cgroup v2); the GPU's device files and driver library; CUDA with no sandbox;
then the same probe with each sandbox layer added one at a time (autograder/sandbox/probe.py),
the raw error where one fails; the worker server's fork hygiene; finally the reference graded in
the sandbox, compared with the in-process grade. Without a GPU it says so and checks the
simulated device the cuda step then uses. Exits 1 if anything FAILs. SKIP is a layer this
platform does not offer: grading works without it (docs/security-model.md).
"""

import json
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass

from autograder import KIT
from autograder.engine.course import config as grading_config
from autograder.sandbox import confine
from autograder.sandbox.fork_server import ServerError, WorkerServer


@dataclass
class Line:
    """One line of the doctor's report."""

    verdict: str
    """PASS, FAIL, SKIP, or WARN (grading works, but not as it should: the exit code stays 0)."""
    name: str
    """What was checked."""
    reason: str
    """What was found."""
    hint: str = ""
    """What to do about it (FAIL and SKIP)."""

    def __str__(self):
        text = f"{self.verdict:<5} {self.name:<24} {self.reason}"
        return text + (f"\n      hint: {self.hint}" if self.hint and self.verdict != "PASS" else "")


def exit_code(lines) -> int:
    """1 if any line FAILed, else 0."""
    return 1 if any(line.verdict == "FAIL" for line in lines) else 0


def run(args) -> int:
    lines = []

    def say(*parts):
        line = Line(*parts)
        lines.append(line)
        print(line, flush=True)

    print("mha-lab doctor: is this machine ready to grade in the sandbox?\n")
    facts = environment(say)
    gpu = facts.real_gpu
    gpu_files(facts, say)
    simulated(gpu, say)
    layers = sandbox_layers(gpu, say)
    server = fork_hygiene(say)
    course_secret(say)
    reference(say)
    in_force = [*server, *layers["in_force"]]
    # as root the kit is closed to the workers' uids (sandbox/kit_view.py); as a normal user with
    # neither namespaces nor Landlock, a worker reads what that user reads (docs/security-model.md)
    wanted = ["bubblewrap", *(["uid-drop", "closed-kit"] if facts.root else []), *layers["wanted"]]
    missing = [name for name in wanted if name not in in_force]
    print(f"\nlayers in force here: {', '.join(in_force) or 'none'}")
    if missing:
        print(f"not on this platform: {', '.join(missing)} (see the SKIP lines)")
    print("the cuda step runs on " + ("the real GPU" if gpu else "a simulated CUDA device here (no GPU)"))
    return exit_code(lines)


# ---------------------------------------------------------------------------- environment


def environment(say):

    import torch

    facts = confine.machine_facts()
    build = f"CUDA {torch.version.cuda} build" if torch.version.cuda else "CPU-only build"
    say("PASS", "python and torch", f"Python {platform.python_version()}, torch {torch.__version__} ({build})")
    say(
        "PASS",
        "kernel",
        f"Linux {facts.kernel} ({platform.machine()}), running as {'root' if facts.root else 'a user'}",
    )
    if facts.landlock_abi:
        say("PASS", "landlock", f"ABI {facts.landlock_abi}")
    else:
        say("SKIP", "landlock", "the kernel offers no Landlock", "Linux 5.13+ with Landlock enabled (lsm=...,landlock)")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        say("SKIP", "bubblewrap", "not installed: the worker server runs without it", "apt-get install bubblewrap")
    else:
        command = [bwrap, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--unshare-ipc"]
        command += [] if facts.root else ["--unshare-user"]
        done = subprocess.run([*command, "true"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0:
            say("PASS", "bubblewrap", f"{bwrap} makes the server's namespaces")
        else:
            say(
                "SKIP",
                "bubblewrap",
                f"refused here: {done.stderr.strip()[:200]}",
                "namespaces are refused (a container's seccomp profile, AppArmor): the server runs without it",
            )
    if facts.seccomp:
        say("PASS", "libseccomp", f"{confine.SECCOMP.__name__} loads: the system-call allow-list is in force")
    else:
        say("FAIL", "libseccomp", "no libseccomp bindings", "pip install pyseccomp (and apt-get install libseccomp2)")
    userns = user_namespaces()
    if userns is None:
        say("PASS", "user namespaces", "allowed: each worker mounts a private scratch")
    else:
        say(
            "SKIP",
            "user namespaces",
            f"refused ({userns}): each worker's scratch is a sealed directory of its own",
            "Ubuntu 24.04: an AppArmor profile for python, or sysctl kernel.apparmor_restrict_unprivileged_userns=0",
        )
    if facts.cgroup_v2:
        say("PASS", "cgroup v2", "unified hierarchy (memory is bounded by limits measured per worker)")
    else:
        say("SKIP", "cgroup v2", "not the unified hierarchy: memory is bounded by RLIMIT_AS, measured per worker")
    return facts


def user_namespaces():
    """None if this process may make a user namespace, else the error."""
    code = (
        "import ctypes, os, sys\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "sys.exit(0 if libc.unshare(0x10000000) == 0 else os.strerror(ctypes.get_errno()))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else (done.stderr.strip() or "refused")


def gpu_files(facts, say):
    if not any(node.startswith("/dev/nvidia") for node in facts.device_nodes):
        say("SKIP", "gpu device files", "no /dev/nvidia*: no GPU here, the cuda step will be simulated")
        say("SKIP", "gpu driver library", "no GPU here")
        say("SKIP", "cuda (no sandbox)", "no GPU here: the cuda step will be simulated")
        return
    nodes = ", ".join(facts.device_nodes)
    if "/dev/nvidiactl" in facts.device_nodes and "/dev/nvidia-uvm" in facts.device_nodes:
        say("PASS", "gpu device files", nodes)
    else:
        say(
            "FAIL", "gpu device files", nodes, "run nvidia-modprobe -u -c=0 (makes /dev/nvidia-uvm), or load nvidia_uvm"
        )
    if facts.driver_library:
        say("PASS", "gpu driver library", f"{facts.driver_library}; {facts.driver_version or 'driver version unknown'}")
    else:
        say(
            "FAIL",
            "gpu driver library",
            "libcuda.so.1 not found",
            "install the NVIDIA driver's libraries, or set LD_LIBRARY_PATH",
        )
    if not facts.cuda_build:
        say(
            "FAIL",
            "cuda (no sandbox)",
            "torch is a CPU-only build on a machine with a GPU",
            "install a CUDA build of torch",
        )


def simulated(gpu, say):
    if gpu:
        say("SKIP", "simulated cuda", "a real GPU grades the cuda step")
        return
    from autograder.harness.fake_cuda import build_error, simulated_device  # late: keeps torch out until it runs

    device = simulated_device()
    if device == "cuda":
        say("PASS", "simulated cuda", "the cuda step will be simulated: fake tensors on a fake cuda:0")
    else:
        say(
            "PASS",
            "simulated cuda",
            "the cuda step will be simulated on 'meta' (a few device mistakes go unseen)",
            f"a C++ compiler builds the fake CUDA guard: {build_error() or 'python -m autograder.harness.fake_cuda'}",
        )


# ---------------------------------------------------------------------------- the sandbox, layer by layer


def sandbox_layers(gpu, say):
    """The probe with each layer added in turn; returns the layers wanted and those in force."""
    command = [sys.executable, "-m", "autograder.sandbox.probe", *(["--gpu"] if gpu else [])]
    done = subprocess.run(command, cwd=KIT, capture_output=True, text=True, timeout=600)
    results = []
    for text in done.stdout.splitlines():
        try:
            results.append(json.loads(text))
        except ValueError:
            continue
    if done.returncode != 0 or not results:
        say("FAIL", "sandbox probe", f"did not run: {done.stderr.strip()[-300:]}", "python -m autograder.sandbox.probe")
        return {"wanted": [], "in_force": []}
    return probe_lines(results, gpu, say)


def probe_lines(results, gpu, say):
    """The lines for the probe's results (the first with no layer, then one layer more each)."""
    where = "cuda" if gpu else "cpu"
    first, *rest = results
    name = "cuda (no sandbox)" if gpu else "probe (no sandbox)"
    if first["ok"]:
        extra = f", CUDA initialised in {first['cuda']['seconds']:.1f} s" if gpu and "cuda" in first else ""
        say("PASS", name, f"forward and backward on {first.get('device', where)}{extra}")
    else:
        say("FAIL", name, first["error"], "the computation fails before any sandbox layer: see the error")
    in_force = []
    for result in rest:
        layer = result["layers"][-1]
        if not result["ok"]:
            say("FAIL", f"layer +{layer}", result["error"], HINTS.get(layer, ""))
        elif layer not in result["in_force"]:
            say("SKIP", f"layer +{layer}", "not offered on this platform", HINTS.get(layer, ""))
        else:
            in_force.append(layer)
            refused = [what for what in ("threads", "writes") if result.get(f"{what}_refused")]
            said = f"; {' and '.join(refused)} refused" if refused else ""
            say("PASS", f"layer +{layer}", f"probe ok on {result.get('device', where)}{said}")
    return {"wanted": [r["layers"][-1] for r in rest], "in_force": in_force}


HINTS = {
    "own-uid": "run as root to give each worker a uid of its own",
    "private-scratch": "user namespaces are refused: scratch is a sealed directory of its own instead",
    "one-cpu": "sched_setaffinity is refused here",
    "landlock": "a kernel with Landlock (5.13+)",
    "seccomp": "apt-get install libseccomp2 and pip install pyseccomp",
}


def fork_hygiene(say):
    """The worker server's report on itself before its first fork; returns the server's layers."""
    from autograder.engine.judge.remote import PRELOAD  # late: keeps torch out until it runs

    server = WorkerServer.shared(PRELOAD)
    try:
        layers = server.wait_ready()
    except ServerError as error:
        say("FAIL", "fork hygiene", f"the worker server did not start: {error}", "python -m autograder grade")
        return []
    report = server.hygiene
    # CUDA initialised before a fork breaks every worker. The driver library merely mapped does not:
    # torch's CUDA 13 builds map libcuda.so on `import torch` (seen on an H100, torch 2.11+cu130).
    touched = report.get("cuda_initialised")
    if report.get("threads") == 1 and not touched:
        attempts = report.get("cuda_attempts") or []
        said = f"; the warm-up's CUDA calls were refused: {', '.join(attempts)}" if attempts else ""
        said += "; the driver library is mapped, not initialised" if report.get("driver_loaded") else ""
        say(
            "PASS",
            "fork hygiene",
            f"worker server ({', '.join(layers) or 'no server layers'}): one thread, CUDA untouched before fork{said}",
        )
    else:
        say(
            "FAIL",
            "fork hygiene",
            f"the worker server has {report.get('threads')} threads, CUDA {'touched' if touched else 'untouched'}",
            "nothing may start threads or CUDA in the server's warm-up (fork_server.py)",
        )
    return layers


# ---------------------------------------------------------------------------- the course secret


def course_secret(say):
    """Where the hidden checks' inputs come from on this machine: the course secret (PASS), none
    (WARN: a public checksum; `secret` or `release` makes one), one that cannot be read or whose
    file others may read (FAIL), grading.yml's `defaults.seed` (WARN: whoever reads it knows)."""
    from autograder.engine.course import secret  # late: keeps the doctor's first lines quick

    try:
        found = secret.read_secret()
    except secret.SecretError as error:
        say("FAIL", "course secret", str(error), "python -m autograder secret writes a good one (move this one away)")
        return
    exposed = secret.exposure() if found is not None and not secret.source().startswith("the environment") else ""
    if found is None:
        say(
            "WARN",
            "course secret",
            "none: the hidden checks' inputs are a checksum of the assignment id, the same in every course",
            "python -m autograder secret (release makes one too); copy it to every machine that grades",
        )
    elif exposed:
        say("FAIL", "course secret", f"{secret.source()} is not private: {exposed}", "chmod 600 it and 700 its folder")
    else:
        say("PASS", "course secret", f"{secret.source()}: the hidden checks' inputs are this course's alone")
    if any(config.seed is not None for config in grading_config.load_all()):
        say(
            "WARN",
            "hidden seed",
            "grading.yml sets defaults.seed: the hidden inputs come from it, not from the course secret",
            "remove defaults.seed from grading.yml (anyone who reads it can compute the hidden inputs)",
        )


# ---------------------------------------------------------------------------- the reference


def reference(say):
    from autograder.engine.judge.runner import grade  # late: keeps torch out until it runs

    solutions = KIT / "solutions"
    for config in grading_config.load_all():
        if not (solutions / config.package).is_dir():
            say("SKIP", f"reference {config.id}", f"no {config.package}/ in solutions/")
            continue
        sandboxed = grade(solutions, config, reference=solutions, seed=1, isolate=True)
        local = grade(solutions, config, reference=solutions, seed=1, isolate=False)
        differ = [
            f"{step.id}/{check.id}"
            for step, other in zip(sandboxed.steps, local.steps, strict=False)
            for check, mine in zip(step.checks, other.checks, strict=False)
            if (check.passed, check.points) != (mine.passed, mine.points)
        ]
        where = "; ".join(f"step {step.id} {step.mode.removeprefix('mode_')}" for step in sandboxed.steps if step.mode)
        score = f"{sandboxed.score:.2f} / {sandboxed.max_score:g} in the sandbox ({', '.join(sandboxed.sandbox)})"
        if differ or sandboxed.score != local.score or sandboxed.score < sandboxed.max_score:
            say(
                "FAIL",
                f"reference {config.id}",
                f"{score}, {local.score:.2f} in-process; differ: {', '.join(differ[:5])}",
                "grade the reference with --json and read the failing checks' messages",
            )
        else:
            say("PASS", f"reference {config.id}", f"{score}, the same in-process{'; ' + where if where else ''}")


if __name__ == "__main__":
    sys.exit(run(None))
