"""Lets ``python -m bench`` work from inside ``bench/`` as well as from the repository root."""

import os
import runpy
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [os.path.dirname(here)] + [
        p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    runpy.run_module("bench", run_name="__main__", alter_sys=True)
