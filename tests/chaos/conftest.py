"""The chaos tests' test cluster: the suite's lane for them (``./dev test``) runs them on a
second one (``SPARKTUI_TESTBED_INSTANCE=1``), so that their faults, injected into every node,
meet no other test; run alone they take whichever the environment names."""

from __future__ import annotations

from tests.realparts.conftest import testbed

__all__ = ["testbed"]
