"""The class report: its data from the batch results (data.py), pairs of alike submissions
(similarity.py), the HTML page in English and Korean (html.py, templates/), and the `report`
and `merge` commands (cli.py)."""
