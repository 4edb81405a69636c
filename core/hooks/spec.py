"""The hook specification: every hook the engine fires, when, with which arguments.

All hooks receive keyword arguments and must accept ``**kwargs``. Every hook fired by the
turn loop gets the common arguments ``session_key`` (str), ``session_id`` (str) and
``turn_id`` (str); the entries below list the arguments on top of those.

Kinds: *observe* (``HookRegistry.notify``; failures logged, never break the turn),
*decide* (``first_result``; first non-``None`` wins), *transform* (``transform``; each may
return a replacement for ``value``), *collect* (``collect``; all non-``None`` results).

Time: every hook fired by the turn loop runs under the turn's token — ``/stop`` aborts a
hook that hangs, and the turn ends ``interrupted`` at once — and each async hook function
is time-boxed by its registry (``HookRegistry.time_box``, default ``HOOK_SECONDS``): an
observer, transform or collector that overruns is abandoned and ignored (logged); a
``pre_tool_call`` that overruns blocks the call. Hooks fired after a stop
(``agent_loop_stopped``, ``on_session_end``, the after-call hooks of a cancelled tool, the
``on_session_start`` of a first turn stopped before the session hooks) get a short box
(``AFTER_STOP_SECONDS``). The external runtime's ``transform_llm_output`` and
``post_llm_call`` run under the token too (``docs/turn-loop.md`` §7, §14). A sync hook
must never block: it cannot be stopped.

Order within one turn (``docs/turn-loop.md`` §7)::

    on_session_start? → pre_llm_call → ( pre_api_request → [api_request_error →
    transform_api_error_classification → pre_api_request …] → post_api_request →
    ( pre_tool_call → post_tool_call → transform_tool_result )* )* →
    transform_llm_output → post_llm_call → agent_loop_stopped? → on_session_end
"""

from __future__ import annotations

from typing import Literal

HookKind = Literal["observe", "decide", "transform", "collect"]

HOOKS: dict[str, tuple[HookKind, str]] = {
    "on_session_start": (
        "observe",
        "A turn starts in a session that is new (just created, or without messages); "
        "once, in its first turn whose record was started, even one stopped or failed "
        "before the session hooks (then at its finish, before agent_loop_stopped and "
        "on_session_end). Args: common only.",
    ),
    "pre_llm_call": (
        "collect",
        "Once per turn, before the first model call. Args: user_message (str). Returned "
        "strings are put in front of the user message for the model only; never stored.",
    ),
    "pre_api_request": (
        "observe",
        "Before each model request, retries included (at most [model] max_retries + 1 per "
        "model call). Args: iteration (1-based model call number), messages (list of wire "
        "dicts, system prompt first).",
    ),
    "post_api_request": (
        "observe",
        "After a successful model request. Args: iteration, reply (ModelReply).",
    ),
    "api_request_error": (
        "observe",
        "A model request failed. Args: iteration, error (ModelError).",
    ),
    "transform_api_error_classification": (
        "transform",
        "Right after api_request_error. value: ErrorClassification; return a replacement "
        "(e.g. mark a provider-specific error retryable — its ``retryable`` decides whether "
        "the call is retried). Args also: iteration.",
    ),
    "transform_llm_output": (
        "transform",
        "The final text reply (no tool calls). value: str; return replacement text (the "
        "stored assistant message is updated to match). /stop while it runs ends the turn "
        "interrupted (the stored reply keeps the model's text).",
    ),
    "post_llm_call": (
        "observe",
        "After the final reply is settled. Args: reply (str). /stop while it runs ends the "
        "turn interrupted.",
    ),
    "agent_loop_stopped": (
        "observe",
        "The loop stopped without a normal reply. Args: reason — the exit reason: "
        '"cancelled", "interrupted_by_user", "budget_exhausted", '
        '"review_input_budget_exhausted", "model_error", "external_runtime" (failed). '
        "Fires after the turn may already be stopped: the whole dispatch is time-boxed "
        "(the registry's time_box; AFTER_STOP_SECONDS after a stop) and a /stop cuts it "
        "short, so it never holds the session.",
    ),
    "on_session_end": (
        "observe",
        "At the end of every turn, after the final status is stored: every "
        "turn whose record was started, also one that failed to open after that (status "
        "failed, exit_reason crashed) or was cancelled while opening (interrupted, "
        "cancelled). Args: status (TurnStatus), exit_reason (ExitReason). Time-boxed like "
        "agent_loop_stopped: it never holds the session.",
    ),
    "pre_tool_call": (
        "decide",
        "Before each tool call (known tool, valid arguments). Args: tool_name, arguments "
        "(dict, a copy), risk, call_id. Return Block(reason), AskUser(prompt), Modify(args) "
        "or None. Every hook is asked (HookRegistry.decide) and the results combine by "
        "precedence: any Block wins (the first Block's reason is shown); else any AskUser "
        "asks a person (prompts joined); Modify args are merged in hook order. After a "
        "Modify the hooks are asked again with the modified arguments (up to 3 rounds, "
        "until they settle; still changing → blocked), so a Modify that makes a call "
        "dangerous gets an approval card, and the approval is about the final arguments. "
        "A raising hook, or a result that is none of these, blocks the call.",
    ),
    "post_tool_call": (
        "observe",
        "After each tool call, including unknown, blocked, failed and cancelled ones. Args: "
        "tool_name, arguments (dict, or None when they could not be parsed), call_id, "
        "result (str), is_error (bool), blocked (bool), cancelled (bool).",
    ),
    "transform_tool_result": (
        "transform",
        "value: the tool result text; return a replacement. Args also: tool_name, call_id, "
        "is_error.",
    ),
}

HOOK_NAMES: frozenset[str] = frozenset(HOOKS)
