"""What a check is and speaks with: the Check contract (check.py), one charge per mistake in the
integration steps (earlier.py), message catalogs keyed by id (messages.py), printable text
(text.py) and an assignment's folder by id (folders.py). Each assignment's checks/ builds on it."""
