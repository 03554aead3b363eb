"""InertOutputs (autograder/routes/nbgrader_kernel.py): whatever a student's cell put in an
output's data and metadata, formgrader's and nbconvert's own templates render no markup of it.
The outputs are generated (every kept kind, hostile sizes and data, metadata the templates read),
then rendered through the real templates; every <img> must carry only the attributes a picture
needs, with whole-number sizes."""

import copy
import html.parser
import itertools
import os

import pytest

nbformat = pytest.importorskip("nbformat")
nbconvert = pytest.importorskip("nbconvert")
nbgrader = pytest.importorskip("nbgrader")

from autograder.routes.nbgrader_kernel import inert  # noqa: E402

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==\n"
HOSTILE = [
    "1 onerror=alert(1)//",
    '1" onload="alert(1)',
    "1><script>alert(1)</script>",
    "javascript:alert(1)",
    -5,
    1.5,
    True,
    [1],
]
DATA = [PNG, 'x" onerror="alert(1)', "AAAA><svg onload=alert(1)>", ["iVBORw0KGgo", "AAAA\n"]]
ALLOWED = {"alt", "src", "class", "width", "height"}


class Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.images = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.images.append(dict(attrs))


def outputs():
    """Display and result outputs of every kept image kind, hostile sizes and data included."""
    for kind, data, width, height in itertools.product(("image/png", "image/jpeg"), DATA, HOSTILE + [40], [7, "2 x"]):
        metadata = {kind: {"width": width, "height": height, "unconfined": True}, "filenames": {kind: "/etc/x"}}
        yield nbformat.v4.new_output("display_data", data={kind: data, "text/plain": "<p>"}, metadata=metadata)


def rendered(cells, template):
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    config = Config()
    config.HTMLExporter.template_name = template
    if template == "formgrade":
        folder = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates")
        config.HTMLExporter.extra_template_basedirs = [folder]
    notebook = nbformat.v4.new_notebook(cells=cells)
    resources = {
        "assignment_id": "a",
        "notebook_id": "n",
        "submission_id": "s",
        "index": 0,
        "total": 1,
        "base_url": "/",
        "student": "x",
        "last_name": "l",
        "first_name": "f",
        "notebook_path": "/p",
    }
    page, _ = HTMLExporter(config=config).from_notebook_node(copy.deepcopy(notebook), resources=resources)
    parser = Images()
    parser.feed(page)
    return parser.images


@pytest.mark.parametrize("template", ["classic", "lab", "formgrade"])
def test_no_output_becomes_markup_in_the_graders_browser(template):
    cells = [nbformat.v4.new_code_cell("pass", outputs=[inert(output)]) for output in outputs()]
    images = rendered(cells, template)
    assert images, "the generated outputs include real pictures: some <img> must be rendered"
    for attrs in images:
        assert set(attrs) <= ALLOWED, attrs
        for size in ("width", "height"):
            assert attrs.get(size) is None or attrs[size].isdigit(), attrs
        assert attrs["src"].startswith("data:image/") and '"' not in attrs["src"] and " " not in attrs["src"]


def test_a_picture_keeps_its_whole_number_size_and_nothing_else():
    output = nbformat.v4.new_output(
        "display_data",
        data={"image/png": PNG, "text/plain": "fig"},
        metadata={"image/png": {"width": 40, "height": "3 onerror=x", "unconfined": True}, "filenames": {}},
    )
    kept = inert(output)
    assert kept["data"] == {"image/png": PNG, "text/plain": "fig"}
    assert kept["metadata"] == {"image/png": {"width": 40}}


def test_an_image_that_is_not_base64_is_not_kept():
    output = nbformat.v4.new_output("display_data", data={"image/png": 'x" onerror="y'}, metadata={})
    kept = inert(output)
    assert "image/png" not in kept["data"] and kept["data"]["text/plain"] == "[image/png: not shown]"
