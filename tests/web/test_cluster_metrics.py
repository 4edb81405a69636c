"""The cluster figures of ``/metrics`` (docs/cluster.md, "Watching it"): read from the
process's :class:`ClusterStats` at each scrape, absent while there is none (SQLite, or the
node not started); and scraped from a real ``commonos run`` process on PostgreSQL that owns
a Telegram bot."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from gateway.cluster.stats import ClusterStats
from gateway.web.metrics import CLUSTER_COUNTERS, GatewayMetrics
from tests.cluster.harness import eventually, running_cluster
from tests.cluster.processes import cluster_config, telegram_section
from tests.platform_sim.telegram_sim import TelegramSim
from tests.support.model_server import ScriptedModelServer
from tests.support.postgres import free_port

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

BOT = "bot:telegram:0123456789ab"


def scrape(metrics: GatewayMetrics) -> Samples:
    """What ``/metrics`` answers (its body is ``exposition()``), parsed."""
    return parse(metrics.exposition().decode())


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def cluster_names(samples: Samples) -> set[str]:
    return {name for name, _labels in samples if name.startswith("commonos_cluster_")}


def test_cluster_figures_are_read_from_the_stats_at_each_scrape() -> None:
    metrics = GatewayMetrics()
    now: list[ClusterStats | None] = [None]
    metrics.watch_cluster(lambda: now[0])
    assert cluster_names(scrape(metrics)) == set()

    now[0] = ClusterStats(
        "node-a/1a2b3c4d", live_processes=2, bots_owned=(BOT, "bot:slack:ba9876543210"),
        sessions_held=3, lease_renewals=40, leases_lost=1, takeovers=2, events_forwarded=5,
        events_received=6, calls_relayed=7, calls_served=8, mail_reconnects=1,
        last_renewal_age=1.5,
    )  # fmt: skip
    first = scrape(metrics)
    assert first[("commonos_cluster_process", (("id", "node-a/1a2b3c4d"),))] == 1.0
    assert first[("commonos_cluster_live_processes", ())] == 2.0
    assert first[("commonos_cluster_bots_owned", ())] == 2.0
    assert first[("commonos_cluster_bot_owned", (("bot", BOT),))] == 1.0
    assert first[("commonos_cluster_bot_owned", (("bot", "bot:slack:ba9876543210"),))] == 1.0
    assert first[("commonos_cluster_sessions_held", ())] == 3.0
    assert first[("commonos_cluster_last_renewal_age_seconds", ())] == 1.5
    expected = {"lease_renewals": 40, "leases_lost": 1, "takeovers": 2, "events_forwarded": 5,
                "events_received": 6, "calls_relayed": 7, "calls_served": 8,
                "mail_reconnects": 1}  # fmt: skip
    assert {name for name, _doc in CLUSTER_COUNTERS} == set(expected)
    for name, value in expected.items():
        assert first[(f"commonos_cluster_{name}_total", ())] == float(value), name

    now[0] = ClusterStats("node-a/1a2b3c4d", live_processes=1, lease_renewals=41, leases_lost=2)
    second = scrape(metrics)
    assert second[("commonos_cluster_lease_renewals_total", ())] == 41.0
    assert second[("commonos_cluster_leases_lost_total", ())] == 2.0
    assert second[("commonos_cluster_bots_owned", ())] == 0.0
    assert not any(name == "commonos_cluster_bot_owned" for name, _labels in second)

    now[0] = None
    assert cluster_names(scrape(metrics)) == set()


def test_a_gateway_not_watching_a_cluster_has_no_cluster_figures() -> None:
    samples = scrape(GatewayMetrics())
    assert cluster_names(samples) == set()
    assert ("commonos_queue_depth", ()) in samples


async def test_a_process_on_postgresql_exposes_its_part_in_the_cluster(
    pg_url: str, telegram_sim: TelegramSim, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    listen = f"127.0.0.1:{free_port()}"
    config = cluster_config(pg_url, model_server.url, telegram_section(telegram_sim, [42]))
    config = config.replace("[web]\nenabled = false", f'[web]\nlisten = "{listen}"')
    assert f'listen = "{listen}"' in config
    async with (
        running_cluster(pg_url, tmp_path, config) as cluster,
        aiohttp.ClientSession() as http,
    ):
        gateway = await cluster.start("a")
        lease = await cluster.bot_owner("telegram")
        assert lease.owner == gateway.process_id

        async def renewed() -> Samples | None:
            async with http.get(f"http://{listen}/metrics") as response:
                assert response.status == 200
                samples = parse(await response.text())
            renewals = samples.get(("commonos_cluster_lease_renewals_total", ()), 0.0)
            live = samples.get(("commonos_cluster_live_processes", ()), 0.0)
            return samples if renewals >= 1 and live >= 1 else None

        samples = await cluster.expect(eventually(renewed, 30.0, "a tick done"), "/metrics")
    assert samples[("commonos_cluster_process", (("id", gateway.process_id),))] == 1.0
    assert samples[("commonos_cluster_bot_owned", (("bot", lease.name),))] == 1.0
    assert samples[("commonos_cluster_bots_owned", ())] == 1.0
    assert samples[("commonos_cluster_live_processes", ())] == 1.0
    assert samples[("commonos_cluster_takeovers_total", ())] == 0.0
    assert 0.0 <= samples[("commonos_cluster_last_renewal_age_seconds", ())] < 30.0
