"""Calls a step may not use (grading.yml: a step's `forbidden` list), caught two ways.

* At run time: student code runs under a TorchFunctionMode that records every overridable
  torch function it calls; F.scaled_dot_product_attention, F.multi_head_attention_forward (what
  nn.MultiheadAttention runs) and pad_sequence all pass through it, however they were reached.
* In the source: an AST scan of the step's files for the forbidden names used through a torch
  import (`F.scaled_dot_product_attention`, `from torch.nn.utils.rnn import pad_sequence`, ...),
  as a second line for calls the run-time watch could miss.
"""
import ast
import functools
from contextlib import contextmanager

from torch.overrides import TorchFunctionMode

# What a forbidden module does at run time, for names that are not functions themselves.
RUNS_AS = {"MultiheadAttention": "multi_head_attention_forward"}


def short_name(dotted):
    return dotted.rsplit(".", 1)[-1]


class _CallWatcher(TorchFunctionMode):
    def __init__(self, watched):
        super().__init__()
        self.watched = watched  # run-time function name -> the forbidden name to report
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", None)
        if name in self.watched and self.watched[name] not in self.seen:
            self.seen.append(self.watched[name])
        return func(*args, **(kwargs or {}))


@contextmanager
def watching(forbidden):
    """Run the block recording forbidden calls; yields the list of names seen (filled in place)."""
    if not forbidden:
        yield []
        return
    watched = {}
    for dotted in forbidden:
        name = short_name(dotted)
        watched[RUNS_AS.get(name, name)] = dotted
    with _CallWatcher(watched) as watcher:
        yield watcher.seen


@functools.lru_cache(maxsize=16)
def nodes(source):
    """Every node of the AST of `source` (None on a syntax error), parsed and walked once: every
    step scans its files for forbidden calls and tampering, twice each, and attention.py belongs
    to two steps. Read-only to callers."""
    try:
        return tuple(ast.walk(ast.parse(source)))
    except (SyntaxError, ValueError):
        return None


def scan_source(source, forbidden):
    """[(forbidden dotted name, line)] for each use of a forbidden name through a torch import."""
    names = {short_name(dotted): dotted for dotted in forbidden}
    every_node = nodes(source)
    if every_node is None:
        return []
    torch_aliases, direct, hits = set(), {}, []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    torch_aliases.add(alias.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                if alias.name in names:  # `from torch... import pad_sequence [as ps]`
                    direct[alias.asname or alias.name] = names[alias.name]
                    hits.append((names[alias.name], node.lineno))
                else:  # a torch module or object, e.g. `from torch import nn`
                    torch_aliases.add(alias.asname or alias.name)
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr in names and _root(node) in torch_aliases:
            hits.append((names[node.attr], node.lineno))
        elif isinstance(node, ast.Name) and node.id in direct and isinstance(node.ctx, ast.Load):
            hits.append((direct[node.id], node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])


def _root(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


# ---------------------------------------------------------------------------- tampering

GRADER_REACH = {"autograder", "ctypes", "gc", "builtins", "importlib"}  # modules an MHA file has no use for


def scan_tampering(source):
    """[(what, line)] for code that reaches into the grader or rewrites torch: importing the
    grader (or ctypes, gc, builtins, importlib), touching sys.modules or __builtins__, assigning
    to an attribute of a torch module (`torch.allclose = ...`) or setattr on one. Such code gains
    nothing (judging runs in another process), but it is reported rather than ignored."""
    every_node = nodes(source)
    if every_node is None:
        return []
    torch_names = set()
    hits = []
    for node in every_node:
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root == "torch":
                    torch_names.add(alias.asname or "torch")
                if root in GRADER_REACH:
                    hits.append((f"import {alias.name}", node.lineno))
        elif isinstance(node, ast.ImportFrom):
            root = (node.module or "").split(".")[0]
            if root == "torch":
                torch_names.update(alias.asname or alias.name for alias in node.names)
            if root in GRADER_REACH:
                hits.append((f"from {node.module} import ...", node.lineno))
    for node in every_node:
        if isinstance(node, ast.Attribute) and node.attr == "modules" and _root(node) == "sys":
            hits.append(("sys.modules", node.lineno))
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            hits.append((node.id, node.lineno))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _root(target) in torch_names:
                    hits.append((f"assignment to {ast.unparse(target)}", node.lineno))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and _root(node.args[0]) in torch_names:
            hits.append(("setattr on a torch module", node.lineno))
    return sorted(set(hits), key=lambda hit: hit[1])
