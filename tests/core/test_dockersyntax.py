"""Recipe values docker splits with a syntax of its own are refused at validation, at their line:
a ``:`` in a mount path (``host = "/data:/etc"`` became ``-v /data:/etc:/data``), a name that is
no variable name in ``[env]`` (``A=B`` became ``-e A=B=x``), a container path mounted twice."""

from __future__ import annotations

import pytest

from sparktui.core.errors import RecipeError
from sparktui.core.recipe import load_recipe_text

HEAD = ('engine = "sglang"\ndocker_image = "i"\nmodel = "m"\nrequired_nodes = 1\n'
        "tensor_parallel_size = 1\n")


def problems(tail: str) -> list[str]:
    with pytest.raises(RecipeError) as err:
        load_recipe_text(HEAD + tail)
    return [str(p) for p in err.value.problems]


def test_a_colon_in_a_mount_path_is_refused_at_its_line() -> None:
    said = problems('[[extra_mounts]]\nhost = "/data:/etc"\ncontainer = "/data"\n'
                    '[[extra_mounts]]\nhost = "/m"\ncontainer = "/in:ro"\n')
    assert said == [
        "<recipe>:7:1: error: extra_mounts[0].host: '/data:/etc' holds ':', which docker reads "
        "as the end of the path in host:container:mode; use a path without ':' (a link to it, "
        "for instance)",
        "<recipe>:11:1: error: extra_mounts[1].container: '/in:ro' holds ':', which docker reads "
        "as the end of the path in host:container:mode; use a path without ':' (a link to it, "
        "for instance)"]


@pytest.mark.parametrize("name", ["A=B", "1X", "A B", "A-B", "", "A.B", "É"])
def test_an_env_name_that_is_no_variable_name_is_refused_at_its_line(name: str) -> None:
    key = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in name)
    (said,) = problems(f'[env]\nOK = "1"\n"{key}" = "x"\n')
    assert said.startswith("<recipe>:8:1: error: env.")
    assert f"env name {name!r} is not a variable name: docker cuts NAME=value at the first '='" in said


def test_a_container_path_mounted_twice_is_refused() -> None:
    said = problems('[[extra_mounts]]\nhost = "/a"\ncontainer = "/x"\n'
                    '[[extra_mounts]]\nhost = "/b"\ncontainer = "/x/"\n'
                    '[[extra_mounts]]\nhost = "/c"\ncontainer = "/root/.cache/huggingface"\n')
    assert said == [
        "<recipe>:11:1: error: extra_mounts[1].container: '/x/' is already mounted "
        "(extra_mounts[0]): docker refuses a container path mounted twice",
        "<recipe>:14:1: error: extra_mounts[2].container: '/root/.cache/huggingface' is already "
        "mounted (sparktui's own mount of the HF cache): docker refuses a container path mounted "
        "twice"]

