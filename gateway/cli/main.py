"""The ``commonos`` command line: ``run``, ``chat``, ``check-config``, ``inbox dead``,
``inbox drop ID``, ``pair list | approve CODE | revoke PLATFORM:USER`` (docs/pairing.md),
``status`` (the processes sharing the store, docs/cluster.md), ``memory export PERSON |
add --profile NAME TEXT`` (:mod:`gateway.cli.memory`), ``jobs list | pause ID | delete
ID`` (:mod:`gateway.cli.jobs`), ``usage [--since DATE]`` (:mod:`gateway.cli.usage`),
``--version``.

Exit codes: 0 success (``run``: stopped by SIGINT/SIGTERM), 1 a problem the user can fix
(bad config, store unusable) reported as one line per cause on stderr, 2 bad usage
(``status``: also a store it cannot reach or read).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import core
from gateway.cli import jobs as jobs_cli
from gateway.cli import memory as memory_cli
from gateway.cli import usage as usage_cli
from gateway.cli.console import configure_logging, fail

if TYPE_CHECKING:
    from gateway.config import Config

# Everything heavier (the platform SDKs, aiohttp, the store) is imported by the command
# that needs it, so `commonos --help` and `check-config` stay fast.

log = logging.getLogger("gateway")


def version() -> str:
    return core.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="commonos", description="Run a tool-using AI agent from chat platforms."
    )
    parser.add_argument("--version", action="version", version=f"commonos {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    run = commands.add_parser("run", help="start the gateway (stop with Ctrl-C or SIGTERM)")
    _config_option(run)
    run.set_defaults(handler=run_command)
    chat = commands.add_parser(
        "chat", help="chat with the agent in this terminal (Ctrl-C stops a turn, twice quits)"
    )
    _config_option(chat)
    chat.set_defaults(handler=chat_command)
    check = commands.add_parser("check-config", help="validate a config and show it, masked")
    check.add_argument("path", nargs="?", type=Path, help="config file to check")
    _config_option(check)
    check.set_defaults(handler=check_config_command)
    _inbox_commands(commands)
    _pair_commands(commands)
    status = commands.add_parser(
        "status", help="the processes sharing the store, their leases and running turns"
    )
    _config_option(status)
    status.set_defaults(handler=status_command)
    mcp = commands.add_parser("mcp", help="the configured MCP servers")
    mcp_actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    listed = mcp_actions.add_parser("list", help="connect to each server; its state and tools")
    _config_option(listed)
    listed.set_defaults(handler=mcp_command)
    memory_cli.register(commands, _config_option)
    jobs_cli.register(commands, _config_option)
    usage_cli.register(commands, _config_option)
    return parser


def _pair_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    pair = commands.add_parser("pair", help="let strangers in: pairing codes (docs/pairing.md)")
    actions = pair.add_subparsers(dest="pair_command", metavar="ACTION", required=True)
    listed = actions.add_parser("list", help="who waits for approval, who is paired")
    _config_option(listed)
    listed.set_defaults(handler=pair_command, pair_action="list", pair_value="")
    approve = actions.add_parser("approve", help="let in the user who got this code")
    approve.add_argument("pair_value", metavar="CODE", help="the code they got (ABCD-EFGH)")
    _config_option(approve)
    approve.set_defaults(handler=pair_command, pair_action="approve")
    revoke = actions.add_parser("revoke", help="take a paired user's access away")
    revoke.add_argument("pair_value", metavar="PLATFORM:USER", help="e.g. telegram:12345")
    _config_option(revoke)
    revoke.set_defaults(handler=pair_command, pair_action="revoke")


def _inbox_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    inbox = commands.add_parser("inbox", help="inbound items the gateway could not take in")
    actions = inbox.add_subparsers(dest="inbox_command", metavar="ACTION", required=True)
    dead = actions.add_parser("dead", help="list dead letters (quarantined updates)")
    _config_option(dead)
    dead.set_defaults(handler=inbox_dead_command)
    drop = actions.add_parser("drop", help="remove one dead letter by its id")
    drop.add_argument("id", help="the dead letter's id (first column of `inbox dead`)")
    _config_option(drop)
    drop.set_defaults(handler=inbox_drop_command)


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="PATH",
        help="config file (default: $COMMONOS_HOME/config.toml if it exists, else defaults)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.handler(args)
    except KeyboardInterrupt:  # Ctrl-C before the loop's own signal handler is installed
        return 130
    return code


def check_config_command(args: argparse.Namespace) -> int:
    from gateway.config import ConfigError, load_config
    from gateway.config.render import render_config, warnings

    if args.path is not None and args.config is not None and args.path != args.config:
        print(
            "commonos: give the config file once: PATH or --config PATH, not both", file=sys.stderr
        )
        return 2
    try:
        config = load_config(args.path or args.config)
    except ConfigError as exc:
        return fail([*exc.errors, f"config is invalid ({len(exc.errors)} error(s))"])
    sys.stdout.write(render_config(config))
    print(f"\n# inbound stages: {' -> '.join(inbound_stages(config))}")
    for warning in warnings(config):
        print(f"commonos: warning: {warning}", file=sys.stderr)
    return 0


def inbound_stages(config: Config) -> tuple[str, ...]:
    """The inbound fold this config makes (:mod:`gateway.inbound.stages`): link_rekey when
    two platforms or more are on or the store is PostgreSQL (a link already stored also
    turns it on at start)."""
    from gateway.inbound.stages import InboundFeatures

    sections = [config.platform(name) for name in config.enabled_platforms()]
    cluster = config.store.postgres
    return InboundFeatures(
        cluster=cluster, pairing=any(section.pairing for section in sections),
        bot_guard=any(bool(section.bots_allowed()) for section in sections),
        links=len(sections) > 1 or cluster, reactions=config.progress.reactions,
    ).names()  # fmt: skip


def inbox_dead_command(args: argparse.Namespace) -> int:
    from core.store.base import StoreError
    from gateway.cli import inbox as dead_letters
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        lines = dead_letters.list_dead(config)
    except ConfigError as exc:
        return fail(exc.errors)
    except StoreError as exc:
        return fail([str(exc)])
    print("\n".join(lines))
    return 0


def inbox_drop_command(args: argparse.Namespace) -> int:
    from core.store.base import StoreError
    from gateway.cli import inbox as dead_letters
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail(exc.errors)
    if not args.id.isdigit():
        return fail([f"no dead letter {args.id} (ids are numbers; see `commonos inbox dead`)"])
    try:
        dropped = dead_letters.drop_dead(config, int(args.id))
    except StoreError as exc:
        return fail([str(exc)])
    if not dropped:
        return fail([f"no dead letter {args.id} (see `commonos inbox dead`)"])
    print(f"dropped dead letter {args.id}")
    return 0


def pair_command(args: argparse.Namespace) -> int:
    from core.store.base import StoreError
    from gateway.cli import pair as pair_cli
    from gateway.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        print(pair_cli.act(config, args.pair_action, args.pair_value))
    except ConfigError as exc:
        return fail(exc.errors)
    except (StoreError, pair_cli.PairProblem) as exc:
        return fail([str(exc)])
    return 0


def status_command(args: argparse.Namespace) -> int:
    from gateway.cli import status as status_cli

    return status_cli.command(args.config)


def mcp_command(args: argparse.Namespace) -> int:
    from gateway.cli import mcp as mcp_cli

    return mcp_cli.command(args.config)


def run_command(args: argparse.Namespace) -> int:
    import asyncio

    from core.store.base import StoreError
    from gateway.app import Gateway, StartupError, run_until_signalled
    from gateway.config import ConfigError, load_config, log_redaction

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return fail(exc.errors)
    configure_logging(config.gateway.log_level)
    log_redaction.install(config)
    try:
        asyncio.run(run_until_signalled(Gateway(config)))
    except (StartupError, StoreError) as exc:
        return fail([str(exc)])
    except Exception:
        log.exception("the gateway failed")
        return fail(["the gateway failed unexpectedly (traceback above)"])
    return 0


def chat_command(args: argparse.Namespace) -> int:
    from gateway.cli.chat import chat_command as run_chat

    return run_chat(args.config)
