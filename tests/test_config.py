"""Config loading, validation and masking (``gateway.config``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gateway.config import ConfigError, load_config, render_config

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.toml"
PLATFORM_SECRETS = {
    "COMMONOS_TELEGRAM_TOKEN": "123456789:telegram-secret-token",
    "COMMONOS_DISCORD_TOKEN": "discord-secret-token-0123456789",
    "COMMONOS_SLACK_BOT_TOKEN": "xoxb-slack-bot-secret",
    "COMMONOS_SLACK_APP_TOKEN": "xapp-slack-app-secret",
}


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def errors_of(path: Path, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path, env=env or {})
    return caught.value.errors


# the example and the defaults ---------------------------------------------------
def test_example_config_loads_and_validates(tmp_path: Path) -> None:
    config = load_config(EXAMPLE, env={"COMMONOS_HOME": str(tmp_path)})
    assert config.source == EXAMPLE
    assert config.model.provider == "demo"
    assert config.profile().max_iterations == 500
    # the example ships every chat platform disabled; the web chat is on, as by default
    assert config.enabled_platforms() == ["web"]


def test_example_config_with_every_platform_enabled_validates(tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8").replace("enabled = false", "enabled = true")
    config = load_config(write(tmp_path, text), env=PLATFORM_SECRETS)
    assert config.enabled_platforms() == ["telegram", "discord", "slack", "web"]
    assert config.platform("telegram").token == PLATFORM_SECRETS["COMMONOS_TELEGRAM_TOKEN"]
    assert config.platform("slack").app_token == PLATFORM_SECRETS["COMMONOS_SLACK_APP_TOKEN"]
    assert config.platform("web").listen == "127.0.0.1:8765"


def test_no_config_file_gives_builtin_defaults_under_commonos_home(tmp_path: Path) -> None:
    config = load_config(env={"COMMONOS_HOME": str(tmp_path)})
    assert config.source is None
    assert config.gateway.data_dir == tmp_path.resolve()
    assert config.gateway.db_path == tmp_path.resolve() / "commonos.db"
    assert config.model.provider == "demo"
    assert list(config.profiles) == ["default"]
    assert config.profile().max_iterations == 500
    assert config.profile().workspace == tmp_path.resolve() / "workspaces" / "default"


def test_config_toml_in_commonos_home_is_found(tmp_path: Path) -> None:
    path = write(tmp_path, '[gateway]\nlog_level = "debug"\n')
    config = load_config(env={"COMMONOS_HOME": str(tmp_path)})
    assert config.source == path
    assert config.gateway.log_level == "DEBUG"


def test_explicit_path_wins_over_commonos_home(tmp_path: Path) -> None:
    write(tmp_path, '[gateway]\nlog_level = "ERROR"\n')
    explicit = write(tmp_path, '[gateway]\nlog_level = "WARNING"\n', "other.toml")
    config = load_config(explicit, env={"COMMONOS_HOME": str(tmp_path)})
    assert config.gateway.log_level == "WARNING"


def test_relative_paths_start_at_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "SOUL.md").write_text("You are Ada.", encoding="utf-8")
    text = (
        '[gateway]\ndata_dir = "state"\n'
        '[profiles.default]\nsystem_prompt_file = "SOUL.md"\nworkspace = "../work"\n'
    )
    config = load_config(write(tmp_path / "etc", text), env={})
    root = tmp_path.resolve()
    assert config.gateway.data_dir == root / "etc" / "state"
    assert config.profile().system_prompt_file == root / "etc" / "SOUL.md"
    assert config.profile().workspace == root / "work"


def test_profile_becomes_agent_profile_with_soul_text(tmp_path: Path) -> None:
    write(tmp_path, "Be brief.\n", "SOUL.md")
    text = """
[model]
provider = "demo"
model = "base-model"
[profiles.ops]
system_prompt_file = "SOUL.md"
max_iterations = 40
run_budget_seconds = 90
tools = ["terminal"]
busy_policy = "steer"
external_runtime = ["python", "-m", "runtime"]
[gateway]
default_profile = "ops"
"""
    agent = load_config(write(tmp_path, text), env={}).agent_profile()
    assert (agent.name, agent.model, agent.soul) == ("ops", "base-model", "Be brief.\n")
    assert (agent.max_iterations, agent.run_budget_seconds) == (40, 90.0)
    assert agent.tools == ("terminal",)
    assert agent.busy_policy == "steer"
    assert agent.external_runtime == ("python", "-m", "runtime")


# bad configs: each error names the file, the key path and what was expected ------
BAD_CONFIGS = {
    "syntax_error": (
        '[gateway]\nlog_level = "INFO\n',
        "invalid TOML: Illegal character '\\n' (at line 2, column 18)",
    ),
    "unknown_key_with_suggestion": (
        "[profiles.default]\nmax_iteration = 5\n",
        'profiles.default.max_iteration: unknown key (did you mean "max_iterations"?)',
    ),
    "unknown_section_with_suggestion": (
        '[telegarm]\ntoken = "x"\n',
        'telegarm: unknown section (did you mean "telegram"?)',
    ),
    "wrong_type": (
        '[profiles.default]\nmax_iterations = "many"\n',
        'profiles.default.max_iterations: expected a positive integer, got "many" (string)',
    ),
    "array_element_wrong_type": (
        '[profiles.default]\ntools = ["terminal", 3]\n',
        "profiles.default.tools[1]: expected a non-empty string, got 3 (integer)",
    ),
    "unknown_platform_in_access": (
        "[access]\ntelgram = [1]\n",
        'access.telgram: unknown key (did you mean "telegram"?)',
    ),
    "out_of_range": (
        "[profiles.default]\nmax_iterations = -3\n",
        "profiles.default.max_iterations: expected a positive integer, got -3",
    ),
    "bool_is_not_a_number": (
        "[model]\ntimeout = true\n",
        "model.timeout: expected a positive number, got true (boolean)",
    ),
    "not_a_finite_number": (
        "[profiles.default]\napproval_timeout = inf\n",
        "profiles.default.approval_timeout: expected a positive number, got inf",
    ),
    "bad_enum_value": (
        '[profiles.default]\nbusy_policy = "queued"\n',
        'profiles.default.busy_policy: expected one of "queue", "interrupt", "steer", '
        'got "queued" (string) (did you mean "queue"?)',
    ),
    "missing_secret_names_env_var": (
        "[telegram]\n",
        "telegram.token: missing secret: set token here or the env var COMMONOS_TELEGRAM_TOKEN",
    ),
    "openai_without_api_key": (
        '[model]\nprovider = "openai"\n',
        'model.api_key: missing secret for provider = "openai": '
        "set api_key here or the env var COMMONOS_MODEL_API_KEY",
    ),
    "unknown_default_profile": (
        '[gateway]\ndefault_profile = "main"\n[profiles.default]\n[profiles.ops]\n',
        'gateway.default_profile: unknown profile "main"; defined profiles: default, ops',
    ),
    "missing_soul_file": (
        '[profiles.default]\nsystem_prompt_file = "nowhere/SOUL.md"\n',
        "profiles.default.system_prompt_file: file not found: {dir}/nowhere/SOUL.md",
    ),
    "slack_http_mode_without_signing_secret": (
        '[slack]\nbot_token = "xoxb-1"\nmode = "http"\n',
        'slack.signing_secret: missing secret (mode = "http"): '
        "set signing_secret here or the env var COMMONOS_SLACK_SIGNING_SECRET",
    ),
    "webhook_without_url": (
        '[telegram]\ntoken = "t"\nmode = "webhook"\nwebhook_secret = "s3cret"\n',
        'telegram.webhook_url: required when mode = "webhook"',
    ),
    "webhook_without_secret_token": (
        '[telegram]\ntoken = "t"\nmode = "webhook"\nwebhook_url = "https://bot.example/tg"\n',
        "telegram.webhook_secret: missing secret: "
        "set webhook_secret here or the env var COMMONOS_TELEGRAM_WEBHOOK_SECRET",
    ),
    "bad_listen_address": (
        '[web]\nlisten = "8080"\n',
        'web.listen: expected "host:port" (e.g. "127.0.0.1:8080"), got "8080"',
    ),
    "section_is_not_a_table": (
        'progress = "all"\n',
        'progress: expected a table, got "all" (string)',
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_gives_one_precise_error(tmp_path: Path, case: str) -> None:
    text, message = BAD_CONFIGS[case]
    path = write(tmp_path, text)
    expected = f"{path}: " + message.format(dir=tmp_path.resolve())
    assert errors_of(path) == [expected]


def test_every_error_is_reported_not_only_the_first(tmp_path: Path) -> None:
    text = '[gateway]\nlog_level = "LOUD"\n[progress]\nmode = "some"\nclean_up = true\n'
    errors = errors_of(write(tmp_path, text))
    assert [e.split(": ")[1] for e in errors] == [
        "gateway.log_level",
        "progress.mode",
        "progress.clean_up",
    ]


def test_missing_config_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    assert errors_of(path) == [f"{path}: config file not found"]


# secrets from the environment ----------------------------------------------------
def test_env_secret_overrides_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, '[telegram]\ntoken = "from-file"\n')
    assert load_config(path, env={}).platform("telegram").token == "from-file"
    config = load_config(path, env={"COMMONOS_TELEGRAM_TOKEN": "from-env"})
    assert config.platform("telegram").token == "from-env"


def test_model_api_key_from_env_selects_the_openai_provider(tmp_path: Path) -> None:
    config = load_config(env={"COMMONOS_HOME": str(tmp_path), "COMMONOS_MODEL_API_KEY": "sk-1"})
    assert (config.model.provider, config.model.api_key) == ("openai", "sk-1")
    assert config.profile().model == "gpt-4o-mini"


def test_openai_api_key_is_only_a_fallback_for_an_explicit_openai_provider(
    tmp_path: Path,
) -> None:
    home = {"COMMONOS_HOME": str(tmp_path), "OPENAI_API_KEY": "sk-openai"}
    assert load_config(env=home).model.provider == "demo"
    path = write(tmp_path, '[model]\nprovider = "openai"\n')
    assert load_config(path, env=home).model.api_key == "sk-openai"
    preferred = {**home, "COMMONOS_MODEL_API_KEY": "sk-commonos"}
    assert load_config(path, env=preferred).model.api_key == "sk-commonos"


def test_disabled_platform_needs_no_secret(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "[slack]\nenabled = false\n"), env={})
    assert config.platform("slack") is None
    assert "slack" in config.sections  # still shown by check-config


def test_user_ids_accept_integers_and_merge_with_platform_sections(tmp_path: Path) -> None:
    text = """
[approvals]
telegram = [123]
[access]
telegram = ["789"]
[telegram]
token = "t"
approvers = ["456"]
allowed_users = [1000]
"""
    config = load_config(write(tmp_path, text), env={})
    assert config.approvers("telegram") == {"123", "456"}
    assert config.allowed_users("telegram") == {"789", "1000"}
    assert config.allowed_users("discord") == frozenset()  # default deny


WILDCARD_APPROVERS = 'approvers must be explicit user ids; "*" would let anyone approve'


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[approvals]\ntelegram = ["123", "*"]\n', "approvals.telegram"),
        ('[telegram]\ntoken = "t"\napprovers = ["*"]\n', "telegram.approvers"),
        ('[discord]\ntoken = "t"\napprovers = ["*"]\n', "discord.approvers"),
        ('[slack]\nbot_token = "b"\napp_token = "a"\napprovers = ["1", "*"]\n', "slack.approvers"),
    ],
)
def test_a_wildcard_in_approvers_is_rejected(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    assert errors_of(path) == [f"{path}: {key}: {WILDCARD_APPROVERS}"]


def test_a_wildcard_is_still_allowed_in_access(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[access]\ndiscord = ["*"]\n'), env={})
    assert config.allowed_users("discord") == {"*"}


# showing the config ---------------------------------------------------------------
def test_rendered_config_masks_secrets_and_parses_as_toml(tmp_path: Path) -> None:
    text = EXAMPLE.read_text(encoding="utf-8").replace("enabled = false", "enabled = true")
    secrets = {**PLATFORM_SECRETS, "COMMONOS_MODEL_API_KEY": "sk-model-secret-key-abcdef"}
    config = load_config(write(tmp_path, text), env=secrets)
    rendered = render_config(config)
    for secret in secrets.values():
        assert secret not in rendered
    assert 'api_key = "sk…ef"' in rendered
    shown = tomllib.loads(rendered)
    assert shown["profiles"]["default"]["max_iterations"] == 500
    assert shown["telegram"]["token"] == "12…en"


def test_rendered_config_masks_credential_headers(tmp_path: Path) -> None:
    text = '[model]\nheaders = { Authorization = "Bearer abcdefghijklmnop", X-Title = "me" }\n'
    rendered = render_config(load_config(write(tmp_path, text), env={}))
    assert "abcdefghijklmnop" not in rendered
    assert 'headers = { Authorization = "Be…op", X-Title = "me" }' in rendered


def test_rendered_config_shows_the_store_url_without_its_password(tmp_path: Path) -> None:
    url = "postgresql://commonos:hunter2-not-shown@db.example:5432/commonos"
    text = '[cluster]\nlease_seconds = 4\n[telemetry]\notlp_endpoint = "http://127.0.0.1:4318"\n'
    rendered = render_config(load_config(write(tmp_path, text), env={"COMMONOS_STORE_URL": url}))
    assert "hunter2-not-shown" not in rendered
    assert 'url = "postgresql://commonos:***@db.example:5432/commonos"' in rendered
    assert "# database: PostgreSQL postgresql://commonos:***@db.example:5432/commonos" in rendered
    shown = tomllib.loads(rendered)
    assert shown["cluster"]["lease_seconds"] == 4.0
    assert shown["telemetry"]["otlp_endpoint"].startswith("http://127.0.0.1:4318")


def test_a_store_url_that_is_not_postgresql_is_refused_without_its_password(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, '[store]\nurl = "mysql://root:topsecret@db/x"\n')
    [error] = errors_of(path)
    assert "topsecret" not in error
    assert error.startswith(f"{path}: store.url: expected a postgresql://")


def test_progress_becomes_the_reply_by_default_and_both_settings_are_read(tmp_path: Path) -> None:
    assert load_config(env={"COMMONOS_HOME": str(tmp_path)}).progress.becomes_reply is True
    text = "[progress]\nbecomes_reply = false\nnew_message_after = 30\n"
    progress = load_config(write(tmp_path, text), env={}).progress
    assert (progress.becomes_reply, progress.new_message_after) == (False, 30.0)
