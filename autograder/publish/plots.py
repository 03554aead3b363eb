"""Pictures where they help (--plots): for a failing check that can show one (Check.picture),
the student's attention weights drawn next to the expected ones, saved as a PNG that the score
table points to. matplotlib is imported only when a picture is drawn: plain runs stay fast.

The labels speak the language of the messages (catalog ids `picture.*`, and the check's own
title). Korean needs a font with Hangul: the first one matplotlib knows is used, and without one
the picture is labelled in English rather than with empty boxes."""

import functools
from pathlib import Path

from autograder.engine.checks import messages
from autograder.engine.judge.results import picture_name


def pictures_for(directory):
    """A `pictures(step_id, records) -> [path]` callable for runner.grade and the pytest route,
    saving under `directory`; None when no directory is asked for."""
    if directory is None:
        return None
    return lambda step_id, records: save_pictures(Path(directory), step_id, records)


def save_pictures(directory: Path, step_id: str, records) -> list:
    """One PNG per failing check of `records` (diagnosis.Record) that has a picture; their paths."""
    saved = []
    for record in records:
        observation = record.observation
        if record.fail is None or observation is None or observation.error is not None:
            continue
        try:
            with messages.speaking(picture_language()):  # the check's title in the picture's language
                picture = record.check.picture(record.inputs, observation.values, record.expected)
        except Exception:  # noqa: BLE001 - values from student code: no picture, never a crash
            picture = None
        if picture is None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / picture_name(step_id, record.check.id)
        try:
            draw(picture, path)
        except ImportError:  # no matplotlib here (pip install matplotlib): grading goes on without pictures
            return saved
        saved.append(str(path))
    return saved


def draw(picture: dict, path: Path) -> None:
    """Two heatmaps side by side on one colour scale: picture["got"] and picture["expected"], labelled
    in the language spoken (the picture may give its own labels: got_title, expected_title, xlabel,
    ylabel, title)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lang = picture_language()
    if lang == "ko":
        plt.rcParams["font.family"] = [hangul_font(), "DejaVu Sans"]

    got, expected = (picture[name].detach().double().cpu().numpy() for name in ("got", "expected"))
    low, high = min(got.min(), expected.min(), 0.0), max(got.max(), expected.max(), 1.0)
    figure, axes = plt.subplots(1, 2, figsize=(8, 3.6), constrained_layout=True)
    for axis, values, title in (
        (axes[0], got, picture.get("got_title") or messages.render("picture.got", lang)),
        (axes[1], expected, picture.get("expected_title") or messages.render("picture.expected", lang)),
    ):
        image = axis.imshow(values, vmin=low, vmax=high, cmap="viridis")
        axis.set_title(title)
        axis.set_xlabel(picture.get("xlabel") or messages.render("picture.key", lang))
        axis.set_ylabel(picture.get("ylabel") or messages.render("picture.query", lang))
    figure.colorbar(image, ax=axes, shrink=0.8)
    figure.suptitle(picture.get("title", ""))
    figure.savefig(path, dpi=100)
    plt.close(figure)


def picture_language() -> str:
    """The language of the messages, but English where Korean would have no font to be drawn in."""
    lang = messages.language()
    return "en" if lang == "ko" and hangul_font() is None else lang


@functools.lru_cache(maxsize=1)
def hangul_font() -> "str | None":
    """The name of a font matplotlib knows that has Hangul (Noto Sans CJK, Nanum, Malgun Gothic,
    ...), or None (also where matplotlib is missing)."""
    try:
        from matplotlib import font_manager, ft2font
    except ImportError:
        return None
    for path in font_manager.findSystemFonts(fontext="ttc"):  # font collections: matplotlib lists none itself
        if path.lower().endswith(".ttc") and any(n in Path(path).name.lower() for n in ("cjk", "nanum", "gothic")):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError, ValueError):
                continue
    preferred = (
        "Noto Sans CJK KR",
        "Noto Sans CJK",
        "Noto Sans KR",
        "NanumGothic",
        "Malgun Gothic",
        "Apple SD Gothic Neo",
        "AppleGothic",
        "CJK",
        "Nanum",
        "Gothic",
        "Gulim",
        "Dotum",
        "Batang",
    )
    fonts = sorted(
        (font for font in font_manager.fontManager.ttflist if any(n in font.name for n in preferred)),
        key=lambda font: next(i for i, n in enumerate(preferred) if n in font.name),
    )
    for font in fonts:
        try:
            if ft2font.FT2Font(font.fname).get_char_index(ord("가")):
                return font.name
        except (OSError, RuntimeError):
            continue
    return None
