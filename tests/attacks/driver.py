"""`python -m autograder grade ...` as an instructor runs it, with two test knobs.

    python tests/attacks/driver.py SPEC_JSON     # {"argv": [...], "no_static_scan": bool, "memory_bytes": int|None}

* no_static_scan: the judge's source scan for forbidden calls and tampering is turned off, so
  that hostile code is not refused before it runs and the sandbox alone must hold against it
  (a scan is a second line, and a scan can be evaded).
* memory_bytes: the workers' memory budget (the command line keeps the default), small so that a
  test of the memory limit does not have to take gigabytes from a shared machine.
* platform: grade as on a platform that refuses what this machine allows, with a seccomp
  filter over the whole grader (the judge, bubblewrap, the worker server, the workers inherit it):
  "userns-refused" (Ubuntu 24.04's AppArmor rule: no user namespace; bubblewrap still runs as
  root), "no-namespaces" (Docker's default profile, Gradescope: no namespace of any kind, and no
  Landlock either, so that seccomp holds alone).
"""

import functools
import json
import os
import sys

KIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


CLONE_NEW = {"NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000}
CLONE_NEW |= {"NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}


def refuse_like(platform: str) -> None:
    """Install the seccomp filter that makes this process (and all it starts) `platform`."""
    import errno

    import pyseccomp as seccomp

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    refused = seccomp.ERRNO(errno.EPERM)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")  # flags in a struct: libc falls back to clone
    flags = [CLONE_NEW["NEWUSER"]] if platform == "userns-refused" else list(CLONE_NEW.values())
    for flag in flags:
        rules.add_rule(refused, "unshare", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        rules.add_rule(refused, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    if platform == "no-namespaces":
        for name in ("setns", "mount"):
            rules.add_rule(refused, name)
        for name in ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"):
            rules.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    elif platform != "userns-refused":
        sys.exit(f"driver: unknown platform {platform!r}")
    rules.load()


def main() -> int:
    spec = json.loads(sys.argv[1])
    if spec.get("platform"):
        refuse_like(spec["platform"])
    sys.path.insert(0, KIT)
    if spec.get("no_static_scan"):
        from autograder.engine.judge import plan

        if not hasattr(plan, "forbidden_in_source"):
            sys.exit(
                "driver: autograder.engine.judge.plan.forbidden_in_source is gone: update tests/attacks/driver.py "
                "so that it turns off the judge's source scan"
            )
        plan.forbidden_in_source = lambda *args, **kwargs: None
    if spec.get("memory_bytes"):
        from autograder.engine.operations import batch

        batch.grade_batch = functools.partial(batch.grade_batch, memory_bytes=spec["memory_bytes"])
    from autograder.routes.cli import main as grade_main

    return grade_main(spec["argv"])


if __name__ == "__main__":
    sys.exit(main())
