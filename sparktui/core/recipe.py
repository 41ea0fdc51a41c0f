"""The recipe: one TOML file that says what runs on every rank.

Every key of the operator's own recipe keeps its meaning; ``[boot]`` is this project's
addition. Loading validates the whole file and reports every problem at once, each naming
the file, the key path and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from sparktui.core import engines
from sparktui.core.dockersyntax import env_problems, mount_problems
from sparktui.core.engines.argv import is_option, table_for
from sparktui.core.engines.flagtable import ENGINE_LABELS, UNDERSCORE_ENGINES, versions
from sparktui.core.errors import RecipeError
from sparktui.core.limits import MAX_NODES, MAX_TP
from sparktui.core.names import is_safe, name_rule
from sparktui.core.patterns import compile_pattern
from sparktui.core.placeholders import PLACEHOLDERS, names_in, walk_strings
from sparktui.core.problems import Problem
from sparktui.core.recipefiles import list_recipes, locate, slug_for
from sparktui.core.secrets import redact_problems, secret_path
from sparktui.core.tomlsource import TomlSource, parse_toml, read_toml
from sparktui.core.units import DURATION_PATTERN, SIZE_PATTERN, parse_duration, parse_size
from sparktui.core.validation import StrictModel, problems_from, suggest

EngineName = Literal["sglang", "vllm"]
"""A recipe's ``engine``: the names of ``core.engines.ENGINES`` (a test keeps them equal). Each
engine's ready line, default port and launcher-owned flags live in its adapter."""

SUPPORTED_BACKENDS = ("mp",)
"""``distributed_backend`` values the launcher implements; ``ray`` parses but is refused."""

HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"
MAX_SLUG = 96
"""A recipe's name (folder) becomes container names and run ids (``<slug>-<UTC time>``)."""


def _size(value: Any) -> Any:
    if isinstance(value, str):
        parse_size(value)
    return value


def _duration(value: Any) -> Any:
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        parse_duration(value)
    return value


Size = Annotated[
    str,
    AfterValidator(_size),
    WithJsonSchema({"type": "string", "pattern": SIZE_PATTERN, "examples": ["55G", "32gb"]}),
]
Duration = Annotated[
    str | int,
    AfterValidator(_duration),
    WithJsonSchema(
        {"anyOf": [{"type": "string", "pattern": DURATION_PATTERN}, {"type": "integer", "minimum": 1}],
         "examples": ["20m", "90s"]}
    ),
]


def _pattern(value: Any) -> Any:
    if isinstance(value, str):
        compile_pattern(value)
    return value


Pattern = Annotated[str, AfterValidator(_pattern)]


def _ranks(value: Any) -> Any:
    if value in ("any", "all"):
        return value
    if isinstance(value, list) and value and all(
        isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in value
    ):
        return value
    raise ValueError(f'ranks must be "any", "all" or a list of rank numbers such as [0]; found {value!r}')


Ranks = Annotated[
    Literal["any", "all"] | list[int],
    BeforeValidator(_ranks),
    WithJsonSchema(
        {"anyOf": [{"enum": ["any", "all"]},
                   {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}]}
    ),
]


class Mount(StrictModel):
    """A host folder bind-mounted into every rank's container."""

    host: str = Field(description="Folder on the node (placeholders allowed)")
    container: str = Field(description="Where it appears inside the container")
    read_only: bool = False


class StagingJob(StrictModel):
    """Data placed on each node before launch (``kind = "sparse-rows"``: per-rank row slices)."""

    kind: Literal["sparse-rows"]
    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
                    description="Selects tensors whose dotted name has a component equal to it")
    src: str = Field(description="Checkpoint folder on the node (an HF snapshot)")
    dst: str = Field(description="Node-local folder the packed files are written to")
    min_free: Size = Field(default="0", description="Free space required at dst before writing")
    tensors: list[str] | None = Field(default=None, description="Glob patterns overriding the id match")

    @property
    def min_free_bytes(self) -> int:
        return parse_size(self.min_free)


class CheckSpec(StrictModel):
    """A must-show line restricted to some ranks."""

    pattern: Pattern
    ranks: Ranks = "any"


def _check_tag(value: Any) -> str:
    return "table" if isinstance(value, dict) else "str"


MustShow = Annotated[
    Annotated[Pattern, Tag("str")] | Annotated[CheckSpec, Tag("table")],
    Discriminator(_check_tag),
]


class Boot(StrictModel):
    """What proves a boot worked, and what proves it did not."""

    timeout: Duration = Field(default="20m", description="Boot budget per launch")
    stall: Duration = Field(default="120s", description="A booting rank silent this long while "
                            "the others print (or every rank silent) is named: a warning")
    ready: str | None = Field(default=None, description="Ready line on the head (engine default)")
    must_show: list[MustShow] = Field(default_factory=list)
    must_not_show: list[Pattern] = Field(default_factory=list)
    engine_fatal: bool = Field(default=True,
                               description="Also fail on the engine's well-known fatal lines")
    args: Literal["check", "warn", "ignore"] = Field(
        default="check", description='Whether every flag took effect (the engine\'s dump of its '
        'arguments): "check" fails the boot check on a flag that differs or is unknown, "warn" '
        'reports it and passes, "ignore" reads no dump')
    args_expected: list[str] = Field(
        default_factory=list, description='Flags (or fields) known to differ or be unknown, e.g. '
        '"--max-running-requests": reported, never failing')

    @property
    def timeout_s(self) -> float:
        return parse_duration(self.timeout)

    @property
    def stall_s(self) -> float:
        return parse_duration(self.stall)


class RestartPolicy(StrictModel):
    """The restart watchdog (``sparktui watch`` or an open console): when a rank fails after
    the group was ready, or the smoke request fails twice in a row, the whole group is
    restarted, at most ``max`` times per ``window``."""

    policy: Literal["off", "group"] = Field(default="off",
                                            description='"group": restart the whole group')
    max: int = Field(default=3, ge=1, le=100, description="Restarts allowed per window")
    window: Duration = Field(default="6h", description="The window the restarts are counted in")
    smoke_every: Duration | None = Field(
        default=None, description="Also send a smoke request this often as a liveness check")

    @property
    def window_s(self) -> float:
        return parse_duration(self.window)

    @property
    def smoke_every_s(self) -> float | None:
        return parse_duration(self.smoke_every) if self.smoke_every else None


class Liveness(StrictModel):
    """The canary: once every rank is ready, a real completion of ``max_tokens`` through the
    head this often (``/health`` answers while a TP peer is wedged); two failures in a row
    mark the group wedged."""

    every: Duration = Field(default="60s", description="How often the canary completion is sent")
    timeout: Duration = Field(default="30s", description="How long one canary may take")
    max_tokens: int = Field(default=1, ge=1, le=1024, description="Tokens the canary asks for")

    @property
    def every_s(self) -> float:
        return parse_duration(self.every)

    @property
    def timeout_s(self) -> float:
        return parse_duration(self.timeout)


class MetricsPolicy(StrictModel):
    """The engine's own numbers (its Prometheus ``/metrics``), scraped from every rank that
    serves them through the node's SSH connection, as the health probes are."""

    enabled: bool = Field(default=True, description="Scrape the engine's /metrics once it runs")
    interval: Duration | Literal["off"] = Field(
        default="5s", description='How often each rank is scraped; "off" as enabled = false')

    @property
    def interval_s(self) -> float | None:
        """Seconds between two scrapes; None: off."""
        if not self.enabled or self.interval == "off":
            return None
        return parse_duration(self.interval)


class MemoryPolicy(StrictModel):
    """Memory before it wedges the host (unified memory on a Spark: GPU and CPU share the box's
    pool). Every node's available memory is watched while ranks boot and serve: under
    ``floor`` a warning, under ``stop_at`` the ranks on that node are stopped and the group
    failed with the figures, before the node takes sparktui's own SSH session down."""

    floor: Size = Field(default="4GiB", description="Warn when a node's available memory is "
                        "below this")
    stop_at: Size | None = Field(default="1GiB", description="Stop the launch when a node's "
                                 "available memory falls below this (unset: never stop)")
    limit: Size | None = Field(default=None, description="Each rank's container memory limit "
                               "(Docker --memory, on Slurm too: its step's docker run); unset: "
                               "no limit")
    restart_margin: Size = Field(default="2GiB", description="A restart waits until each node's "
                                 "available memory is within this of what it was before the "
                                 "launch")
    restart_wait: Duration = Field(default="5m", description="How long a restart waits for "
                                   "memory to come back before it goes on anyway (and says so)")

    @model_validator(mode="after")
    def _stop_below_floor(self) -> MemoryPolicy:
        if self.stop_at is not None and parse_size(self.stop_at) >= parse_size(self.floor):
            raise ValueError(f"stop_at ({self.stop_at}) must be below floor ({self.floor}): the "
                             "warning comes before the stop")
        return self

    @property
    def floor_bytes(self) -> int:
        return parse_size(self.floor)

    @property
    def stop_at_bytes(self) -> int | None:
        return parse_size(self.stop_at) if self.stop_at is not None else None

    @property
    def restart_margin_bytes(self) -> int:
        return parse_size(self.restart_margin)

    @property
    def restart_wait_s(self) -> float:
        return parse_duration(self.restart_wait)


class RecipeSpec(StrictModel):
    """The recipe file's schema."""

    engine: EngineName
    name: str | None = Field(default=None, description="Display name (default: folder name)")
    docker_image: str
    docker_image_dir: str | None = Field(default=None, description="Build context (informational)")
    model: str = Field(description="Served checkpoint, an HF repo id resolved in the HF cache")
    parent_model: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535, description="API port on every rank")
    required_nodes: int = Field(ge=1, le=MAX_NODES)
    tensor_parallel_size: int = Field(ge=1, le=MAX_TP)
    distributed_backend: Literal["mp", "ray"] = "mp"
    engine_flags: str | None = Field(
        default=None, description='The engine version whose flag table args are checked '
        'against (e.g. "0.5.23"; default: the newest shipped), or "none" for an image whose '
        'engine knows other flags (a fork)')
    shm_size: Size | None = None
    entrypoint: list[str] | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(
        default_factory=list, description="More env names whose values are masked (besides names "
        "containing KEY, TOKEN, SECRET, PASSWORD, PASS, AUTH or CREDENTIAL)")
    secret_args: list[str] = Field(
        default_factory=list, description='Flags in args whose values are masked, e.g. "--api-key"')
    extra_mounts: list[Mount] = Field(default_factory=list)
    staging: list[StagingJob] = Field(default_factory=list)
    boot: Boot = Field(default_factory=Boot)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    liveness: Liveness | None = Field(
        default=None, description="A canary completion after ready (off when the table is absent)")
    memory: MemoryPolicy = Field(default_factory=MemoryPolicy)
    metrics: MetricsPolicy = Field(default_factory=MetricsPolicy)

    @property
    def api_port(self) -> int:
        return self.port if self.port is not None else engines.engine(self.engine).default_port


@dataclass(frozen=True)
class Recipe:
    """A validated recipe and where it came from."""

    spec: RecipeSpec
    source: TomlSource
    slug: str

    @property
    def path(self) -> Path | None:
        return self.source.path

    @property
    def title(self) -> str:
        return self.spec.name or self.slug

    def problem(self, path: tuple[str | int, ...], message: str, *, severity: str = "error",
                code: str = "lint") -> Problem:
        return self.source.problem(path, message, severity=severity, code=code)


def flag_name(token: str) -> str | None:
    """``--port=1`` and ``--port`` -> ``--port``; non-flags -> None."""
    if token.startswith("--") and len(token) > 2:
        return token.split("=", 1)[0]
    return None


def launcher_flag(spec: RecipeSpec, token: str) -> str | None:
    """How ``token`` names a flag the launcher owns, or None: any spelling of it (an alias,
    ``--flag=value``, vLLM's ``--flag_name``), and an abbreviation the engine's parser would
    take for it (argparse's prefix matching, through the flag table; only looked up when the
    token is a prefix of an owned flag, so most recipes never load the table)."""
    if not is_option(token):
        return None
    owned = engines.engine(spec.engine).launcher_flags
    name = token.split("=", 1)[0]
    if spec.engine in UNDERSCORE_ENGINES and name.startswith("--"):
        name = "--" + name[2:].replace("_", "-")
    if name in owned:
        return name
    if not name.startswith("--") or not any(o.startswith(name) for o in owned):
        return None
    table = table_for(spec.engine, spec.engine_flags, spec.entrypoint)
    flag = table.resolve(name)[0] if table is not None else None
    if flag is None or not set(flag.options) & set(owned):
        return None
    return f"{name} ({table.label if table else spec.engine}'s parser reads it as {flag.options[0]})"


def _engine_flags_problems(spec: RecipeSpec, source: TomlSource) -> list[Problem]:
    if spec.engine_flags is None or spec.engine_flags == "none":
        return []
    shipped = versions(spec.engine)
    if spec.engine_flags in shipped:
        return []
    hint = suggest(spec.engine_flags, list(shipped))
    label = ENGINE_LABELS.get(spec.engine, spec.engine)
    return [source.problem(
        ("engine_flags",),
        f"no flag table of {label} {spec.engine_flags} ships with sparktui"
        + (f"; did you mean {hint!r}?" if hint else "")
        + f" (shipped: {', '.join(shipped) or 'none'}); name one, or \"none\" when the image's "
        "engine knows other flags (scripts/engine_flags.py writes a table from an installed "
        "engine)", code="engine-flags")]


def _placeholder_problems(source: TomlSource) -> list[Problem]:
    problems: list[Problem] = []
    for path, text in walk_strings(source.data):
        for name in names_in(text):
            if name not in PLACEHOLDERS:
                hint = suggest(name, list(PLACEHOLDERS))
                msg = f"unknown placeholder {{{{{name}}}}}"
                msg += f"; did you mean {{{{{hint}}}}}?" if hint else ""
                msg += f" (known: {', '.join('{{' + p + '}}' for p in PLACEHOLDERS)})"
                problems.append(source.problem(path, msg, code="placeholder"))
    return problems


def _semantic_problems(spec: RecipeSpec, source: TomlSource) -> list[Problem]:
    problems: list[Problem] = []
    if spec.distributed_backend not in SUPPORTED_BACKENDS:
        problems.append(source.problem(
            ("distributed_backend",),
            f"{spec.distributed_backend!r} is not supported yet: sparktui launches every rank "
            "with the engine's own multi-node flags; remove the key or set it to \"mp\"",
            code="unsupported",
        ))
    problems += _engine_flags_problems(spec, source)
    owned = engines.engine(spec.engine).launcher_flags
    for i, token in enumerate(spec.args):
        taken = launcher_flag(spec, token)
        if taken is not None:
            problems.append(source.problem(
                ("args", i),
                f"{taken} is set by the launcher for every rank ({' '.join(owned)}); "
                "remove it from args",
                code="launcher-flag",
            ))
    for i, check in enumerate(spec.boot.must_show):
        if isinstance(check, CheckSpec) and isinstance(check.ranks, list):
            for r in check.ranks:
                if r >= spec.required_nodes:
                    problems.append(source.problem(
                        ("boot", "must_show", i, "ranks"),
                        f"rank {r} does not exist: the recipe runs ranks 0-{spec.required_nodes - 1}",
                    ))
    problems += mount_problems(source, [(m.host, m.container) for m in spec.extra_mounts],
                               taken=[HF_CACHE_IN_CONTAINER])
    problems += env_problems(source, spec.env)
    return problems


def recipe_from_source(source: TomlSource, slug: str | None = None) -> Recipe:
    """Validate parsed TOML; raises ``RecipeError`` listing every problem (secret values never
    quoted)."""
    placeholders = _placeholder_problems(source)
    try:
        spec = RecipeSpec.model_validate(source.data)
    except ValidationError as exc:
        problems = problems_from(exc, source, RecipeSpec, secret_path(source.data)) + placeholders
        raise RecipeError(redact_problems(sorted(problems, key=_order), source.data)) from None
    if slug is None:
        slug = slug_for(source.path)
    problems = sorted(placeholders + _semantic_problems(spec, source), key=_order)
    if not is_safe(slug) or len(slug) > MAX_SLUG:
        problems.insert(0, Problem(
            f"the recipe's name {slug[:80]!r} (its folder, or its file name) names its containers "
            f"and run folders: rename it to {name_rule(MAX_SLUG)} characters",
            code="name", file=source.display))
    if problems:
        raise RecipeError(redact_problems(problems, source.data))
    return Recipe(spec=spec, source=source, slug=slug)


def _order(p: Problem) -> tuple[int, int]:
    return (p.line or 0, p.column or 0)


def load_recipe_text(text: str, path: Path | None = None) -> Recipe:
    return recipe_from_source(parse_toml(text, path, RecipeError))


def load_recipe(path: Path) -> Recipe:
    return recipe_from_source(read_toml(path, RecipeError))


def find_recipe(arg: str, recipes_dirs: list[Path]) -> Path:
    """A ``recipe.toml`` path, its folder, or a recipe name under one of ``recipes_dirs``."""
    try:
        return _find_recipe(arg, recipes_dirs)
    except (OSError, RuntimeError) as exc:  # a name past the file-name limit; no home for ~
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise RecipeError([Problem(f"cannot look up {arg[:80]!r}{'...' if len(arg) > 80 else ''}: "
                                   f"{why}", code="io", file="<command line>")]) from None


def _find_recipe(arg: str, recipes_dirs: list[Path]) -> Path:
    found = locate(arg, recipes_dirs)
    if found is not None:
        return found
    p = Path(arg).expanduser()
    if p.is_dir():
        raise RecipeError([Problem("folder has no recipe.toml", code="io", file=str(p))])
    names = [r.slug for d in recipes_dirs for r in list_recipes(d)]
    hint = suggest(arg, names)
    msg = f"no recipe named {arg!r}"
    msg += f"; did you mean {hint!r}?" if hint else ""
    searched = ", ".join(str(d) for d in recipes_dirs) or "no recipes folder"
    raise RecipeError([Problem(f"{msg} (looked in {searched})", code="io", file=arg)])


def json_schema() -> dict[str, Any]:
    """JSON Schema of the recipe format, for editors' TOML support."""
    schema = RecipeSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "sparktui recipe"
    return schema


