"""Pictures where they help (--plots): for a failing check that can show one (Check.picture),
the student's attention weights drawn next to the expected ones, saved as a PNG that the score
table points to. matplotlib is imported only when a picture is drawn: plain runs stay fast."""
from pathlib import Path


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
            picture = record.check.picture(record.inputs, observation.values, record.expected)
        except Exception:  # noqa: BLE001 - values from student code: no picture, never a crash
            picture = None
        if picture is None:
            continue
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{step_id}-{record.check.id}.png"
        try:
            draw(picture, path)
        except ImportError:  # no matplotlib here (pip install matplotlib): grading goes on without pictures
            return saved
        saved.append(str(path))
    return saved


def draw(picture: dict, path: Path) -> None:
    """Two heatmaps side by side on one colour scale: picture["got"] and picture["expected"]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    got, expected = (picture[name].detach().double().cpu().numpy() for name in ("got", "expected"))
    low, high = min(got.min(), expected.min(), 0.0), max(got.max(), expected.max(), 1.0)
    figure, axes = plt.subplots(1, 2, figsize=(8, 3.6), constrained_layout=True)
    for axis, values, title in ((axes[0], got, picture.get("got_title", "yours")),
                                (axes[1], expected, picture.get("expected_title", "expected"))):
        image = axis.imshow(values, vmin=low, vmax=high, cmap="viridis")
        axis.set_title(title)
        axis.set_xlabel(picture.get("xlabel", "key"))
        axis.set_ylabel(picture.get("ylabel", "query"))
    figure.colorbar(image, ax=axes, shrink=0.8)
    figure.suptitle(picture.get("title", ""))
    figure.savefig(path, dpi=100)
    plt.close(figure)
