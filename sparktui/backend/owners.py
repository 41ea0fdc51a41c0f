"""Whose containers these are: the operator's own (by label, or adopted), or another owner's,
which attach, status, up, restart and down leave alone unless the operator says ``--adopt``;
and the sentences that say so (who, since when)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sparktui.backend.runtime import Containers, ContainerState, NameTaken
from sparktui.core.dockerview import short_id
from sparktui.core.errors import SparkError
from sparktui.core.ownership import Adoptions, owner_name, owner_of, when_text
from sparktui.core.plan import LABEL_CLUSTER, LABEL_PREFIX, LABEL_RECIPE
from sparktui.core.rankspec import ContainerSpec


@dataclass(frozen=True)
class Held:
    """A container of one of this recipe's ranks that belongs to another owner."""

    rank: int
    node: str
    container: ContainerState

    @property
    def owner(self) -> str | None:
        return owner_of(self.container.labels)

    def to_json(self) -> dict[str, object]:
        c = self.container
        return {"rank": self.rank, "node": self.node, "owner": self.owner, "container": c.name,
                "container_id": c.id, "status": c.status, "created": c.created_at}


def mine(c: ContainerState, owner: str, adopted: set[str]) -> bool:
    """The operator's own: it carries their owner label, or they adopted it."""
    return owner_of(c.labels) == owner or c.id in adopted


def _ranks(ranks: Sequence[int]) -> str:
    ordered = sorted(set(ranks))
    return f"rank{'s' if len(ordered) > 1 else ''} {', '.join(map(str, ordered))}"


def held_groups(held: Sequence[Held]) -> list[str]:
    """One phrase per other owner: ``alice@box1 since 2026-05-01 12:00:03 UTC (ranks 0, 1,
    running)``; the time is when their first container was created."""
    owners: dict[str | None, list[Held]] = {}
    for h in held:
        owners.setdefault(h.owner, []).append(h)
    phrases = []
    for owner, items in owners.items():
        since = min(h.container.created_at or "~" for h in items)
        state = "running" if any(h.container.running for h in items) else "not running"
        phrases.append(f"{owner_name(owner)} since {when_text(None if since == '~' else since)} "
                       f"({_ranks([h.rank for h in items])}, {state})")
    return phrases


def held_detail(h: Held) -> str:
    """A rank's detail while only another owner's container has it."""
    return (f"held by {owner_name(h.owner)} since {when_text(h.container.created_at)} "
            f"({h.container.status}; not yours)")


def held_notice(slug: str, cluster: str, you: str, held: Sequence[Held]) -> str:
    return (f"{slug} on cluster {cluster} has containers of another owner: "
            f"{'; '.join(held_groups(held))}. They are not yours (you are {you}): sparktui leaves "
            "them alone; --adopt (on up, restart or down) takes them over")


class HeldElsewhere(SparkError):
    """``up`` found this recipe on the cluster under another owner: nothing was started."""

    def __init__(self, slug: str, cluster: str, you: str, held: Sequence[Held]) -> None:
        self.held = list(held)
        super().__init__(
            f"{slug} is already on cluster {cluster}, started by {'; '.join(held_groups(held))}. "
            f"It is not yours (you are {you}), so nothing was started: sparktui up {slug} --adopt "
            "takes it over")


class NameClash(SparkError):
    """A rank's container name is held by a container sparktui may not remove."""


def clash(node: str, holder: ContainerState, owner: str, adopted: set[str]) -> str | None:
    """None when the container that holds a new rank's name may be removed to make room: the
    operator's own (or adopted) and not running. Else the sentence that names it and says why
    it stays: a container sparktui did not make (no sparktui labels) is never removed."""
    where = f"container {holder.name} on node {node} ({short_id(holder.id)}, {holder.status})"
    labels = holder.labels
    if not any(k.startswith(LABEL_PREFIX) for k in labels):
        return (f"{where} was not made by sparktui (it has no sparktui labels), and it holds the "
                f"name this rank needs: it was left as it is; rename or remove it on {node} "
                f"(docker rename / docker rm), then try again")
    what = f"{labels.get(LABEL_RECIPE, '?')} on cluster {labels.get(LABEL_CLUSTER, '?')}"
    if not mine(holder, owner, adopted):
        return (f"{where} belongs to {owner_name(owner_of(labels))} since "
                f"{when_text(holder.created_at)} ({what}): it was left as it is; --adopt takes "
                "over another owner's containers of this recipe")
    if holder.running:
        return (f"{where} is yours but runs {what}: it was left running; stop it with "
                "sparktui down for that recipe and cluster, then try again")
    return None


@dataclass(frozen=True)
class Names:
    """Container names as one operator may clear them: only a stopped container of their own
    (or adopted) makes room; its adoption entry goes with it."""

    owner: str
    adopted: set[str]
    adoptions: Adoptions

    async def clear(self, rt: Containers, node: str, name: str) -> str | None:
        """Make ``name`` free on ``node``; None when it is, else the sentence why it stays."""
        holder = await rt.named(name)
        if holder is None:
            return None
        why = clash(node, holder, self.owner, self.adopted)
        if why is None:
            await rt.remove(holder.id)
            self.adoptions.forget([holder.id])
        return why

    async def create(self, rt: Containers, node: str, spec: ContainerSpec,
                     labels: dict[str, str]) -> ContainerState:
        """``rt.run``; a name taken meanwhile (a restart racing someone) is cleared only when
        ``clash`` allows it, else ``NameClash``."""
        try:
            return await rt.run(spec, labels)
        except NameTaken as exc:
            why = clash(node, exc.holder, self.owner, self.adopted)
            if why is not None:
                raise NameClash(why) from None
            await rt.remove(exc.holder.id)
            self.adoptions.forget([exc.holder.id])
            return await rt.run(spec, labels)
