"""Grade many submissions on one machine: parallel sandboxed workers, results as they finish.

    results = grade_batch(paths, config, out=Path("grades"), workers=2, reference=..., seed=...)

Each submission gets its own worker process (autograder/sandbox/worker.py); `workers` of them run at
once. Every result is written to out/<id>.json as soon as it is ready (the id: submission_ids,
unique per path), grades.csv at the end, one row per submission given.
A submission whose JSON is already in `out` is skipped (unless force=True), so an interrupted
batch picks up where it stopped. On a terminal a progress bar shows, otherwise one quiet line
per submission.
"""

import hashlib
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from autograder.engine import results as results_io
from autograder.engine.results import GradeResult, StepResult
from autograder.engine.runner import grade, warm_up_grader


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


def load_result(path):
    """A GradeResult read back from its JSON (for skipped submissions' CSV rows)."""
    data = json.loads(Path(path).read_text())
    steps = [
        StepResult(
            id=s["id"],
            title=s["title"],
            score=s["score"],
            max_score=s["max_score"],
            checks=[],
            status=s.get("status", "graded"),
            diagnoses=s.get("diagnoses", []),
        )
        for s in data["steps"]
    ]
    return GradeResult(
        assignment=data["assignment"],
        submission=data.get("submission", ""),
        steps=steps,
        seed=data.get("seed"),
        output=data.get("output", ""),
    )


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
):
    """Grade `paths` into `out`; returns {id: GradeResult} (submission_ids) in the order of `paths`, with None
    for a submission the grader itself failed on (a worker that would not start, say): it gets
    no JSON, so the next run grades it again, and an empty row in grades.csv.
    `shard` (K, N): grade only the submissions of shard K of N (autograder/shard.py); the ids are
    those of the whole list, so the shards merge into what one run gives.
    `pictures(id)`: the runner's `pictures` callable for submission `id` (--plots: the route saves
    each student's pictures in a folder of its own), or None; drawn one at a time."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    names = submission_ids(paths)
    given = dict(zip(names, paths))  # one submission per id (a path given twice is graded once)
    if shard is not None:
        from autograder.engine.shard import in_shard

        given = {name: path for name, path in given.items() if in_shard(name, shard)}
    # In-process grading loads each submission under its package name in this one interpreter:
    # two at once would mix their modules (and their scores). Only sandboxed grading runs in parallel.
    workers = (workers or os.cpu_count() or 1) if isolate else 1
    done, todo = {}, []
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

    drawing = threading.Lock()  # pictures are drawn in this process, from the grading threads

    def draw_for(name):
        save = pictures(name) if pictures is not None else None
        if save is None:
            return None

        def draw(step_id, records):
            with drawing:
                return save(step_id, records)

        return draw

    def run(name, path):
        return grade(
            path,
            config,
            reference=reference,
            seed=seed,
            isolate=isolate,
            memory_bytes=memory_bytes,
            pictures=draw_for(name),
        )

    def record(name, future):
        try:
            result = future.result()
        except Exception as error:  # noqa: BLE001 - the grader's failure, not the student's: no score
            progress(name, None, f"{type(error).__name__}: {error}")
            return
        results_io.write_json(result, out / f"{name}.json")
        done[name] = result
        progress(name, result)

    again = []  # timed out beside a neighbour: graded once more, alone, before it is charged
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(run, name, path): name for name, path in todo}
        for future in as_completed(futures):
            name = futures[future]
            if workers > 1 and future.exception() is None and timed_out(future.result()):
                again.append(name)
                continue
            record(name, future)
    with ThreadPoolExecutor(max_workers=1) as pool:
        for name in again:
            record(name, pool.submit(run, name, given[name]))
    ordered = {name: done.get(name) for name in given}
    results_io.write_csv(
        list(ordered.values()), list(ordered), out / "grades.csv", paths=[str(path) for path in given.values()]
    )
    return ordered


def timed_out(result):
    """Whether any check of `result` was stopped for time (a busy neighbour may have caused it)."""
    return any(check.message_id == "timeout" for step in result.steps for check in step.checks)


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
