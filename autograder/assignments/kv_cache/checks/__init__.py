"""The checks of the kv_cache assignment: one module per step, named by the step id.

A step module defines Check subclasses (autograder/engine/checks/check.py): public ones first, then the
hidden ones (after `# ### BEGIN HIDDEN CHECKS`), which compare against the reference solution
on inputs made at grading time, then probes (after `# ### PROBES`). FILES lists the student files
the step grades. Known mistakes live in ../mistakes/, apart, because they quote the reference.

The student's package is called `kv` in the observe halves: `kv.cache` imports kv_cache/cache.py
on first use. The decoding steps hand the student's functions the grader's own cache
(incremental_decoding.ScriptedCache, a stand-in that knows the sequence), so that a mistake in cache.py costs the step `kv_cache` only;
the `decoder` step, which integrates everything, also runs the student's own KVCache once.
"""
