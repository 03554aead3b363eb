"""The doctor's probe: one small computation, in fresh forks of one process that never touched
CUDA, with the sandbox's layers added one at a time, as a worker adds them.

    python -m autograder.sandbox.probe [--gpu]     # one JSON line per set of layers

Each line: {"layers": [asked], "in_force": [applied], "ok": bool, "error": raw error, ...}. The
computation is a forward and a backward pass of a small layer (on the GPU with --gpu, CUDA
initialised in the fork before its confinement, as a worker does), and reading the sealed
scratch; with seccomp it also says whether a thread and a file write were refused.
"""

import json
import os
import shutil
import signal
import sys
import tempfile
import threading

from autograder.sandbox import confine
from autograder.sandbox.fork_server import claim_uid_block

PROBE_UID_SLOT = confine.UID_BLOCK - 1  # the doctor's forks use the last uid of the block it claims


def probe(layers, facts, gpu, scratch, identity):
    """In a fresh fork: apply `layers` as a worker would, then compute; what happened, as data."""
    seen = {"in_force": []}
    try:
        if "own-uid" in layers and identity and confine.become_worker_user(*identity):
            seen["in_force"].append("own-uid")
        private = "private-scratch" in layers and confine.private_scratch(scratch, 1 << 20)
        if private:
            seen["in_force"].append("private-scratch")
        os.chdir(scratch)
        with open("probe.py", "w") as f:
            f.write("VALUE = 1\n")
        confine.seal(scratch)
        plan = confine.confinement_plan(
            facts,
            scratch=scratch,
            memory_bytes=2 << 30,
            output_bytes=8 << 20,
            cpu=min(os.sched_getaffinity(0)),
            cuda_device="0" if gpu else None,
            own_accounting=private or "own-uid" in seen["in_force"],
        )
        if plan.gpu:
            seen["cuda"] = confine.initialise_cuda(plan)
        os.environ.clear()
        os.environ.update(plan.env)
        seen["in_force"] += confine.apply(plan, only=set(layers))
        import torch

        device = "cuda" if plan.gpu else "cpu"
        x = torch.randn(4, 8, device=device, requires_grad=True)
        layer = torch.nn.Linear(8, 8).to(device)
        layer(x).softmax(-1).square().sum().backward()
        seen["device"] = str(x.grad.device)
        with open(os.path.join(scratch, "probe.py")) as f:
            f.read()
        seen["threads_refused"] = _refused(lambda: threading.Thread(target=lambda: None).start())
        elsewhere = os.path.join(tempfile.gettempdir(), f"mha-lab-probe-{os.getpid()}")
        seen["writes_refused"] = _refused(lambda: open(elsewhere, "w").close())
        if not seen["writes_refused"]:
            os.unlink(elsewhere)
        seen["ok"] = True
    except BaseException as error:  # noqa: BLE001 - the doctor shows the raw error
        seen["ok"], seen["error"] = False, f"{type(error).__name__}: {error}"
    return seen


def _refused(action):
    try:
        action()
    except (OSError, RuntimeError):
        return True
    return False


def steps(facts):
    """The sets of layers to try: none, then each layer added in the order a worker adds them."""
    layers = [layer for layer in confine.LAYERS if layer != "own-uid" or facts.root]
    return [tuple(layers[:count]) for count in range(len(layers) + 1)]


def main(argv) -> int:
    gpu = "--gpu" in argv
    import torch  # imported once here, as the worker server does; never CUDA

    torch.set_num_threads(1)
    facts = confine.machine_facts()
    claim = None
    if facts.root:
        claim = claim_uid_block()
    identity = (claim[1] + PROBE_UID_SLOT,) * 2 if claim else None
    for layers in steps(facts):
        scratch = tempfile.mkdtemp(prefix="mha-lab-probe-")
        if identity:
            os.chown(scratch, *identity)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            with os.fdopen(write, "w") as out:
                out.write(json.dumps(probe(layers, facts, gpu, scratch, identity)))
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        try:
            seen = json.loads(text)
        except ValueError:
            code = os.waitstatus_to_exitcode(status)
            name = signal.Signals(-code).name if code < 0 else f"exit code {code}"
            seen = {"ok": False, "in_force": [], "error": f"the probe died ({name})"}
        _remove(scratch)
        print(json.dumps({"layers": list(layers), **seen}), flush=True)
    return 0


def _remove(path):
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
    os.chmod(path, 0o700)
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
