"""grading.yml read and validated into Assignments (config.py, grading.schema.json), an
assignment's parts found by id (assignment.py), and the torch the grading pins (torch_pin.py)."""
