"""Grade many submissions on one machine: parallel sandboxed workers, results as they finish.

    results = grade_batch(paths, config, out=Path("grades"), workers=2, reference=..., seed=...)

Each submission gets its own worker process (autograder/sandbox/worker.py); `workers` of them run at
once. Every result is written to out/<id>.json as soon as it is ready (the id: submission_ids,
unique per path), after the code grading took of it (out/code/<id>.json, for the class report:
kept_code.py), each file atomically (result_files.write_atomically); at the end the gradebook
(gradebook.py: history, adjustments, late policy, grades.csv of the whole class); out/batch/manifest.json says what the run is and whether it completed
(shard.Manifest), and out/batch/lock keeps a second run out of the same directory.
A submission whose JSON is already in `out` is skipped (unless force=True), so an interrupted
batch picks up where it stopped. On a terminal a progress bar shows, otherwise one quiet line
per submission.
"""

import dataclasses
import hashlib
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from autograder.engine.judge import kept_code, result_files
from autograder.engine.judge.plan import warm_up_grader
from autograder.engine.judge.remote import PRELOAD
from autograder.engine.judge.result_files import load_result  # noqa: F401 - where callers found it first
from autograder.engine.judge.runner import grade
from autograder.engine.operations import gradebook, kit_files
from autograder.engine.operations.folder_lock import BatchBusy, hold  # noqa: F401 - BatchBusy: callers found it here
from autograder.engine.operations.shard import LOCK, Manifest, ShardError, in_shard, now, read_manifest, write_manifest
from autograder.engine.scan.forbidden import across_batch
from autograder.harness import phases
from autograder.sandbox.confine import SECCOMP, landlock_abi
from autograder.sandbox.fork_server import WorkerServer


def _safe(part):
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in part).strip(".") or "_"


def submission_ids(paths) -> list:
    """A unique, file-name-safe id per submission, derived from its path: its directory name,
    or, where names repeat, as many of its last path components as tell it apart (`x/alice` ->
    `x__alice`, `y/alice` -> `y__alice`); a short hash of the path where even that is not
    enough. The same path given twice is one submission with one id."""
    resolved = [Path(path).resolve() for path in paths]
    distinct = list(dict.fromkeys(resolved))
    parts = {path: [_safe(p) for p in path.parts[1:]] or ["submission"] for path in distinct}
    depth = dict.fromkeys(distinct, 1)

    def name(path):
        return "__".join(parts[path][-depth[path] :])

    while True:
        groups = {}
        for path in distinct:
            groups.setdefault(name(path), []).append(path)
        clashing = [
            path for group in groups.values() if len(group) > 1 for path in group if depth[path] < len(parts[path])
        ]
        if not clashing:
            break
        for path in clashing:
            depth[path] += 1
    ids, taken = {}, set()
    for path in distinct:
        candidate = name(path)
        if candidate in taken or sum(name(other) == candidate for other in distinct) > 1:
            candidate += "-" + hashlib.sha1(str(path).encode()).hexdigest()[:8]
        taken.add(candidate)
        ids[path] = candidate
    return [ids[path] for path in resolved]


class ServerLost(RuntimeError):
    """The worker server stopped (killed, say) while a submission was graded on it: what that
    submission's checks saw may be the server's end, not the student's code. Graded again."""


def grade_batch(
    paths,
    config,
    out,
    workers=None,
    reference=None,
    seed=None,
    force=False,
    isolate=True,
    memory_bytes=2 << 30,
    log=None,
    shard=None,
    pictures=None,
    command=None,
    class_list=None,
    omit_output=False,
    times=None,
):
    """Grade `paths` into `out`; returns {id: GradeResult} (submission_ids) in the order of `paths`, with None
    for a submission the grader itself failed on (a worker that would not start, say): it gets
    no JSON, so the next run grades it again, and an empty row in grades.csv.
    `shard` (K, N): grade only the submissions of shard K of N (autograder/engine/operations/shard.py); the ids are
    those of the whole list, so the shards merge into what one run gives.
    `pictures(id)`: the runner's `pictures` callable for submission `id` (--plots: the route saves
    each student's pictures in a folder of its own), or None; drawn one at a time.
    `command` (the words that run this batch again) and `class_list` (the frozen class list the
    paths came from) go into out/batch/manifest.json (shard.Manifest), written at the start and
    at the end; `omit_output` leaves what the student's code printed out of the JSONs. `times`
    {id: {"at", "source"}} (gradebook.read_times) or "git" (commit_times): for the late policy.
    A re-grade of some keeps the class whole (gradebook.apply) and each path's id.

    Every file is written atomically (result_files.write_atomically): a stop at any moment leaves
    whole files only, and a write that fails (a full disk) stops the batch with WriteError after
    the submissions in flight. One run at a time per `out` (a lock; BatchBusy otherwise). A
    submission whose worker server died while it was graded is graded again on a new server."""

    out = Path(out)
    try:
        out.mkdir(mode=0o700, parents=True, exist_ok=True)  # made here: the instructor's alone (seed, grades, code)
    except OSError as error:
        raise result_files.WriteError(out, error) from None
    lock = hold(out / LOCK)
    try:
        result_files.remove_stale_temporaries(out)
        result_files.remove_stale_temporaries(out / kept_code.FOLDER)
        known = gradebook.known_ids(out, paths)  # a re-grade keeps the id the class run gave
        names = [known.get(Path(path).resolve(), name) for path, name in zip(paths, submission_ids(paths), strict=True)]
        given = dict(zip(names, paths, strict=True))  # one submission per id (a path given twice is graded once)
        class_ids = list(given)
        if shard is not None:
            given = {name: path for name, path in given.items() if in_shard(name, shard)}
        try:
            previous = read_manifest(out)
        except ShardError:
            if not force:
                raise
            previous = None  # graded all again: what the broken manifest said is not needed
        if previous is not None and set(class_ids) <= set(previous.class_ids):
            class_ids = list(previous.class_ids)  # some of the class (a re-grade): the class stays whole
        elif previous is not None and not force:
            added = len(set(class_ids) - set(previous.class_ids))
            print(
                f"{out}: the class changed since its last run ({len(previous.class_ids)} -> {len(class_ids)} "
                f"submissions, {added} new): grading what this run owes and lacks",
                file=log or sys.stderr,
            )
        manifest = Manifest(
            assignment=getattr(config, "id", None),
            shard=tuple(shard) if shard else None,
            seed=seed,
            class_ids=class_ids,
            owed=list(given),
            command=list(command or []),
            cwd=os.getcwd(),
            class_list=None if class_list is None else str(Path(class_list).absolute()),
            started=now(),
        )
        gradebook.read_adjustments(out)  # one that does not read stops the run before any grading
        write_manifest(out, manifest)
        ordered, fresh = _grade_into(
            given, config, out, workers, reference, seed, force, isolate, memory_bytes, log, pictures, omit_output
        )
        if times == "git":
            times = gradebook.commit_times(given)
        settled = gradebook.apply(
            out, config, class_ids, paths={name: str(path) for name, path in given.items()}, times=times
        )
        gradebook.record_history(out, {name: settled[name] for name in fresh})
        ordered = {name: settled.get(name) if ordered[name] is not None else None for name in ordered}
        manifest.not_graded = [name for name, result in ordered.items() if result is None]
        manifest.complete = not manifest.not_graded
        manifest.finished = now()
        write_manifest(out, manifest)
        return ordered
    finally:
        os.close(lock)


def _grade_into(given, config, out, workers, reference, seed, force, isolate, memory_bytes, log, pictures, omit):
    """grade_batch's grading: ({id: GradeResult or None} for `given` ({id: path}), {id: GradeResult}
    of those graded now), each JSON stamped with this run's gradebook.run_stamp."""
    stamp = gradebook.run_stamp()
    # In-process grading loads each submission under its package name in this one interpreter:
    # two at once would mix their modules (and their scores). Only sandboxed grading runs in parallel.
    workers = (workers or os.cpu_count() or 1) if isolate else 1
    done, todo, fresh = {}, [], {}
    for name, path in given.items():
        target = out / f"{name}.json"
        if target.exists() and not force:
            try:
                done[name] = load_result(target)
                continue
            except (ValueError, KeyError, OSError):
                pass  # unreadable: grade it again
        todo.append((name, path))
    if reference is not None and todo:
        _warm_judge_simulation(config)
    progress = _progress(len(todo), log)
    warn_once = _isolation_warning(log) if isolate else (lambda result: None)

    drawing = threading.Lock()  # pictures are drawn in this process, from the grading threads

    def draw_for(name):
        save = pictures(name) if pictures is not None else None
        if save is None:
            return None

        def draw(step_id, records):
            with drawing:
                return save(step_id, records)

        return draw

    package = getattr(config, "package", None)
    manifests = kit_files.kept(package) if todo and package else {}  # the releases kept here, read once

    def run(name, path):
        server = _worker_server() if isolate else None
        result = grade(
            path,
            config,
            reference=reference,
            seed=seed,
            isolate=isolate,
            memory_bytes=memory_bytes,
            pictures=draw_for(name),
            keep_code=True,
        )
        if server is not None and server.stopped:
            raise ServerLost("the worker server stopped while it was graded")
        if package:  # a repository made from a release: what became of its kit files
            result.kit_files = kit_files.kit_files(path, package, manifests)
        return result

    def record(name, future):
        try:
            result = future.result()
        except Exception as error:  # noqa: BLE001 - the grader's failure, not the student's: no score
            progress(name, None, f"{type(error).__name__}: {error}")
            return
        if omit:
            result = dataclasses.replace(result, output="", hidden_output="")
        with phases.separately("writing results"):
            # The code it was graded from first, then the result that names its digest (kept_code.py).
            code = {"code": kept_code.write(out, name, result.code)} if result.code is not None else {}
            result = dataclasses.replace(result, code=None, graded=stamp)
            gradebook.keep_replaced(out, name)  # a re-grade: the JSON it replaces stays in out/history/
            result_files.write_json(result, out / f"{name}.json", extra=code)
        done[name] = fresh[name] = result
        warn_once(result)
        progress(name, result)

    def first_pass(pool, items):
        """Grade `items`; (ids to grade once more alone, ids whose server was lost)."""
        alone, lost = [], []
        futures = {pool.submit(run, name, path): name for name, path in items}
        try:
            for future in as_completed(futures):
                name = futures[future]
                error = future.exception()
                if isinstance(error, ServerLost):
                    lost.append(name)
                    continue
                if workers > 1 and error is None and timed_out(future.result()):
                    alone.append(name)
                    continue
                record(name, future)
        except result_files.WriteError:
            for future in futures:  # nothing more can be kept: stop once those in flight end
                future.cancel()
            raise
        return alone, lost

    with ThreadPoolExecutor(max_workers=workers) as pool, across_batch():  # each text scanned once
        again, lost = first_pass(pool, todo)
        if lost:  # on a new server (WorkerServer.shared starts one); a second loss is a failure
            print(
                f"the worker server stopped while {len(lost)} submission(s) were graded "
                f"({', '.join(sorted(lost))}): grading them again on a new one",
                file=log or sys.stderr,
                flush=True,
            )
            more, lost = first_pass(pool, [(name, given[name]) for name in lost])
            again += more
            for name in lost:
                progress(name, None, "ServerLost: the worker server stopped twice while it was graded")
    with ThreadPoolExecutor(max_workers=1) as pool, across_batch():
        for name in again:
            record(name, pool.submit(run, name, given[name]))
    return {name: done.get(name) for name in given}, fresh


def _worker_server():
    """The worker server the next sandboxed grading runs on (started, or restarted, if need be)."""

    return WorkerServer.shared(PRELOAD)


def isolation_gaps(layers: list) -> list:
    """The sandbox layers missing from `layers` (a result's `sandbox` list) that this machine
    could give, each with how to get it."""
    import shutil

    gaps = []
    if "uid-drop" not in layers:
        gaps.append(
            "uid-drop (not running as root: student code runs under your own uid; run as root for it)"
            if os.geteuid() != 0
            else "uid-drop (it failed as root)"
        )
    if "bubblewrap" not in layers:
        if os.environ.get("MHA_LAB_NO_BWRAP"):
            gaps.append("bubblewrap (MHA_LAB_NO_BWRAP is set)")
        elif shutil.which("bwrap") is None:
            gaps.append("bubblewrap (not installed: apt-get install bubblewrap)")
        else:
            gaps.append("bubblewrap (it could not start here: are user namespaces off for this user?)")
    if "seccomp" not in layers:
        gaps.append(
            "seccomp (libseccomp missing: apt-get install libseccomp2; pip install pyseccomp)"
            if SECCOMP is None
            else "seccomp (its filter did not load)"
        )
    if "landlock" not in layers and landlock_abi() > 0:
        gaps.append("landlock (the kernel has it, but it did not apply)")
    return gaps


def _isolation_warning(log):
    """A callback per graded result that warns once (on stderr) when its sandbox is weaker than this
    machine allows (isolation_gaps), from the first result whose code reached a worker (`sandbox`)."""
    warned = []
    lock = threading.Lock()

    def warn(result):
        with lock:
            if warned or not result.sandbox:  # no package: nothing ran, so it says nothing of the sandbox
                return
            warned.append(True)
        gaps = isolation_gaps(list(result.sandbox))
        if gaps:
            print(
                "warning: student code runs with weaker isolation than this machine can give; missing: "
                + "; ".join(gaps)
                + '. Each JSON\'s "sandbox" lists the layers in force.',
                file=log or sys.stderr,
                flush=True,
            )

    return warn


def timed_out(result):
    """Whether any check of `result` was stopped for time, or the submission's budget ran out (a
    busy neighbour may have caused it)."""
    return any(check.message_id in ("timeout", "budget_spent") for step in result.steps for check in step.checks)


def _warm_judge_simulation(config):
    """Diagnosing a failing step checked on the simulated CUDA device runs the known mistakes on
    that device here, in the judge. Setting it up takes seconds: start it now, in the background
    (while the fork server starts), not when the first such submission comes."""
    threading.Thread(target=warm_up_grader, args=([config],), daemon=True).start()


def _progress(total, log):
    """A callback per graded submission: a tqdm bar on a terminal, else one line each."""
    stream = log or sys.stderr
    if stream.isatty():
        try:
            from tqdm import tqdm

            bar = tqdm(total=total, unit="submission", file=stream)

            def update(name, result, error=None):
                if error:
                    bar.write(not_graded(name, error))
                else:
                    bar.set_postfix_str(f"{name}: {result.score:.1f}/{result.max_score:g}")
                bar.update(1)
                if bar.n == total:
                    bar.close()

            return update
        except ImportError:
            pass
    count = [0]

    def line(name, result, error=None):
        count[0] += 1
        text = not_graded(name, error) if error else f"{name}: {result.score:.2f}/{result.max_score:g}"
        print(f"[{count[0]}/{total}] {text}", file=stream, flush=True)

    return line


def not_graded(name, error):
    return f"{name}: NOT GRADED, the grader failed ({error[:200]}); run the batch again to retry it"
