"""Every key of the main screen, with the id users remap it by (``[keys]`` in config.toml).

One list feeds the screen's bindings, the footer, the help screen and the command palette.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class KeySpec:
    id: str
    key: str
    action: str
    label: str  # short, for the footer
    description: str  # a sentence, for help and the command palette
    group: str
    show: bool = False  # in the footer
    palette: bool = True  # offered in the command palette
    title: str = ""  # the command palette's name for it (default: the label, capitalised)

    @property
    def command(self) -> str:
        return self.title or self.label.capitalize()


KEYS: tuple[KeySpec, ...] = (
    KeySpec("up", "u", "up", "up", "Up: stage, then launch every rank (running ranks are reattached)",
            "Cluster", show=True),
    KeySpec("stage", "s", "stage", "stage", "Stage: place each rank's data on its node", "Cluster",
            show=True),
    KeySpec("restart", "r", "restart", "restart", "Restart the selected rank (asks first)", "Cluster",
            show=True, title="Restart rank"),
    KeySpec("down", "x", "down", "down", "Down: stop and remove every rank's container (asks first)",
            "Cluster", show=True),
    KeySpec("doctor", "d", "doctor", "doctor", "Doctor: preflight every node", "Cluster"),
    KeySpec("dump", "D", "dump", "dump",
            "Dump: every rank's Python stacks, processes and last lines, all ranks at once",
            "Cluster", title="Dump stacks"),
    KeySpec("pulse", "P", "pulse", "pulse",
            "Pulse: the engines' own numbers (throughput, running and queued, KV use, TTFT p95) "
            "with sparklines, per rank and for the group", "Cluster", title="Pulse view"),
    KeySpec("smoke", "k", "smoke", "smoke",
            "Smoke: one streamed chat completion to the head (time to first token, tokens/s)",
            "Cluster", title="Smoke request"),
    KeySpec("nodes", "m", "toggle_nodes", "nodes",
            "Nodes panel: memory, GPU and disk per node (show or hide)", "Console",
            title="Nodes panel"),
    KeySpec("grep", "slash", "grep", "grep", "Grep: filter the shown logs by a regex (! inverts)",
            "Logs", show=True),
    KeySpec("next-match", "n", "next_match", "next", "Next match (or next line of a filtered log)",
            "Logs", title="Next match"),
    KeySpec("prev-match", "N", "prev_match", "prev", "Previous match", "Logs", title="Previous match"),
    KeySpec("escape", "escape", "escape", "clear", "Clear the grep; back to the live end of the log",
            "Logs", palette=False),
    KeySpec("all-ranks", "a", "show_rank(-1)", "all", "Logs of all ranks, merged", "Logs",
            title="Logs: all ranks"),
    KeySpec("grid", "g", "toggle_grid", "side by side",
            "Logs side by side: a pane per rank (a grid up to 8, tabs beyond), or back to one view",
            "Logs", title="Logs side by side"),
    KeySpec("follow", "f", "toggle_follow", "follow", "Follow the end of the log, or pause", "Logs",
            title="Follow or pause the log"),
    KeySpec("wrap", "w", "toggle_wrap", "wrap", "Wrap long log lines", "Logs", title="Wrap log lines"),
    KeySpec("timestamps", "T", "toggle_timestamps", "times", "Show each line's capture time (UTC)",
            "Logs", title="Timestamps in the log"),
    KeySpec("probes", "h", "toggle_probes", "probes",
            "Hide or show the access-log lines of sparktui's own health probes (hidden at start; "
            "grep finds them)", "Logs",
            title="Health probe lines in the log"),
    KeySpec("checks", "c", "checks", "checks", "Boot checks panel: show and focus, or hide", "Checks",
            show=True, title="Boot checks panel"),
    KeySpec("add-check", "plus", "add_check", "add check",
            "Add a boot check, evaluated on everything captured, then live", "Checks",
            title="Add a boot check"),
    KeySpec("plan", "p", "plan", "plan", "Plan: what every rank will run", "Recipe", show=True),
    KeySpec("events", "e", "events", "events", "Events: every notice and error of this session",
            "Console"),
    KeySpec("theme", "t", "next_theme", "theme", "Switch to the next theme", "Console", show=True,
            title="Next theme"),
    KeySpec("help", "question_mark", "help", "help", "Help: every key", "Console", show=True),
    KeySpec("quit", "q", "app.quit", "quit", "Quit (containers keep running)", "Console", show=True),
)

RANK_KEYS: tuple[KeySpec, ...] = tuple(
    KeySpec(f"rank-{n}", str(n), f"show_rank({n - 1})", f"r{n - 1}",
            f"Logs of rank {n - 1} only (and select it)", "Logs", palette=False)
    for n in range(1, 10)
)

ALL_KEYS: tuple[KeySpec, ...] = KEYS + RANK_KEYS


def bindings() -> list[BindingType]:
    return [Binding(k.key, k.action, k.label, show=k.show, id=k.id) for k in ALL_KEYS]


def effective_key(spec: KeySpec, keymap: dict[str, str]) -> str:
    """The key(s) a binding answers to after the user's remapping."""
    return keymap.get(spec.id, spec.key)
