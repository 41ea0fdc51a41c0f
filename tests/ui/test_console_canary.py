"""The console shows the liveness canary's last completion, its latency and its age, in the
ranks panel's subtitle (fed as the Orchestrator announces it: ``CanaryChanged``)."""

from __future__ import annotations

from collections.abc import Callable

from sparktui.backend.events import CanaryChanged
from sparktui.core.canary import CanaryRecord
from sparktui.ui.app import SparkApp
from sparktui.ui.messages import BackendEvent
from tests.ui.conftest import FIXED_CLOCK, wait_for


async def test_the_last_canary_is_in_the_ranks_subtitle(offline_app: Callable[..., SparkApp]) -> None:
    app = offline_app()
    async with app.run_test(size=(160, 40)) as pilot:
        main = app.main_screen
        await wait_for(pilot, main.ready.is_set, 15, "the recipe to open")
        table = main.ranks_table
        assert "canary" not in str(table.border_subtitle)
        main.post_message(BackendEvent(CanaryChanged(CanaryRecord(True, FIXED_CLOCK - 12, 8.2))))
        await wait_for(pilot, lambda: "canary 8 ms, 12s ago · " in str(table.border_subtitle), 5,
                       "the canary's latency and age")
        why = "POST /generate on n0:30000: timed out after 30 s"
        main.post_message(BackendEvent(CanaryChanged(CanaryRecord(False, FIXED_CLOCK - 65, why=why,
                                                                  failures=2))))
        await wait_for(pilot, lambda: "canary failed 1m5s ago (2 in a row) · "
                       in str(table.border_subtitle), 5, "the failed canary")
        assert "timed out" not in str(table.border_subtitle)  # why is in the notices and status
