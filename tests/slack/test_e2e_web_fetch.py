"""``web_fetch`` through the real turn loop on Slack, composed by the wiring from a
``[web_tools]`` table (README "Web tools"): the model asks for a local page (``allow_hosts``
names 127.0.0.1), the page's text reaches the model wrapped as untrusted, and the answer
arrives."""

from __future__ import annotations

from core.tools.web_fetch import UNTRUSTED_CLOSE, UNTRUSTED_OPEN
from tests.platform_sim.slack_sim import ALICE, SlackSim
from tests.slack.conftest import GatewayFactory
from tests.support.model_replies import reply_text, reply_tool_call
from tests.support.model_server import ScriptedModelServer
from tests.web_tools.site import LocalSite


async def test_the_model_fetches_a_local_page_marked_untrusted_and_answers(
    slack_gateway: GatewayFactory, slack_sim: SlackSim, model_server: ScriptedModelServer
) -> None:
    async with LocalSite() as site:
        model_server.script(
            reply_tool_call("web_fetch", {"url": f"{site.url}/page"}),
            reply_text("rustdoc documents Rust code"),
        )
        web_tools = {"allow_hosts": ["127.0.0.1"], "respect_robots": False}
        run = await slack_gateway(
            "socket", profile={"tools": ["web_fetch"]}, sections={"web_tools": web_tools}
        )
        dm = slack_sim.dm_channel(ALICE)
        await slack_sim.user_says(dm, "what is rustdoc?")
        await slack_sim.wait_for_bot_message(dm, lambda m: m.text == "rustdoc documents Rust code")
        await run.idle(f"slack:dm:{dm}")
    assert site.paths() == ["/page"]
    first, second = model_server.requests
    assert [t["function"]["name"] for t in first.body["tools"]] == ["web_fetch"]
    result = str(second.messages[-1]["content"])
    assert second.messages[-1]["role"] == "tool"
    assert UNTRUSTED_OPEN in result and UNTRUSTED_CLOSE in result
    assert "What is rustdoc?" in result
