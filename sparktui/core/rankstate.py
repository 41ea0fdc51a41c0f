"""A rank's states and the moves between them, apart from ``core.ranks`` so that what only
names a state (the CLI's state colours, printed on the way out of any command) does not load
the cluster models (pydantic) ``core.ranks`` needs.

Every map keyed by ``RankState`` is total, and mypy proves it: it is built by ``by_state`` from
a function whose ``match`` ends in ``assert_never``, so a state added to ``RankState`` is an
error in every map that does not say what it is (tests/core/test_state_maps.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, NoReturn, TypeVar, get_args

RankState = Literal["pending", "staging", "queued", "creating", "booting", "ready", "wedged",
                    "failed", "stopped", "restarting"]
STATES: tuple[RankState, ...] = get_args(RankState)

_X = TypeVar("_X")


def assert_never(value: NoReturn) -> NoReturn:
    """The end of a ``match`` over a Literal that names every case: mypy reports a case left
    out (``typing.assert_never`` from Python 3.11)."""
    raise AssertionError(f"unhandled value: {value!r}")


def by_state(value: Callable[[RankState], _X]) -> dict[RankState, _X]:
    """A map with a value for every state: ``value`` is a ``match`` over ``RankState`` ending in
    ``assert_never``, so mypy reports the map a new state is missing from."""
    return {state: value(state) for state in STATES}


SETTLED: frozenset[RankState] = frozenset({"ready", "failed", "stopped"})
"""States a boot ends in: waiting for the group stops once every rank is in one."""

BOOTING: frozenset[RankState] = frozenset({"creating", "booting"})
"""States in which a fatal line or the boot budget fails the rank."""

RUNNING: frozenset[RankState] = frozenset({"booting", "ready", "wedged"})
"""States in which a rank's engine runs: it may answer its health probe, and a group that had
formed falls with one of them. In any other state (failed, stopped, restarting, not launched
yet) a rank shows no health code: an old one would claim an engine that is gone."""

LAUNCHING: frozenset[RankState] = frozenset({"creating", "restarting"})
"""States a new container is on its way in: what was known of the old one (removed by down,
asked for its health) no longer holds."""

# From a settled state a new launch starts over: staging (when the recipe stages data) or creating.
_RELAUNCH: frozenset[RankState] = frozenset({"staging", "queued", "creating", "restarting"})


def _moves(state: RankState) -> frozenset[RankState]:
    match state:
        case "pending":
            return frozenset({"staging", "queued", "creating", "failed", "stopped", "restarting"})
        case "staging":
            return frozenset({"queued", "creating", "failed", "stopped"})
        case "queued":  # the scheduler has not given the nodes yet (Slurm: the job pends);
            # restarting: a watchdog finishing a group restart whose waiter was killed
            return frozenset({"creating", "failed", "stopped", "restarting"})
        case "creating":
            return frozenset({"booting", "failed", "stopped"})
        case "booting":
            return frozenset({"ready", "failed", "stopped", "restarting"})
        case "ready":
            return frozenset({"wedged", "failed", "stopped", "restarting"})
        case "wedged":  # ready, but the canary completion failed twice in a row: not serving
            return frozenset({"ready", "failed", "stopped", "restarting"})
        case "failed":
            return _RELAUNCH | {"stopped"}
        case "stopped":
            return _RELAUNCH
        case "restarting":
            return frozenset({"queued", "creating", "failed", "stopped"})
        case _:
            assert_never(state)


TRANSITIONS: dict[RankState, frozenset[RankState]] = by_state(_moves)
"""Every move a rank may make. What a container is found doing on attach is not a move but an
observation (``RankInfo.observe``): the container is the truth, whatever we believed."""
