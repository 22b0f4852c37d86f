"""Hypothesis settings of the property tests: bounded and derandomized, so the directory runs in a
few seconds and a failure repeats on every run. `PQS_PROPERTY_PROFILE=pqs-explore` trades both for
a long random search (nothing is stored between runs either way)."""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("pqs-property", max_examples=300, derandomize=True, database=None, deadline=None)
settings.register_profile("pqs-explore", max_examples=20_000, database=None, deadline=None)

PROPERTY = settings.get_profile(os.environ.get("PQS_PROPERTY_PROFILE", "pqs-property"))
