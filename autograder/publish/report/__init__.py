"""The class report: what it reads of the out directories and nothing else (reading.py), its data
from the batch results (data.py), pairs of alike submissions (similarity.py, on the code grading
kept, normalised by normalise.py with dead_code.py, liveness.py, order.py and syntax.py), the HTML
page in English and Korean (html.py, templates/). The `report` and `merge` commands are
routes/cli/report.py."""
