"""The hook specification: every hook the engine fires, when, with which arguments.

All hooks receive keyword arguments and must accept ``**kwargs``. Common arguments:
``session_key`` (str), ``session_id`` (str), ``turn_id`` (str).

Kinds: *observe* (``HookRegistry.notify``; failures logged, never break the turn),
*decide* (``first_result``; first non-``None`` wins), *transform* (``transform``; each may
return a replacement for ``value``), *collect* (``collect``; all non-``None`` results).
"""

from __future__ import annotations

from typing import Literal

HookKind = Literal["observe", "decide", "transform", "collect"]

HOOKS: dict[str, tuple[HookKind, str]] = {
    "on_session_start": (
        "observe",
        "A turn starts in a session that has no messages yet. Args: session_key, session_id.",
    ),
    "pre_llm_call": (
        "collect",
        "Once per turn, before the first model call. Args: session_key, session_id, turn_id, "
        "user_message (str). Returned strings are put in front of the user message for the "
        "model only; they are never stored.",
    ),
    "pre_api_request": (
        "observe",
        "Before each model call. Args: turn_id, iteration (1-based), messages (wire dicts).",
    ),
    "post_api_request": (
        "observe",
        "After a successful model call. Args: turn_id, iteration, reply (ModelReply).",
    ),
    "api_request_error": (
        "observe",
        "A model call failed. Args: turn_id, iteration, error (ModelError).",
    ),
    "transform_api_error_classification": (
        "transform",
        "Right after api_request_error. value: ErrorClassification; return a replacement "
        "(e.g. mark a provider-specific error retryable).",
    ),
    "transform_llm_output": (
        "transform",
        "The final text reply (no tool calls). value: str; return replacement text.",
    ),
    "post_llm_call": (
        "observe",
        "After the final reply is settled. Args: turn_id, reply (str).",
    ),
    "agent_loop_stopped": (
        "observe",
        "The loop stopped early (interrupt, cancel, budget). Args: turn_id, reason "
        '("cancelled", "interrupted_by_user", "budget_exhausted", ...).',
    ),
    "on_session_end": (
        "observe",
        "At the end of every turn (as in Hermes), after the final status is stored. "
        "Args: session_key, session_id, turn_id, status, exit_reason.",
    ),
    "pre_tool_call": (
        "decide",
        "Before each tool call. Args: tool_name, arguments (dict), risk, call_id, session_key, "
        "turn_id. Return Block(reason), AskUser(prompt), Modify(args) or None.",
    ),
    "post_tool_call": (
        "observe",
        "After each tool call, including blocked and failed ones. Args: tool_name, arguments, "
        "call_id, result (str), is_error (bool), blocked (bool).",
    ),
    "transform_tool_result": (
        "transform",
        "value: the tool result text; return a replacement. Args also: tool_name, call_id.",
    ),
}

HOOK_NAMES: frozenset[str] = frozenset(HOOKS)
