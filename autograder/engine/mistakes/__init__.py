"""Naming the likely mistake of a failed step: diagnosis.py (probes, then the known mistakes or
their fingerprints), fingerprints.py (reading them) and evidence.py (the rule both share)."""
