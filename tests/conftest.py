"""Shared test configuration: hypothesis profiles (``SAREK_FUZZ=1`` for the long run)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", deadline=None, max_examples=2000, suppress_health_check=list(HealthCheck)
)
settings.load_profile("fuzz" if os.environ.get("SAREK_FUZZ") else "default")
