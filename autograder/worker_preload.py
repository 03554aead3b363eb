"""Imported only by the worker fork server: load and warm up everything a worker needs, once.

Every worker is then a fork of this process: torch (one thread), the checks modules, the fake
CUDA device with PyTorch's fake-tensor machinery already imported (about 2 s saved per worker).
The server never imports the reference or the known mistakes, so no worker can find them.
"""
import gc

from .worker import warm_up

warm_up()
gc.collect()
gc.freeze()
