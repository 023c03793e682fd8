"""Hypothesis for the whole suite.

By default every property test replays the same examples on every run (``derandomize``), so
CI is deterministic. With ``AGENTS_TRIO_FUZZ`` set in the environment, each run draws fresh
examples, and the tests that draw ``st.random_module()`` fresh Trio scheduler orders too: run
them again and again to hunt for races. A failing example prints the schedule and the seed
that replay it, either way.
"""

import os

from hypothesis import settings

settings.register_profile("replay", derandomize=True, database=None)
settings.register_profile("fuzz", derandomize=False, database=None)
settings.load_profile("fuzz" if os.environ.get("AGENTS_TRIO_FUZZ") else "replay")
