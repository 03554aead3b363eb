"""What localisation compares (localise.py): the reference's stages on a probe's inputs, a
probe's scenario of calls, and a finding, each plain data that JSON holds (the store,
stages.json, ships them to students: values of fixed public inputs, no code).

    stage = Stage("scores", value, ("B", "H", "Lq", "Lk"), parents=("raw_scores",))
    Scenario.from_json(scenario.to_json())   # the same scenario
"""

import base64
from dataclasses import dataclass, field

import torch


@dataclass
class Stage:
    """One stage of the reference's computation on a probe's inputs."""

    name: str  # its name: the catalog says it as `stage.<name>`
    value: torch.Tensor
    axes: tuple  # a label per axis ("B", "H", "Lq", "d_k"); sizes come from the Scenario
    kind: str = "values"  # values | masked (scores with the mask applied) | weights | dropout | mask
    # (a blocked set itself) | input (what the probe gives the code: never where it leaves the reference)
    parents: tuple = ()  # the stages it is computed from
    splits: dict = field(default_factory=dict)  # label -> the labels it factors into (D -> H, d_k)
    tails: tuple = ()  # the last axes a representation must keep (a matmul's operands), any of these
    fixed: bool = False  # the contract fixes its layout (what the code returns)
    blocked: torch.Tensor = None  # masked, weights: where keys are blocked (bool, broadcasts to value)
    parts: dict = None  # the blocked set as a union of named parts ({"padding": ..., "causal": ...})
    source: torch.Tensor = None  # weights: what the softmax normalises
    axis: int = -1  # weights: the axis it normalises
    scale: tuple = None  # (the factor the reference applies here,): a student's factor is said beside it
    groups: dict = None  # axis label -> the size label of its repeated groups (GQA's kv heads)
    no_map: tuple = ()  # axes along which a slice map says nothing
    p: float = None  # dropout: its probability
    others: dict = None  # "<parent>=<other>" -> the value computed with another input in its place
    diagonals: dict = None  # part -> d where the part blocks key j of query i when j > i + d (causal)
    # Differences the rest of the computation does not see (found by trying them: cancelled.py):
    cancels: tuple = ()  # (axes,): a difference varying along these axes only is cancelled later
    moves: str = None  # the later stage whose factor a constant factor here is (the path is linear)

    def to_json(self) -> dict:
        data = {"name": self.name, "value": _tensor_json(self.value), "axes": list(self.axes), "kind": self.kind}
        for key in ("parents", "tails", "no_map"):
            if getattr(self, key):
                data[key] = [list(t) if isinstance(t, tuple) else t for t in getattr(self, key)]
        for key in ("splits", "groups", "diagonals"):
            if getattr(self, key):
                data[key] = {k: list(v) if isinstance(v, tuple) else v for k, v in getattr(self, key).items()}
        if self.cancels:
            data["cancels"] = [list(axes) for axes in self.cancels]
        for key in ("fixed", "axis", "p", "moves"):
            if getattr(self, key) not in (False, -1, None):
                data[key] = getattr(self, key)
        if self.scale:
            data["scale"] = list(self.scale)
        for key in ("blocked", "source"):
            if getattr(self, key) is not None:
                data[key] = _tensor_json(getattr(self, key))
        for key in ("parts", "others"):
            if getattr(self, key):
                data[key] = {k: _tensor_json(v) for k, v in getattr(self, key).items()}
        return data

    @classmethod
    def from_json(cls, data) -> "Stage":
        stage = cls(data["name"], _tensor(data["value"]), tuple(data["axes"]), data.get("kind", "values"))
        stage.parents = tuple(data.get("parents", ()))
        stage.tails = tuple(tuple(t) for t in data.get("tails", ()))
        stage.no_map = tuple(data.get("no_map", ()))
        stage.splits = {k: tuple(v) for k, v in data.get("splits", {}).items()}
        stage.groups = data.get("groups")
        stage.diagonals = data.get("diagonals")
        stage.fixed, stage.axis, stage.p = data.get("fixed", False), data.get("axis", -1), data.get("p")
        stage.cancels = tuple(tuple(axes) for axes in data.get("cancels", ()))
        stage.moves = data.get("moves")
        stage.scale = tuple(data["scale"]) if data.get("scale") else None
        stage.blocked = _tensor(data["blocked"]) if "blocked" in data else None
        stage.source = _tensor(data["source"]) if "source" in data else None
        stage.parts = {k: _tensor(v) for k, v in data["parts"].items()} if "parts" in data else None
        stage.others = {k: _tensor(v) for k, v in data["others"].items()} if "others" in data else None
        return stage


@dataclass
class Scenario:
    """The reference's stages on one probe's inputs: per call of the student's code, its stages in
    the order they are computed; the outputs of each call; and, per operation that can be left
    out (alone or with one other: "a+b"), the outputs of each call without it."""

    sizes: dict  # label -> size (every label the stages use, and sums such as L = L_past + L_new)
    calls: list  # [[Stage]]
    outputs: list  # [tensor] per call
    skips: dict = field(default_factory=dict)  # unit -> {"first": stage name, "outputs": [tensor]}
    words: str = None  # the scenario in the catalog (`scenario.<assignment>.<words>`): the smallest input that shows it
    assignment: str = None  # whose catalog says its stages, operations and calls (`stage.<assignment>.<name>`)
    call_sizes: list = None  # per call, sizes of its own ({"L_new": 2, "L_past": 3}): over `sizes`
    call_words: list = None  # per call, [catalog id, {params}]: what the call is (`call.<id>`)
    own: list = None  # the stages whose findings are the probe's step's to say (None: all)

    def sizes_of(self, call: int) -> dict:
        extra = self.call_sizes[call] if self.call_sizes and call < len(self.call_sizes) else {}
        return {**self.sizes, **extra}

    def to_json(self) -> dict:
        return {
            "sizes": self.sizes,
            "calls": [[stage.to_json() for stage in call] for call in self.calls],
            "outputs": [_tensor_json(t) for t in self.outputs],
            "skips": {
                unit: {"first": skip["first"], "outputs": [_tensor_json(t) for t in skip["outputs"]]}
                for unit, skip in self.skips.items()
            },
            **({"words": self.words} if self.words else {}),
            **({"assignment": self.assignment} if self.assignment else {}),
            **({"call_sizes": self.call_sizes} if self.call_sizes else {}),
            **({"call_words": self.call_words} if self.call_words else {}),
            **({"own": self.own} if self.own else {}),
        }

    @classmethod
    def from_json(cls, data) -> "Scenario":
        return cls(
            sizes=dict(data["sizes"]),
            calls=[[Stage.from_json(s) for s in call] for call in data["calls"]],
            outputs=[_tensor(t) for t in data["outputs"]],
            skips={
                unit: {"first": skip["first"], "outputs": [_tensor(t) for t in skip["outputs"]]}
                for unit, skip in data.get("skips", {}).items()
            },
            words=data.get("words"),
            assignment=data.get("assignment"),
            call_sizes=data.get("call_sizes"),
            call_words=data.get("call_words"),
            own=data.get("own"),
        )


@dataclass(frozen=True)
class Finding:
    """Where a probe's run first leaves the reference, and what happened there (plain data)."""

    stage: str  # the stage's name
    call: int  # which call of the probe's run (0: the first)
    family: str = None  # the relation's family (None: the stage only, nothing fits or two do)
    params: tuple = ()  # the relation's parameters, sorted (name, value) pairs
    raised: tuple = None  # where the code raised: sorted (name, value) pairs (type, op, shapes, ...)
    at: tuple = None  # (file, line) of the student's value there, where it was recorded
    also: tuple = ()  # the other families that fit there, less specific (a skipped transpose is a layout too)

    def key(self) -> tuple:
        """What two findings must share to name the same thing (the place in the code aside)."""
        return self.stage, self.call, self.family, self.params, self.raised and _without(self.raised, ("message", "at"))

    def to_json(self) -> dict:
        return {
            "stage": self.stage,
            "call": self.call,
            "family": self.family,
            "params": [list(p) for p in self.params],
            "raised": [list(p) for p in self.raised] if self.raised else None,
            **({"also": list(self.also)} if self.also else {}),
        }

    @classmethod
    def from_json(cls, data) -> "Finding":
        return cls(
            data["stage"],
            data["call"],
            data.get("family"),
            tuple((k, _plain(v)) for k, v in data.get("params", ())),
            tuple((k, _plain(v)) for k, v in data["raised"]) if data.get("raised") else None,
            also=tuple(data.get("also", ())),
        )


def _without(pairs, names):
    return tuple((k, v) for k, v in pairs if k not in names)


def _plain(value):
    return tuple(_plain(v) for v in value) if isinstance(value, list) else value


def _tensor_json(t) -> dict:
    """A tensor as JSON: its shape, dtype and bytes (base64). Floating values are kept as float32
    where they fit it (well within every tolerance: float64 results are allowed float32's
    rounding), else as float64."""
    t = t.detach().cpu().contiguous()
    stored = t
    if t.is_floating_point():
        finite = t[torch.isfinite(t)]
        fits = not finite.numel() or finite.abs().max().item() <= torch.finfo(torch.float32).max
        stored = t.to(torch.float32 if fits else torch.float64)
    elif t.dtype == torch.bool:
        stored = t.to(torch.uint8)
    data = base64.b64encode(stored.numpy().tobytes()).decode("ascii")
    return {
        "shape": list(t.shape),
        "dtype": str(t.dtype).removeprefix("torch."),
        "as": str(stored.dtype)[6:],
        "b64": data,
    }


def _tensor(data) -> torch.Tensor:
    raw = bytearray(base64.b64decode(data["b64"]))
    stored = torch.frombuffer(raw, dtype=getattr(torch, data["as"])) if raw else torch.zeros(0)
    return stored.to(getattr(torch, data["dtype"])).reshape(data["shape"])
