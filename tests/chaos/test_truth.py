"""The checkers' own reading of ids: a container named by sparktui is the one Docker runs."""

from __future__ import annotations

from tests.chaos.truth import names


def test_a_slurm_rank_id_names_only_itself_and_a_docker_id_its_prefixes() -> None:
    assert names("slurm-4-r0-1", "slurm-4-r0-1")
    assert not names("slurm-4-r0-10", "slurm-4-r0-1")  # the Slurm soak's first run took one for the other
    full = "5d69566b129390bc6cd7572b8755a8c954e3782fdc38f19826b9febd6e4884e3"
    assert names(full, full) and names(full, full[:12])
    assert not names(full, full[:6]) and not names(full, "slurm-4-r0-1")
