"""Hypothesis profiles for accumulation properties, registered when this module is imported
(the pytest plugin imports it, so ``pytest --hypothesis-profile=minitorch_accum-ci`` works):

- ``minitorch_accum-ci``: 25 examples per property, no deadline (a window of a real model
  takes longer than hypothesis' 200 ms default), the slow-data health checks off, and
  derandomized: every run draws the same examples, so a test that fails in CI fails again
  on a rerun, and one that passes does not flicker;
- ``minitorch_accum-dev``: 500 examples drawn anew each run, for a thorough search before a
  release (a failure prints its ``@reproduce_failure`` blob).

    from hypothesis import settings
    from minitorch_accum.testing import CI_PROFILE
    settings.load_profile(CI_PROFILE)

Needs the ``test`` extra (hypothesis).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

__all__ = ["CI_PROFILE", "DERANDOMIZED", "DEV_PROFILE", "PROFILES", "register_profiles"]

CI_PROFILE = "minitorch_accum-ci"
DEV_PROFILE = "minitorch_accum-dev"
#: profile name -> examples per property
PROFILES = {CI_PROFILE: 25, DEV_PROFILE: 500}
#: the profiles whose draws are the same on every run
DERANDOMIZED = {CI_PROFILE}


def register_profiles() -> None:
    """Register both profiles with hypothesis (again is harmless: the same settings)."""
    for name, examples in PROFILES.items():
        settings.register_profile(name, max_examples=examples, deadline=None, print_blob=True,
                                  derandomize=name in DERANDOMIZED,
                                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


register_profiles()
