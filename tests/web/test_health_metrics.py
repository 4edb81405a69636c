"""``/healthz`` and ``/metrics`` on the web server."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.web.conftest import WebGatewayFactory
from tests.web.harness import Running, new_id


async def scrape(gateway: Running) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    async with gateway.http.get(gateway.url + "/metrics") as response:
        assert response.status == 200
        text = await response.text()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_healthz_is_200_when_store_and_adapters_are_up_and_503_without_the_store(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    async with gateway.http.get(gateway.url + "/healthz") as response:
        assert response.status == 200
        body = await response.json()
    assert body["ok"] is True and body["not_ok"] == []
    assert body["platforms"]["web"]["state"] == "up" and body["platforms"]["web"]["reason"] == ""
    await gateway.service.store.close()
    async with gateway.http.get(gateway.url + "/healthz") as response:
        assert response.status == 503
        body = await response.json()
    assert body["not_ok"] == ["store"] and body["store"] == "not answering"


async def test_metrics_parse_and_their_counters_move_when_a_turn_runs(
    web_gateway: WebGatewayFactory,
) -> None:
    gateway = await web_gateway()
    before = await scrape(gateway)
    done = ("commonos_turns_total", (("exit_reason", "text_response"), ("status", "completed")))
    assert before.get(done, 0.0) == 0.0
    conversation = new_id()
    stream = await gateway.events(conversation)
    await gateway.send(conversation, "hello")
    await stream.message_containing("demo")
    await gateway.idle(conversation)
    await stream.close()
    after = await scrape(gateway)
    assert after[done] == 1.0
    assert after[("commonos_inbound_messages_total", (("platform", "web"),))] == 1.0
    assert after[("commonos_outbound_messages_total", (("platform", "web"),))] >= 1.0
    assert after[("commonos_turn_seconds_count", ())] == 1.0
    assert after[("commonos_model_request_seconds_count", (("outcome", "ok"),))] >= 1.0
    assert after[("commonos_queue_depth", ())] == 0.0
