"""sparktui's config and state folders are platformdirs' answers: on plain Linux they are found
without importing platformdirs (5 ms at every start), and both must agree in every case."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import platformdirs
import pytest

from sparktui import config
from sparktui.core.errors import SetupError

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fast path is Linux's")

UNSET = None
CASES = [  # (XDG_*_HOME, HOME)
    (UNSET, "/home/ann"),
    (UNSET, "/home/ann/"),
    (UNSET, "/"),
    ("", "/home/ann"),
    ("/srv/xdg", "/home/ann"),
    ("/srv/xdg/", "/home/ann"),
    ("/srv//xdg/.", UNSET),
    ("relative/xdg", "/home/ann"),
    ("~/xdg", "/home/ann"),
    (UNSET, "relative-home"),
    (UNSET, ""),
    (UNSET, UNSET),
]
FOLDERS = [(config.state_dir, "XDG_STATE_HOME", platformdirs.user_state_dir),
           (config.config_dir, "XDG_CONFIG_HOME", platformdirs.user_config_dir)]


@pytest.mark.parametrize(("ours", "variable", "theirs"), FOLDERS)
@pytest.mark.parametrize(("xdg", "home"), CASES)
def test_same_folder_as_platformdirs(monkeypatch: pytest.MonkeyPatch, ours: Callable[[], Path],
                                     variable: str, theirs: Callable[..., str],
                                     xdg: str | None, home: str | None) -> None:
    monkeypatch.delenv("ANDROID_DATA", raising=False)
    for name, value in ((variable, xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        want: Path | None = Path(theirs("sparktui", appauthor=False))
    except RuntimeError:
        want = None
    if want is None or not want.is_absolute():
        with pytest.raises(SetupError):
            ours()
    else:
        assert ours() == want


@pytest.mark.parametrize(("xdg", "home", "plain"), [
    (UNSET, "/home/ann", "/home/ann/.local/state"),
    ("/srv/xdg", "relative", "/srv/xdg"),
    ("relative/xdg", "/home/ann", None),
    (UNSET, "relative", None),
    (UNSET, UNSET, None),
])
def test_only_plain_cases_skip_platformdirs(monkeypatch: pytest.MonkeyPatch, xdg: str | None,
                                            home: str | None, plain: str | None) -> None:
    """Anything unusual is left to platformdirs, whatever its version decides."""
    monkeypatch.delenv("ANDROID_DATA", raising=False)
    for name, value in (("XDG_STATE_HOME", xdg), ("HOME", home)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert config._xdg_dir("XDG_STATE_HOME", ".local/state") == plain
    monkeypatch.setenv("ANDROID_DATA", "/data")
    assert config._xdg_dir("XDG_STATE_HOME", ".local/state") is None
