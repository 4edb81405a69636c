"""Per-chat settings (``/model``, ``/busy``, ``/progress``, ``/verbose``) through the
router on real parts (SQLite, CommonAgent, the Dispatcher), and ``[models.<name>]``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.agent.control import TurnControl
from core.agent.turn import UserMessage
from core.store.sqlite import SqliteStore, open_store
from gateway.config import ConfigError, load_config, parse_config
from gateway.turns.presets import ModelPreset, ModelPresets
from gateway.turns.settings import VERBOSE_PREVIEW, SessionSettingsBook
from gateway.wiring import build_service, demo_model
from tests.gateway.fakes import ScriptedModel, Step, event
from tests.gateway.harness import ALICE, CAROL, Gateway, GatewayFactory
from tests.support.model_server import ScriptedModelServer, reply_text

KEY = "test:dm:1"
LONG = "echo " + "x" * 100


class NamedModel(ScriptedModel):
    """A scripted model serving under its own name (a preset's client)."""

    def __init__(self, name: str, *steps: Step) -> None:
        super().__init__(*steps)
        self.name = name

    @property
    def model(self) -> str:
        return self.name


def with_presets(gw: Gateway, *presets: ModelPreset) -> None:
    """The presets set on a running gateway, as if configured: the service gives its
    agents the settings' model chooser only when presets exist, so they get it here too."""
    service = gw.service
    service.settings.presets = ModelPresets(presets)
    for agent in service.agents.values():
        agent.choose_model = service.settings.choose


async def said(gw: Gateway, text: str) -> str:
    await gw.say(ALICE, text)
    return gw.adapter.texts()[-1]


async def test_model_lists_the_presets_with_the_current_one_marked(
    running: GatewayFactory,
) -> None:
    async with running() as gw:
        with_presets(
            gw,
            ModelPreset("fast", NamedModel("small-1")),
            ModelPreset("big", NamedModel("large-2"), owners_only=True),
        )
        listing = await said(gw, "/model")
        assert listing.splitlines() == [
            "🧠 Models (/model NAME to switch):",
            "▶ default — scripted",
            "• fast — small-1",
            "• big — large-2 (owners only)",
        ]
        await said(gw, "/model fast")
        assert "▶ fast — small-1" in await said(gw, "/model")


async def test_model_name_takes_effect_from_the_next_model_call_of_a_running_turn(
    running: GatewayFactory,
) -> None:
    fast = NamedModel("small-1", Step("answered by the preset"))
    async with running(Step(tools=(("slow", {}),))) as gw:
        with_presets(gw, ModelPreset("fast", fast))
        await gw.say(ALICE, "work")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        assert "from the next model call" in await said(gw, "/model fast")
        gw.gate.set()
        await gw.adapter.wait_for(lambda: "answered by the preset" in gw.adapter.texts())
        assert len(gw.model.requests) == 1 and len(fast.requests) == 1


async def test_model_default_returns_to_the_profile_model(running: GatewayFactory) -> None:
    fast = NamedModel("small-1", Step("fast"))
    async with running(Step("profile's")) as gw:
        with_presets(gw, ModelPreset("fast", fast))
        await said(gw, "/model fast")
        assert "back to the default (scripted)" in await said(gw, "/model default")
        await gw.say(ALICE, "hi")
        await gw.adapter.wait_for(lambda: "profile's" in gw.adapter.texts())
        assert fast.requests == []


async def test_an_unknown_model_lists_the_valid_ones_and_changes_nothing(
    running: GatewayFactory,
) -> None:
    async with running() as gw:
        with_presets(gw, ModelPreset("fast", NamedModel("small-1")))
        answer = await said(gw, "/model gpt-9")
        assert answer == "Unknown model 'gpt-9'. Valid: default, fast."
        assert (await gw.store.session_settings(str(event(ALICE).session_key))).model is None


async def test_an_owners_only_preset_is_refused_to_others_and_allowed_to_an_owner(
    running: GatewayFactory,
) -> None:
    async with running() as gw:
        with_presets(gw, ModelPreset("big", NamedModel("large-2"), owners_only=True))
        assert (await said(gw, "/model big")).startswith("Only an owner may switch to 'big'.")
        await gw.say(CAROL, "/model big")
        assert gw.adapter.texts()[-1].startswith("🧠 Model: big (large-2)")


@pytest.mark.parametrize(
    ("command", "answer"),
    [
        ("/busy loud", "Use /busy queue | interrupt | steer (now: default)."),
        ("/busy", "Use /busy queue | interrupt | steer (now: default)."),
        ("/progress some", "Use /progress all | tools | off (now: default)."),
        ("/verbose yes", "Use /verbose on | off (now: default)."),
    ],
)
async def test_a_bad_value_gets_one_clear_line(
    running: GatewayFactory, command: str, answer: str
) -> None:
    async with running() as gw:
        assert await said(gw, command) == answer


async def test_busy_interrupt_makes_a_second_message_interrupt(running: GatewayFactory) -> None:
    async with running(Step(tools=(("slow", {}),)), Step("the second one")) as gw:
        assert "stop the running turn" in await said(gw, "/busy interrupt")
        await gw.say(ALICE, "first")
        await asyncio.wait_for(gw.tool_started.wait(), 5)
        await gw.say(ALICE, "second")
        await gw.adapter.wait_for(lambda: "the second one" in gw.adapter.texts())
        assert gw.ran == []  # the slow tool was stopped, never finished


async def test_progress_off_sends_no_progress_message(running: GatewayFactory) -> None:
    async with running(Step(tools=(("echo", {"text": "a"}),)), Step("done")) as gw:
        await said(gw, "/progress off")
        await gw.say(ALICE, "go")
        await gw.adapter.wait_for(lambda: "done" in gw.adapter.texts())
        await gw.idle()
        assert not any("echo" in text for text in gw.adapter.texts())


async def test_progress_tools_shows_a_line_each_time_the_tool_changes(
    running: GatewayFactory,
) -> None:
    steps = [Step(tools=(("echo", {"text": t}),)) for t in ("a", "b")]
    async with running(*steps, Step("done")) as gw:
        await said(gw, "/progress tools")
        await gw.say(ALICE, "go")
        await gw.adapter.wait_for(lambda: "done" in gw.adapter.texts())
        await gw.idle()
        shown = [c.text for c in gw.adapter.calls if "echo" in (c.text or "")][-1]
        assert shown.count("echo") == 1 and "echo: b (×2)" in shown  # repeats counted


@pytest.mark.parametrize(("word", "shown"), [("off", "echo"), ("on", LONG[:VERBOSE_PREVIEW])])
async def test_verbose_decides_how_much_of_the_arguments_progress_shows(
    running: GatewayFactory, word: str, shown: str
) -> None:
    async with running(Step(tools=(("echo", {"text": LONG}),)), Step("done")) as gw:
        await said(gw, f"/verbose {word}")
        await gw.say(ALICE, "go")
        await gw.adapter.wait_for(lambda: "done" in gw.adapter.texts())
        await gw.idle()
        line = [c.text for c in gw.adapter.calls if "echo" in (c.text or "")][-1].splitlines()[0]
        assert line.endswith(shown)


async def test_status_shows_the_settings_made(running: GatewayFactory) -> None:
    async with running() as gw:
        with_presets(gw, ModelPreset("fast", NamedModel("small-1")))
        assert await said(gw, "/status") == "💤 Idle"
        for command in ("/model fast", "/busy steer", "/progress tools", "/verbose on"):
            await said(gw, command)
        status = await said(gw, "/status")
        assert status == (
            "💤 Idle · model fast (small-1) · busy steer · progress tools · verbose on"
        )


async def test_settings_are_kept_in_the_store_across_restarts(tmp_path: Path) -> None:
    presets = ModelPresets([ModelPreset("fast", NamedModel("small-1"))])
    store = await open_store(tmp_path / "s.db")
    await SessionSettingsBook(store, presets).change("fake:dm:1", model="fast", verbose=False)
    await store.close()
    store = await open_store(tmp_path / "s.db")
    try:
        book = SessionSettingsBook(store, presets)
        choice = await book.choose("fake:dm:1")
        assert choice is not None and choice.client.model == "small-1"
        assert (await book.choose("fake:dm:1/child:t:c")) == choice  # a child: its parent's
        assert (await book.load("fake:dm:1")).verbose is False
    finally:
        await store.close()


async def test_a_stored_preset_no_longer_configured_falls_back_to_the_profile(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path / "s.db")
    try:
        await SessionSettingsBook(store, ModelPresets()).change("fake:dm:1", model="gone")
        assert await SessionSettingsBook(store, ModelPresets()).choose("fake:dm:1") is None
    finally:
        await store.close()


# [models.<name>] ------------------------------------------------------------------------
def test_a_preset_reads_its_api_key_from_the_env_var_it_names() -> None:
    data = {"models": {"fast": {"model": "small-1", "api_key_env": "FAST_KEY", "vision": True}}}
    config = parse_config(data, None, {"FAST_KEY": "sk-fast"})
    preset = config.models["fast"]
    assert (preset.model, preset.api_key, preset.vision, preset.stream) == (
        "small-1", "sk-fast", True, True,
    )  # fmt: skip
    assert preset.base_url == config.model.base_url
    assert "sk-fast" in config.secrets()


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"default": {"model": "x"}}, 'models.default: "default" is the profile\'s own model'),
        ({"x": {"model": "m", "api_key": "k"}}, "models.x.api_key: set api_key_env"),
        ({"x": {"model": "m", "api_key_env": "NOPE"}}, "models.x.api_key_env: the env var NOPE"),
        (
            {"x": {"model": "m", "viison": True}},
            'models.x.viison: unknown key (did you mean "vision"?)',
        ),
    ],
)
def test_a_bad_preset_is_one_readable_line(table: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config({"models": table}, None, {})
    assert problem in str(raised.value)


async def test_a_configured_preset_reaches_the_model_server_with_its_name_and_key(
    tmp_path: Path, model_server: ScriptedModelServer, store: SqliteStore
) -> None:
    """From ``config.toml`` through :func:`gateway.wiring.build_service`."""
    path = tmp_path / "config.toml"
    path.write_text(
        f'[gateway]\ndata_dir = "{tmp_path / "data"}"\n\n'
        f'[models.fast]\nbase_url = "{model_server.url}"\nmodel = "small-1"\n'
        'api_key_env = "FAST_KEY"\nstream = false\n',
        encoding="utf-8",
    )
    config = load_config(path, env={"COMMONOS_HOME": str(tmp_path), "FAST_KEY": "sk-fast"})
    model_server.script(reply_text("fast answer"))
    service = build_service(config, store, demo_model())
    try:
        await service.settings.change(KEY, model="fast")
        agent = service.agent_for(KEY)
        await agent.run_turn(KEY, UserMessage("hi", sender_id="alice"), TurnControl())
    finally:
        await service.settings.presets.aclose()
    [request] = model_server.requests
    assert request.body["model"] == "small-1"
    assert request.headers["Authorization"] == "Bearer sk-fast"
