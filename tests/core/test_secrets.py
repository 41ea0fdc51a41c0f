"""Secrets: which values are secret, masked in every rendering and sentence, and a plan hash on
a container label that no longer gives a short secret away to someone trying values."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from pathlib import Path

import pytest

from sparktui.cli import main
from sparktui.core.cluster import local_cluster
from sparktui.core.errors import RecipeError
from sparktui.core.lints import lint
from sparktui.core.plan import LABEL_PLAN, build_plan, hashed_text
from sparktui.core.recipe import load_recipe_text
from sparktui.core.runstore import RunStore
from sparktui.core.secrets import MASK, SecretRules, is_secret, is_secret_flag, mask_source, plan_key

SMALL = """engine = "sglang"
docker_image = "img:1"
model = "org/model"
required_nodes = 1
tensor_parallel_size = 1
args = ["--api-key", "sk-live-4242", "--hf-token=hf_abcdefgh", "--max-total-tokens", "4096",
        "--route", "r-999999", "--api-key", "sk-live-4242"]
secret_args = ["--route"]
secret_env = ["PLAIN_LOOKING"]

[env]
AUTH = "auth-value-77"
DB_PASS = "dbpass-value-88"
PLAIN_LOOKING = "plain-value-99"
API_TOKEN = "{secret}"
NCCL_DEBUG = "INFO"
"""
VALUES = ["sk-live-4242", "hf_abcdefgh", "r-999999", "auth-value-77", "dbpass-value-88",
          "plain-value-99", "042137"]


def recipe_text(secret: str = "042137") -> str:
    return SMALL.replace("{secret}", secret)


def test_which_names_and_flags_are_secret() -> None:
    for name in ("HF_TOKEN", "AUTH", "DB_PASS", "OPENAI_API_KEY", "MY_CREDENTIALS", "PASSWORD"):
        assert is_secret(name), name
    assert not is_secret("NCCL_DEBUG") and is_secret("X", ["X"])
    for flag in ("--api-key", "--hf-token", "--ssl-keyfile-password", "--apikey", "--auth"):
        assert is_secret_flag(flag), flag
    for flag in ("--max-total-tokens", "--tokenizer-path", "--kv-cache-dtype", "-k"):
        assert not is_secret_flag(flag), flag
    assert is_secret_flag("-k", ["-k"])
    rules = SecretRules(args=("--route",))
    assert rules.conceal_args(["--route", "x", "--api-key=y", "--n", "1"], lambda v: MASK) == [
        "--route", MASK, f"--api-key={MASK}", "--n", "1"]


def test_plan_text_and_json_mask_args_and_env(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "small"
    folder.mkdir()
    (folder / "recipe.toml").write_text(recipe_text())
    for argv in (["plan", str(folder)], ["plan", str(folder), "--json"]):
        assert main(argv) == 0
        out = capsys.readouterr()
        for value in VALUES:
            assert value not in out.out + out.err, (argv, value)
    assert main(["plan", str(folder), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    container = data["ranks"][0]["container"]
    assert container["command"][:8] == ["--api-key", MASK, f"--hf-token={MASK}",
                                        "--max-total-tokens", "4096", "--route", MASK, "--api-key"]
    assert container["env"]["AUTH"] == container["env"]["DB_PASS"] == MASK
    assert container["env"]["PLAIN_LOOKING"] == MASK and container["env"]["NCCL_DEBUG"] == "INFO"
    assert main(["plan", str(folder), "--json", "--show-secrets"]) == 0
    shown = capsys.readouterr().out
    assert all(value in shown for value in VALUES)


def test_error_messages_do_not_quote_secrets() -> None:
    with pytest.raises(RecipeError) as err:
        load_recipe_text(recipe_text().replace('API_TOKEN = "042137"', "API_TOKEN = 424242"))
    assert "env.API_TOKEN: expected a string, found an integer (a secret: value not shown)" in str(err.value)
    assert "424242" not in str(err.value)
    with pytest.raises(RecipeError) as err:
        load_recipe_text(recipe_text().replace('"--route", "r-999999"', '"--route", 999999'))
    assert "999999" not in str(err.value) and "args[6]: expected a string" in str(err.value)
    # a lint that quotes a value (the flag given twice) masks it too
    recipe = load_recipe_text(recipe_text())
    dup = [p for p in lint(recipe, local_cluster(1)) if p.code == "duplicate-flag"]
    assert dup and all("sk-live-4242" not in str(p) for p in dup)
    assert MASK in str(dup[0])


def test_events_and_plan_json_are_masked(tmp_path: Path) -> None:
    recipe = load_recipe_text(recipe_text(), tmp_path / "small" / "recipe.toml")
    plan = build_plan(recipe, local_cluster(1))
    run = RunStore(tmp_path / "state").create(recipe.slug)
    run.write_plan(plan)
    run.event("notice", level="error", text="could not start: docker said --api-key sk-live-4242 "
              "and AUTH=auth-value-77", extra=["dbpass-value-88", {"x": "r-999999"}])
    for name in ("plan.json", "events.jsonl"):
        text = (run.dir / name).read_text()
        assert not [v for v in VALUES if v in text], (name, text)
    assert "could not start: docker said --api-key ********" in (run.dir / "events.jsonl").read_text()


def test_plan_key_is_private_and_stable(tmp_path: Path) -> None:
    key = plan_key(tmp_path, "sparks")
    path = tmp_path / "keys" / "sparks.key"
    assert len(key) == 32 and plan_key(tmp_path, "sparks") == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert plan_key(tmp_path, "other") != key
    (tmp_path / "keys" / "evil.key").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError):
        plan_key(tmp_path, "evil")  # a link is not followed, and nothing is written through it
    assert not (tmp_path / "elsewhere").exists()


def test_label_hash_cannot_be_matched_by_trying_a_million_secrets(tmp_path: Path) -> None:
    """Two recipes differ only in a 6-digit secret. Their label hashes differ (a changed secret
    still changes the hash), and none of the 10^6 candidates, hashed the way the label used to
    be computed (the secret in clear inside the hashed JSON), matches: without the cluster key
    there is nothing to test a guess against. With the key, the right secret matches.

    Speed: the hashed JSON is the same text around the secret, so the 10^6 hashes start from a
    saved SHA-256 state of the text before the first occurrence (about 1.5 s in all)."""
    key = plan_key(tmp_path, "local")
    cluster = local_cluster(1)
    secret = "042137"

    def plan_for(value: str, with_key: bytes | None = key):  # type: ignore[no-untyped-def]
        return build_plan(load_recipe_text(recipe_text(value), tmp_path / "small" / "recipe.toml"),
                          cluster, with_key)

    label = plan_for(secret).plan_hash
    assert plan_for("042138").plan_hash != label
    assert plan_for(secret, None).plan_hash == plan_for("042138", None).plan_hash  # no key: ignored

    def clear_text(value: str) -> str:
        """The JSON the old label was taken over: secrets in clear, before the label was set."""
        plan = plan_for(value)
        for r in plan.ranks:
            r.container.labels.pop(LABEL_PLAN)
        return hashed_text(plan.to_json(show_secrets=True))

    # the old label: sha256 over the hashed JSON with every secret in clear
    sentinel = "SENTINEL0SECRET"
    parts = clear_text(sentinel).split(sentinel)
    assert len(parts) == 3  # the env and the docker run line
    head = hashlib.sha256(parts[0].encode())
    rest = [p.encode() for p in parts[1:]]

    def old_label(candidate: bytes) -> str:
        h = head.copy()
        for part in rest:
            h.update(candidate)
            h.update(part)
        return h.hexdigest()[:12]

    assert old_label(secret.encode()) == hashlib.sha256(clear_text(secret).encode()).hexdigest()[:12]
    started = time.monotonic()
    matches = [i for i in range(10**6) if old_label(b"%06d" % i) == label]
    assert matches == [], f"the label gives the secret away: {matches}"
    assert time.monotonic() - started < 30

    # with the key file, the label is what the plan of the right secret hashes to
    assert plan_for(secret, plan_key(tmp_path, "local")).plan_hash == label
    found = [i for i in range(42_000, 42_300) if plan_for(f"{i:06d}").plan_hash == label]
    assert found == [42137]


def test_a_recipe_source_is_shown_with_secret_values_masked_in_place() -> None:
    """The console's recipe pane: each secret value replaced where it stands (the flag of
    ``--hf-token=`` kept), other mentions of a secret masked, every other byte and line kept."""
    text = SMALL.format(secret="tok-123456") + '# rotated from tok-123456 last week\n' \
        'OTHER = """multi\nline"""\n'
    shown = mask_source(text)
    for value in VALUES:
        assert value not in shown, value
    assert "tok-123456" not in shown
    assert shown.count("\n") == text.count("\n")  # the lint's line numbers still point right
    assert 'args = ["--api-key", "********", "--hf-token=********", "--max-total-tokens", "4096",\n' \
           '        "--route", "********", "--api-key", "********"]\n' in shown
    for key in ("AUTH", "DB_PASS", "PLAIN_LOOKING", "API_TOKEN"):
        assert f'\n{key} = "********"\n' in shown
    assert '\nNCCL_DEBUG = "INFO"\n' in shown and "# rotated from ******** last week" in shown
    assert 'OTHER = """multi\nline"""' in shown
    unchanged = "engine = 'sglang'\nmodel = \"org/model\"  # no secret here\n"
    assert mask_source(unchanged) == unchanged


def test_a_source_that_does_not_parse_is_masked_line_by_line() -> None:
    text = ('engine = "sglang" "broken"\nargs = ["--api-key", "sk-99999", "--hf-token=hf_zzzz"]\n'
            'env = { HF_TOKEN = "hf_secret1", PORT = "1" }\nPASSWORD = 12345678\n# was hf_secret1\n')
    shown = mask_source(text)
    assert shown == ('engine = "sglang" "broken"\nargs = ["--api-key", "********", '
                     '"--hf-token=********"]\nenv = { HF_TOKEN = "********", PORT = "1" }\n'
                     'PASSWORD = "********"\n# was ********\n')


def test_a_multiline_secret_keeps_the_line_count() -> None:
    text = 'engine = "sglang"\n[env]\nHF_TOKEN = """\nhf_line_one\nhf_line_two"""\nX = "1"\n'
    shown = mask_source(text)
    assert shown == 'engine = "sglang"\n[env]\nHF_TOKEN = "********"\n\n\nX = "1"\n'
