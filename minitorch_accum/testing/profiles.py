"""Hypothesis profiles for accumulation properties, registered when this module is imported
(the pytest plugin imports it, so ``pytest --hypothesis-profile=minitorch_accum-ci`` works):

- ``minitorch_accum-ci``: 25 examples per property, no deadline (a window of a real model
  takes longer than hypothesis' 200 ms default), the slow-data health checks off;
- ``minitorch_accum-dev``: 500 examples, for a thorough run before a release.

    from hypothesis import settings
    from minitorch_accum.testing import CI_PROFILE
    settings.load_profile(CI_PROFILE)

Needs the ``test`` extra (hypothesis).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

__all__ = ["CI_PROFILE", "DEV_PROFILE", "PROFILES", "register_profiles"]

CI_PROFILE = "minitorch_accum-ci"
DEV_PROFILE = "minitorch_accum-dev"
#: profile name -> examples per property
PROFILES = {CI_PROFILE: 25, DEV_PROFILE: 500}


def register_profiles() -> None:
    """Register both profiles with hypothesis (again is harmless: the same settings)."""
    for name, examples in PROFILES.items():
        settings.register_profile(name, max_examples=examples, deadline=None, print_blob=True,
                                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


register_profiles()
