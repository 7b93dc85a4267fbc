"""The registry of systems under test: the one place that lists them. Adding a system means a
package with a `profile.py` and a line here."""
from __future__ import annotations

from systems.core.profile import SystemProfile
from systems.external.profile import PROFILE as _EXTERNAL
from systems.replication.profile import PROFILE as _REPLICATION
from systems.shared.profile import PROFILE as _SHARED
from systems.tiered.profile import PROFILE as _TIERED

PROFILES: dict[str, SystemProfile] = {p.name: p for p in (_REPLICATION, _TIERED, _SHARED, _EXTERNAL)}
NAMES: tuple[str, ...] = tuple(PROFILES)
# The systems the harness starts itself (`cluster start --system`, the default suite).
LAUNCHED: tuple[str, ...] = tuple(n for n, p in PROFILES.items() if p.launched)


class UnknownSystem(KeyError):
    def __str__(self) -> str:
        return f"unknown system {self.args[0]!r}; choose one of {', '.join(NAMES)}"


def profile(name: str) -> SystemProfile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UnknownSystem(name) from None
