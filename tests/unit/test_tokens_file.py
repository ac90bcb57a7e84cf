"""tokens.toml ([auth] tokens_file): what parses, what is refused and how the message says so; token create."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raftsched.cluster.app.main import main
from raftsched.cluster.node.config import ConfigError
from raftsched.rpc.server.tokens import load_tokens, new_token, parse_tokens, token_digest, token_entry

pytestmark = pytest.mark.unit

H1 = token_digest("one").hex()
H2 = token_digest("two").hex()


def test_a_full_file_parses() -> None:
    table = parse_tokens(
        f"""
[[token]]
name = "alice"
sha256 = "{H1}"
roles = ["submitter", "reader"]
queues = ["reports"]
types = ["shell", "noop"]

[[token]]
name = "w1"
sha256 = "{H2.upper()}"
roles = ["executor"]
"""
    )
    alice, w1 = table.tokens
    assert alice.name == "alice" and alice.roles == {"submitter", "reader"} and alice.queues == {"reports"}
    assert alice.types == {"shell", "noop"} and w1.queues == frozenset() and w1.types == frozenset()
    assert table.find("one") is alice and table.find("two") is w1 and table.find("three") is None


def _entry(**keys: str) -> str:
    base = {"name": '"alice"', "sha256": f'"{H1}"', "roles": '["reader"]'}
    base.update(keys)
    return "[[token]]\n" + "".join(f"{k} = {v}\n" for k, v in base.items() if v != "")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("[[token", "not valid TOML"),
        ("", "no \\[\\[token\\]\\] table"),
        ("[other]\nx = 1\n", "unknown key\\(s\\) other"),
        (_entry(name=""), "1: name must be"),
        (_entry(name='"has space"'), "name must be 1-128"),
        (_entry(sha256='"abc"'), "'alice'.*sha256 must be the 64 hex digits"),
        (_entry(sha256=""), "'alice'.*sha256 must be"),
        (_entry(roles=""), "'alice'.*roles is missing"),
        (_entry(roles="[]"), "'alice'.*roles is empty"),
        (_entry(roles='["root"]'), "'alice'.*unknown roles 'root'; use reader, submitter, executor, admin"),
        (_entry(roles='"reader"'), "'alice'.*roles must be a list"),
        (_entry(queues='["ok", ""]'), "'alice'.*queues must be a list of non-empty strings"),
        (_entry(types="3"), "'alice'.*types must be a list"),
        (_entry(colour='"red"'), "'alice'.*unknown key\\(s\\) colour"),
        (_entry(token='"the-secret"'), "'alice' holds the token itself: store only its sha256"),
        (_entry() + _entry(sha256=f'"{H2}"'), "'alice'.*share one name"),
        (_entry() + _entry(name='"bob"'), "'alice', 'bob' share one sha256"),
    ],
)
def test_bad_files_are_refused_naming_file_entry_and_key(text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        parse_tokens(text, "/etc/raftsched/tokens.toml")
    assert str(info.value).startswith("/etc/raftsched/tokens.toml")


def test_a_name_with_a_slash_is_refused() -> None:
    """An executor token acts as its name and name/<anything>: a '/' in a name would be another token's ground."""
    with pytest.raises(ConfigError, match="name 'ci/prod' holds '/'") as info:
        parse_tokens(_entry(name='"ci/prod"'), "tokens.toml")
    assert "use - or . instead" in str(info.value)


def test_a_name_that_another_token_could_act_as_is_refused_naming_both() -> None:
    text = _entry(name='"ci"') + _entry(name='"ci/prod"', sha256=f'"{H2}"')
    with pytest.raises(ConfigError, match="token 'ci' could act as executor 'ci/prod', the name of another token"):
        parse_tokens(text, "tokens.toml")
    table = parse_tokens(_entry(name='"ci"') + _entry(name='"ci-prod"', sha256=f'"{H2}"'), "tokens.toml")
    assert [t.name for t in table.tokens] == ["ci", "ci-prod"]  # a name that only starts with another's is fine


def test_token_create_refuses_a_name_with_a_slash() -> None:
    with pytest.raises(ConfigError, match="holds '/'"):
        token_entry("team/ci", "s3cret-token-value", ["executor"])


def test_a_tokens_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(_entry())
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="tokens_file .* readable by other users .* chmod 600"):
        load_tokens(str(path))
    os.chmod(path, 0o600)
    assert load_tokens(str(path)).tokens[0].name == "alice"
    with pytest.raises(ConfigError, match="cannot read \\[auth\\] tokens_file .*missing"):
        load_tokens(str(tmp_path / "missing"))


def test_an_entry_made_for_a_token_lets_that_token_in() -> None:
    secret = new_token()
    assert len(secret) > 40 and secret != new_token()
    text = token_entry("w1", secret, ["executor"], ["reports"], [])
    (token,) = parse_tokens(text).tokens
    assert token.name == "w1" and token.queues == {"reports"} and secret not in text
    assert parse_tokens(text).find(secret) == token


def test_token_create_prints_the_secret_once_and_an_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cmd = ["token", "create", "--name", "alice", "--role", "submitter"]
    assert main([*cmd, "--queue", "reports"]) == 0
    out = capsys.readouterr()
    secret, entry = out.out.split("\n", 1)
    assert "shown only this once" in out.err
    assert parse_tokens(entry).find(secret).queues == {"reports"}  # type: ignore[union-attr]
    target = tmp_path / "alice.token"
    assert main([*cmd, "--out", str(target)]) == 0
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert parse_tokens(capsys.readouterr().out).find(target.read_text().strip()) is not None
    assert main([*cmd, "--out", str(target)]) == 2
    assert "must not exist yet" in capsys.readouterr().err
