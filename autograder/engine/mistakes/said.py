"""A finding in the student's language (English, Korean): the stage and what happened there,
the line of their code that made the value, and the probe (and call) that shows it, the
smallest input that does. The stages, operations, probes and calls are the assignment's own
words (`stage.<assignment>.<name>`, ...); the relations are the engine's (`localised.*`)."""

from autograder.engine.checks import messages
from autograder.engine.mistakes.evidence import LOCALISED
from autograder.engine.mistakes.scenario import Finding, Scenario


def diagnosis_id(finding: Finding) -> str:
    """The diagnosis id of a finding: localised.<stage>.<family>[.<unit>] (what the class report
    counts); where the code raised, the relation its values already showed, else `raised`."""
    if finding.family is None and finding.raised and dict(finding.raised).get("outside"):
        return f"{LOCALISED}{finding.stage}.kept_from_before"  # the call raised on state kept from before
    if finding.family is None:
        return f"{LOCALISED}{finding.stage}" + (".raised" if finding.raised else "")
    unit = dict(finding.params).get("unit")
    return f"{LOCALISED}{finding.stage}.{finding.family}" + (f".{unit}" if unit else "")


# The words of the relations whose ids are chosen at run time: each id written out once, here.
CHANGES = {
    "left_out": "localised.change.left_out",
    "inverted": "localised.change.inverted",
    "transposed": "localised.change.transposed",
}
MAPS = {
    "all": "localised.map.all",
    "reversed": "localised.map.reversed",
    "rolled": "localised.map.rolled",
    "tiled": "localised.map.tiled",
    "permuted": "localised.map.permuted",
    "from": "localised.map.from",
}
KEPT = {"start": "localised.kept.start", "end": "localised.kept.end"}
PLAIN = {  # families said by their parameters alone
    "shape": "localised.shape",
    "bias": "localised.bias",
    "masked_only": "localised.masked_only",
    "unmasked_only": "localised.unmasked_only",
    "shift": "localised.shift",
    "softmax_axis": "localised.softmax_axis",
}


def say(finding: Finding, scenario: Scenario, lang=None) -> str:
    """The finding in the student's language: the stage and what happened there, where the code
    made it, and the probe that shows it (the smallest input that does)."""

    def term(prefix, name):  # an assignment's own words: its stages, operations, probes
        return messages.template_or(f"{prefix}.{scenario.assignment}.{name}", name, lang)

    common = {
        "stage": term("stage", finding.stage),
        "at": _at(finding, lang),
        "shows": _shows(finding, scenario, term, lang),
    }
    if finding.raised:
        raised = dict(finding.raised)
        cause = (
            messages.render("localised.cause", lang, odd=raised["odd"], wanted=raised["wanted"])
            if "odd" in raised
            else ""
        )
        if "outside" in raised:  # the likelier cause: state kept from before
            cause = messages.render("localised.outside", lang, shape=raised["outside"])
        op, shapes = raised.get("op") or "", raised.get("shapes") or ""
        shapes = "" if shapes == "-" else shapes  # "-": no tensor met there
        # what is known of the call that raised: its operation and the shapes that met there
        said_id = "localised.raised" if op and shapes else "localised.raised_in" if op else "localised.raised_plain"
        said = messages.render(said_id, lang, type=raised["type"], op=op, shapes=shapes, cause=cause, **common)
        if finding.family is not None:  # what the values already showed before the call that raised
            before = say(Finding(finding.stage, finding.call, finding.family, finding.params), scenario, lang)
            said += messages.render("localised.before_raising", lang, what=before)
        return said
    return _relation(finding.family, dict(finding.params), term, common, lang)


def _at(finding, lang) -> str:
    return messages.render("localised.at", lang, file=finding.at[0], line=finding.at[1]) if finding.at else ""


def _shows(finding, scenario, term, lang) -> str:
    """The probe that shows it, and its call where it has several (the cache empty or not)."""
    shows = messages.render("localised.shows", lang, scenario=term("scenario", scenario.words or "?"))
    if scenario.call_words and finding.call < len(scenario.call_words):
        said_id, said_params = scenario.call_words[finding.call]
        shows += messages.render("localised.in_call_said", lang, call=term("call", said_id).format(**said_params))
        if finding.call:
            shows += messages.render("localised.before_right", lang)
    elif finding.call:
        shows += messages.render("localised.in_call", lang, call=finding.call + 1)
    return shows


def _relation(family, params, term, common, lang) -> str:
    if family is None:
        return messages.render("localised.stage", lang, **common)
    if family == "skip":
        skipped = messages.render("localised.and", lang).join(term("skip", unit) for unit in params["unit"].split("+"))
        return messages.render("localised.skip", lang, skipped=skipped, **common)
    if family == "other_input" and params.get("label"):  # an alternative with words of its own
        return messages.render("localised.other", lang, said=term("other", params["label"]), **common)
    if family == "other_input":
        by, replaced = term("stage", params["by"]), term("stage", params["replaced"])
        return messages.render("localised.other_input", lang, by=by, replaced=replaced, **common)
    if family == "blocked":
        change = params["change"]
        if change.startswith("shift "):
            said = messages.render("localised.change.shift", lang, by=change.split(" ", 1)[1])
        elif change.startswith("from_other_"):
            said = messages.render("localised.change.from_other", lang, map=params.get("map", "?"))
        else:
            said = messages.template(CHANGES[change], lang)
        return messages.render("localised.blocked", lang, part=term("part", params["part"]), change=said, **common)
    if family == "factor":
        if params.get("name") and params.get("expected"):
            return messages.render("localised.scaled", lang, name=params["name"], expected=params["expected"], **common)
        c = f"{params['c']:g}" + (f" = {params['name']}" if params.get("name") else "")
        return messages.render("localised.factor", lang, c=c, **common)
    if family == "layout":
        key = "localised.layout_view" if params.get("view") else "localised.layout"
        swapped = params.get("swapped", "").split()
        if len(swapped) == 2 and "B" in swapped and any(a.startswith("L") for a in swapped):
            key = "localised.layout_batch_sequence"  # the one swap with a name of its own
        return messages.render(key, lang, order=params["order"], expected=params["expected"], **common)
    if family == "slice_map":
        mapping = params["map"]
        kind = mapping.split(" ", 1)[0].split("=", 1)[0]
        detail = mapping.split("=", 1)[-1].split(" ", 1)[-1]
        said = messages.render(MAPS[kind], lang, detail=detail)
        return messages.render("localised.slice_map", lang, axis=params["axis"], map=said, **common)
    if family == "length":
        key = "localised.length_fewer" if params.get("fewer") else "localised.length_more"
        kept = messages.template(KEPT[params["kept"]], lang)
        return messages.render(
            key, lang, axis=params["axis"], count=params["count"], of=params["of"], kept=kept, **common
        )
    return messages.render(PLAIN[family], lang, **{**params, **common})
