"""The confinement as a plan (issue 25): with faked machine facts (device files, a CUDA build),
what a GPU worker's and a CPU worker's confinement contains, what the worker server's bubblewrap
binds, how GPUs are handed out; then the plan applied on this machine (seccomp alone, Landlock
alone), and a tripwire: the worker server touches no CUDA entry point before it forks when a GPU
is present. No GPU is needed: these keep the GPU path honest in CPU-only CI."""

import dataclasses
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from autograder.sandbox import confine, fork_server, wire, worker
from conftest import KIT

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux sandbox")

GPU_NODES = (
    "/dev/nvidia-caps/nvidia-cap1",
    "/dev/nvidia0",
    "/dev/nvidia1",
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
)
GPU_MACHINE = confine.MachineFacts(
    device_nodes=GPU_NODES,
    cuda_build=True,
    landlock_abi=5,
    seccomp=True,
    root=True,
    driver_library="/usr/local/nvidia/lib64/libcuda.so.1",
    gpu_env=(("LD_LIBRARY_PATH", "/opt/cuda/lib64"), ("NVIDIA_VISIBLE_DEVICES", "all")),
)
CPU_MACHINE = confine.MachineFacts(landlock_abi=5, seccomp=True, root=True)


def plan_for(facts, **options):
    defaults = dict(scratch="/scratch/7", memory_bytes=2 << 30, output_bytes=8 << 20, pid=4242)
    return confine.confinement_plan(facts, **{**defaults, **options})


def rules(plan, name):
    return [rule for rule in plan.seccomp if rule.name == name]


def access(plan, path):
    return set().union(*[rule.access for rule in plan.landlock if rule.path == path])


def writable(plan):
    return sorted(rule.path for rule in plan.landlock if rule.access & {"write_file", "truncate"})


# ---------------------------------------------------------------------------- the GPU profile


def test_a_gpu_worker_plan_holds_what_the_driver_needs():
    plan = plan_for(GPU_MACHINE, cuda_device="1", own_accounting=True)
    assert plan.gpu and plan.threads and plan.cuda_device == "1"
    # seccomp: threads, memfds, any ioctl, device files opened read-write but nothing created
    assert [r.action for r in rules(plan, "memfd_create")] == ["allow"]
    assert [(r.action, r.masked) for r in rules(plan, "ioctl")] == [("allow", ())]
    assert [(r.action, r.masked) for r in rules(plan, "clone")] == [
        ("allow", ((0, confine.CLONE_THREAD, confine.CLONE_THREAD),))
    ]
    for call, index in (("open", 1), ("openat", 2)):
        [rule] = rules(plan, call)
        (arg, mask, value), *_ = rule.masked
        assert (arg, value) == (index, 0) and mask & os.O_CREAT and mask & os.O_TRUNC and not mask & os.O_RDWR
    assert all(rule.why for rule in plan.seccomp if rule.name in ("memfd_create", "ioctl", "clone", "ftruncate"))
    # Landlock: the device files (the lazily created ones too) read-write with ioctls, what the
    # driver reads, its threads' names; the scratch read-only
    for node in ("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"):
        assert access(plan, node) == {"read_file", "write_file", "ioctl_dev"}, node
    assert access(plan, "/proc/driver/nvidia") >= {"read_file", "read_dir"}
    assert access(plan, "/sys") >= {"read_file", "read_dir"}
    assert "write_file" in access(plan, "/proc/4242/task")  # comm
    assert access(plan, "/scratch/7") == {"execute", "read_file", "read_dir"}
    assert writable(plan) == sorted([*(n for n in GPU_NODES if "caps" not in n), "/proc/4242/task"])
    # environment: one GPU, the driver's library path, nothing that writes a cache
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "1"
    assert plan.env["LD_LIBRARY_PATH"] == "/opt/cuda/lib64" and plan.env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert plan.env["CUDA_CACHE_DISABLE"] == "1" and plan.env["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1"
    assert plan.env["HOME"] == "/scratch/7"
    # limits: the address space is measured after CUDA's initialisation (not a fixed figure),
    # the GPU memory capped, tasks bounded where they are counted per worker
    assert "AS" not in plan.rlimits and plan.memory_bytes == 2 << 30 and plan.gpu_memory_bytes == 2 << 30
    assert plan.rlimits["NPROC"] == confine.TASKS and plan.rlimits["FSIZE"] == 8 << 20
    assert plan.rlimits["NOFILE"] >= 256


def test_a_gpu_worker_sharing_its_uid_gets_no_task_limit():
    """RLIMIT_NPROC counts every task of the uid: shared with neighbours (and the user), it
    would starve the driver's threads."""
    assert "NPROC" not in plan_for(GPU_MACHINE, cuda_device="0", own_accounting=False).rlimits


def test_a_cpu_worker_plan_refuses_threads_writes_and_memfds():
    for facts, device in ((CPU_MACHINE, None), (GPU_MACHINE, None), (CPU_MACHINE, "0")):
        plan = plan_for(facts, cuda_device=device)
        assert not plan.gpu and not plan.threads and plan.cuda_device is None, (facts, device)
        assert [r.action for r in rules(plan, "clone")] == ["EPERM"]
        assert [r.action for r in rules(plan, "clone3")] == ["ENOSYS"]
        assert [r.action for r in rules(plan, "openat2")] == ["ENOSYS"]
        assert rules(plan, "memfd_create") == []
        for call, index in (("open", 1), ("openat", 2)):
            assert [r.masked for r in rules(plan, call)] == [((index, confine.WRITE_FLAGS, 0),)]
        for name in ("mkdir", "mkdirat", "unlink", "unlinkat", "rename", "renameat2", "truncate", "ftruncate"):
            assert rules(plan, name) == [], name
        assert all(r.masked for r in rules(plan, "ioctl"))
        assert writable(plan) == []
        assert access(plan, "/scratch/7") == {"execute", "read_file", "read_dir"}
        assert "CUDA_VISIBLE_DEVICES" not in plan.env and "LD_LIBRARY_PATH" not in plan.env
        assert plan.rlimits["NPROC"] == confine.TASKS and plan.rlimits["NOFILE"] == confine.OUTPUT_FILES


def test_the_write_flags_cover_every_way_to_write_or_create():
    for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC, os.O_APPEND, os.O_TMPFILE & ~os.O_DIRECTORY):
        assert confine.WRITE_FLAGS & flag
    assert not confine.WRITE_FLAGS & (os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_PATH | os.O_NONBLOCK)


# ---------------------------------------------------------------------------- the worker server


def test_the_server_binds_the_gpu_device_files_those_made_on_first_use_included():
    facts = dataclasses.replace(GPU_MACHINE, device_nodes=("/dev/nvidia0", "/dev/nvidiactl"))  # no nvidia-uvm yet
    plan = confine.server_plan(facts)
    assert plan.real_gpu
    assert {"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"} <= set(plan.device_binds)
    assert "/dev/nvidia-caps" in plan.device_binds
    assert {"/sys", "/opt/cuda/lib64", "/usr/local/nvidia/lib64"} <= set(plan.read_only_binds)
    assert plan.env["PYTORCH_NVML_BASED_CUDA_CHECK"] == "1" and plan.env["LD_LIBRARY_PATH"] == "/opt/cuda/lib64"
    no_gpu = confine.server_plan(CPU_MACHINE)
    assert (no_gpu.device_binds, no_gpu.read_only_binds, no_gpu.real_gpu) == ((), (), False)


@pytest.mark.skipif(fork_server.shutil.which("bwrap") is None, reason="no bubblewrap")
def test_bubblewrap_binds_what_the_server_plan_says(monkeypatch):
    monkeypatch.delenv("MHA_LAB_NO_BWRAP", raising=False)
    monkeypatch.setattr(confine, "machine_facts", lambda: GPU_MACHINE)
    command = fork_server.bubblewrap_command(sys.executable)
    pairs = list(zip(command, command[1:], strict=False))
    assert ("--dev-bind-try", "/dev/nvidia-uvm") in pairs and ("--dev-bind-try", "/dev/nvidia1") in pairs
    assert ("--ro-bind-try", "/sys") in pairs and ("--ro-bind-try", "/opt/cuda/lib64") in pairs
    assert command.index("--dev") < command.index("--dev-bind-try")  # after /dev is made, or hidden by it


def test_gpus_are_handed_out_one_per_worker_round_robin(monkeypatch):
    four = dataclasses.replace(GPU_MACHINE, device_nodes=(*GPU_NODES, "/dev/nvidia2", "/dev/nvidia3"))
    assert confine.gpu_ordinals(four) == ["0", "1", "2", "3"]
    given = dataclasses.replace(GPU_MACHINE, gpu_env=(("CUDA_VISIBLE_DEVICES", "GPU-a1, 3"),))
    assert confine.gpu_ordinals(given) == ["GPU-a1", "3"]
    assert confine.gpu_ordinals(CPU_MACHINE) == []

    sent = []

    class Conn:
        def send_bytes(self, data):
            sent.append(wire.loads(data))

        def close(self):
            pass

    class Process:
        def is_alive(self):
            return True

        def kill(self):
            pass

    monkeypatch.setattr(worker, "machine_facts", lambda: GPU_MACHINE)
    monkeypatch.setattr(worker, "take_worker", lambda preload: (Process(), Conn(), os.memfd_create("t")))
    handles = [worker.Worker({"a.py": b""}, "p", "x") for _ in range(3)]
    for handle in handles:
        handle.__enter__()
    assert [setup["gpu"] for setup in sent] == ["0", "1", "0"]
    for handle in handles:
        handle.close()
    cpu_only = worker.Worker({"a.py": b""}, "p", "x", gpu=False)
    cpu_only.__enter__()
    cpu_only.close()
    assert sent[-1]["gpu"] is None


# ---------------------------------------------------------------------------- applied here


def run_confined(code, timeout=120):
    """`code` in a fresh interpreter started from the kit; its stdout's last line as JSON."""
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=KIT, capture_output=True, text=True, timeout=timeout
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


PROBE = """
    import errno, json, os, tempfile, threading, dataclasses
    from autograder.sandbox import confine
    scratch = tempfile.mkdtemp()
    existing = os.path.join(scratch, "existing")
    open(existing, "w").close()
    facts = confine.machine_facts()
    if {gpu!r}:
        facts = dataclasses.replace(facts, device_nodes=("/dev/nvidia0",), cuda_build=True)
    plan = confine.confinement_plan(facts, scratch=scratch, memory_bytes=1 << 30, output_bytes=1 << 20,
                                    cuda_device="0" if {gpu!r} else None)
    layers = confine.apply(plan, only={only!r})
    seen = {{"layers": layers}}
    def attempt(name, action):
        try:
            action()
            seen[name] = "ok"
        except (OSError, RuntimeError) as error:
            seen[name] = type(error).__name__ + ": " + str(error)
    attempt("thread", lambda: threading.Thread(target=lambda: None).start())
    attempt("memfd", lambda: os.memfd_create("probe"))
    attempt("create", lambda: open(os.path.join(scratch, "new"), "w"))
    attempt("create_elsewhere", lambda: open(os.path.join(tempfile.gettempdir(), "mha-probe-%d" % os.getpid()), "w"))
    attempt("open_rdwr", lambda: os.close(os.open(existing, os.O_RDWR)))
    attempt("mkdir", lambda: os.mkdir(os.path.join(scratch, "d")))
    attempt("unlink", lambda: os.unlink(existing))
    attempt("read", lambda: open(existing).read())
    attempt("stdout", lambda: os.write(1, b""))
    print(json.dumps(seen))
"""


def test_seccomp_alone_refuses_threads_and_every_write_on_a_cpu_worker():
    seen = run_confined(PROBE.format(gpu=False, only=["seccomp"]))
    assert seen["layers"] == ["seccomp"]
    assert seen["thread"] == "RuntimeError: can't start new thread"
    for name in ("memfd", "create", "create_elsewhere", "open_rdwr", "mkdir", "unlink"):
        assert seen[name].startswith("PermissionError"), (name, seen[name])
    assert seen["read"] == seen["stdout"] == "ok"


@pytest.mark.skipif(not confine.landlock_abi(), reason="no Landlock here")
def test_landlock_alone_makes_the_scratch_read_only():
    seen = run_confined(PROBE.format(gpu=False, only=["landlock"]))
    assert seen["layers"] == ["landlock"]
    for name in ("create", "create_elsewhere", "open_rdwr", "mkdir", "unlink"):
        assert seen[name].startswith("PermissionError"), (name, seen[name])
    assert seen["read"] == seen["thread"] == "ok"


def test_a_gpu_worker_keeps_threads_and_memfds_and_still_creates_nothing():
    seen = run_confined(PROBE.format(gpu=True, only=["seccomp"]))
    assert seen["thread"] == seen["memfd"] == seen["open_rdwr"] == seen["read"] == "ok"
    for name in ("create", "create_elsewhere", "mkdir", "unlink"):
        assert seen[name].startswith("PermissionError"), (name, seen[name])


def test_the_limits_hold_in_a_confined_worker():
    limits = run_confined(
        """
        import json, resource, tempfile
        from autograder.sandbox import confine
        plan = confine.confinement_plan(confine.machine_facts(), scratch=tempfile.mkdtemp(), memory_bytes=1 << 30,
                                        output_bytes=1 << 20)
        before = confine.mapped_bytes()
        confine.apply(plan, only={"rlimits"})
        names = ("AS", "FSIZE", "NOFILE", "NPROC", "CORE", "MEMLOCK")
        got = {name: resource.getrlimit(getattr(resource, "RLIMIT_" + name))[0] for name in names}
        got["before"] = before
        print(json.dumps(got))
        """
    )
    assert limits["FSIZE"] == 1 << 20 and limits["NOFILE"] == confine.OUTPUT_FILES
    assert limits["NPROC"] == confine.TASKS and limits["CORE"] == limits["MEMLOCK"] == 0
    assert limits["before"] + (1 << 30) <= limits["AS"] < limits["before"] + (1 << 30) + (64 << 20)


# ---------------------------------------------------------------------------- the tripwire

TRIPWIRE = """
    import dataclasses, json, sys
    import torch
    import torch.autograd.variable as variable
    calls = []
    def tripwire(name):
        def tripped(*args, **kwargs):
            calls.append(name)
            raise RuntimeError("tripwire: " + name)
        return tripped
    # CUDA's entry points, as a CUDA build has them: cuInit comes through one of these
    for owner, name in ((torch.cuda, "_lazy_init"), (torch.cuda, "init"), (torch._C, "_cuda_init"),
                        (torch._C, "_cuda_getDeviceCount")):
        setattr(owner, name, tripwire(owner.__name__ + "." + name))
    class Engine:  # a backward starts the autograd engine's device threads (one per GPU)
        def __getattr__(self, name):
            return tripwire("autograd engine." + name)
    variable.Variable._execution_engine = Engine()
    from autograder.sandbox import confine
    facts = getattr(confine, "machine_facts", None)  # (the code before the plan had no facts to fake)
    confine.machine_facts = lambda: dataclasses.replace(facts(), device_nodes=("/dev/nvidia0", "/dev/nvidiactl"),
                                                        cuda_build=True)
    confine.nvidia_device_nodes = lambda: ("/dev/nvidia0", "/dev/nvidiactl")
    from autograder.sandbox.fork_server import fork_server_main
    fork_server_main(int(sys.argv[1]), "autograder.harness.serve")
    print(json.dumps(calls))
"""


def test_the_worker_server_touches_no_cuda_before_it_forks_where_a_gpu_is_present():
    """The server, told a GPU is present (faked facts), imports and warms up its preload, says it
    is ready and stops when the judge goes: no CUDA entry point and no backward ran meanwhile
    (each would break CUDA, or every backward, in all its forks). On the code before this, the
    warm-up ran backward passes (the simulated device's set-up, the assignments' warm-ups)."""
    judge_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(TRIPWIRE), str(server_end.fileno())],
        cwd=KIT,
        pass_fds=[server_end.fileno()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "MHA_LAB_NO_BWRAP": "1",
            "PYTHONPATH": str(KIT),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        },
    )
    server_end.close()
    lines = []
    judge_end.settimeout(300)
    while not any(line.startswith(b"R") for line in lines):
        data = judge_end.recv(65536)
        if not data:
            break
        lines += data.splitlines()
    judge_end.close()
    stdout, stderr = process.communicate(timeout=60)
    assert any(line.startswith(b"R") for line in lines), stderr[-3000:]
    assert process.returncode == 0, stderr[-3000:]
    assert json.loads(stdout.strip().splitlines()[-1]) == [], "CUDA touched before fork"
    hygiene = json.loads(next(line for line in lines if line.startswith(b"S"))[1:])
    assert hygiene["real_gpu"] and hygiene["threads"] == 1 and not hygiene["cuda_initialised"]


def test_seccomp_holds_the_threads_started_before_the_confinement():
    """CUDA's driver starts threads at initialisation, before a GPU worker confines itself: the
    filter is synchronised to them (without, a filter holds only the thread that installs it)."""
    seen = run_confined(
        """
        import dataclasses, json, os, queue, tempfile, threading
        from autograder.sandbox import confine
        scratch = tempfile.mkdtemp()
        asked, told = queue.Queue(), queue.Queue()
        def driver_thread():  # started before the confinement, as the driver's are
            asked.get()
            try:
                open(os.path.join(scratch, "new"), "w")
                told.put("ok")
            except OSError as error:
                told.put(type(error).__name__)
        threading.Thread(target=driver_thread, daemon=True).start()
        facts = dataclasses.replace(confine.machine_facts(), device_nodes=("/dev/nvidia0",), cuda_build=True)
        plan = confine.confinement_plan(facts, scratch=scratch, memory_bytes=1 << 30, output_bytes=1 << 20,
                                        cuda_device="0")
        layers = confine.apply(plan, only={"seccomp"})
        asked.put(1)
        print(json.dumps({"layers": layers, "older_thread": told.get(timeout=60)}))
        """
    )
    assert seen == {"layers": ["seccomp"], "older_thread": "PermissionError"}
