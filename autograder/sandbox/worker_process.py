"""The worker process: what runs in a fork of the worker server, from the fork to the first
line of student code. The judge's side of a worker (Worker, its spares, its time limits) is in
worker.py; the server (fork_server.py) calls worker_main in each fork it makes.

A worker takes its own uid, sets up its private scratch, waits for its submission (a worker may
be forked before it is needed), writes and seals it, initialises CUDA where the judge planned a
real GPU, confines itself (confine.py), then hands its channel to the preload module's serve().
"""

import os
import sys
from multiprocessing.connection import Connection

from autograder.sandbox import wire
from autograder.sandbox.confine import (
    apply,
    become_worker_user,
    close_other_fds,
    confinement_plan,
    initialise_cuda,
    machine_facts,
    private_scratch,
    seal,
)

OUTPUT_LIMIT = 8 * 1024 * 1024  # bytes a worker may write (its printing included)
PACKAGE_BYTES = 16 << 20  # bytes of submitted files a worker writes to its scratch (the rest is left out)
PACKAGE_FILES = 256  # files of a submission a worker writes


def worker_main(channel_fd, output_fd, server_layers, scratch, serve, facts=None, identity=None):
    """Entry point of a worker process, forked by the worker server (fork_server.py) with two
    descriptors from the judge: its channel and its output file. Takes its own uid (`identity`,
    where the server has them), sets up a private scratch, waits for its submission (a worker
    may be forked before it is needed), writes and seals it, initialises CUDA where the judge
    planned a real GPU, confines itself (confine.py), then hands the channel to
    `serve(conn, scratch, setup)`, which answers the judge's messages."""
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.lseek(1, 0, os.SEEK_END)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    close_other_fds([channel_fd])
    conn = Connection(channel_fd)
    layers = list(server_layers)
    if identity is not None and become_worker_user(*identity):
        layers.append("own-uid")
    # The directory the server made for this worker becomes a private tmpfs where the kernel
    # allows it (seen by this process alone); else it stays a directory of its own, kept apart
    # by its owner (own-uid) or Landlock, and sealed like the tmpfs before student code runs.
    private = private_scratch(scratch, PACKAGE_BYTES)
    if private:
        layers.append("private-scratch")
    try:
        setup = wire.loads(conn.recv_bytes())
    except EOFError:
        return
    os.chdir(scratch)
    package = str(setup["package"])
    if not package.isidentifier():
        return
    os.mkdir(package, 0o700)
    budget = PACKAGE_BYTES
    for name, data in list(setup["files"].items())[:PACKAGE_FILES]:
        budget -= len(data)
        if budget < 0:
            break
        parts = name.split("/")
        if not all(part.isidentifier() for part in [*parts[:-1], parts[-1].removesuffix(".py")]):
            continue  # a file of a sub-package: each folder a Python name, never '..'
        for depth in range(1, len(parts)):
            os.makedirs(os.path.join(package, *parts[:depth]), 0o700, exist_ok=True)
        fd = os.open(os.path.join(package, *parts), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    seal(scratch)  # nothing is written in the worker from here on
    options = dict(
        scratch=scratch,
        memory_bytes=setup["memory_bytes"],
        output_bytes=OUTPUT_LIMIT,
        cpu=setup.get("cpu"),
        own_accounting=private or "own-uid" in layers,
    )
    plan = confinement_plan(facts or machine_facts(), cuda_device=setup.get("gpu"), **options)
    if plan.gpu:
        try:
            initialise_cuda(plan)
            layers.append("cuda")
        except Exception as error:  # noqa: BLE001 - the judge learns it from the layers; the output has why
            print(f"CUDA did not initialise in the worker: {type(error).__name__}: {error}", file=sys.stderr)
            plan = confinement_plan(facts or machine_facts(), cuda_device=None, **options)  # the CPU profile
    os.environ.clear()
    os.environ.update(plan.env)
    layers += apply(plan)
    conn.send_bytes(wire.dumps({"ready": layers}))
    serve(conn, scratch, setup)
