"""What the server's trainer adapters read from a rollout, for adapters that run in the client
(`slime_binary_rm`): chat-template control tokens removed, a prompt's last user turn as the question, and
a label's ground truth and optional question, the reasoning-trace opener a prompt ends with, and the one
message of a chat completion that is the answer. A port of `src/text/chat-tokens.ts`, of `traceOpenedBy`
in `src/text/reasoning.ts` and of `questionFromMessages` / `labelParts` / `withPromptTrace` and `/verify`'s
answer rule in `src/server/http/routes/adapters.ts`: change them together (the tests check that the server
keys the same judgment for `/slime` and for this)."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional, Sequence, Tuple

_PIPE_TOKEN = r"<[|\uFF5C][A-Za-z0-9_\u2581 .-]{1,48}[|\uFF5C]>"
_ANGLE_TOKENS = (
    r"</?s>|<(?:bos|eos|pad|unk|mask|start_of_turn|end_of_turn|start_of_image|end_of_image)>|<</?SYS>>"
)
_BRACKET_TOKENS = (
    r"\[/?(?:INST|SYSTEM_PROMPT|AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|TOOL_CONTENT)\]"
    r"|\[(?:PAD|CLS|SEP|UNK|MASK|BOS|EOS)\]"
)
_ROLE_WORD = r"(?:system|user|assistant|model|tool|developer|ipython)"
_HEADER_RE = re.compile(
    r"<\|start_header_id\|>[^<\n]{0,64}<\|end_header_id\|>|(?:<\|im_start\|>|<start_of_turn>)"
    + _ROLE_WORD
    + r"?[ \t]*\n?"
)
_TOKEN_RE = re.compile(f"{_PIPE_TOKEN}|{_ANGLE_TOKENS}|{_BRACKET_TOKENS}")
_USER_TURNS = [
    re.compile(p)
    for p in (
        r"<\|im_start\|>user[ \t]*\n?([\s\S]*?)(?=<\|im_end\|>|<\|im_start\|>|\Z)",
        r"<\|start_header_id\|>user<\|end_header_id\|>\n*([\s\S]*?)(?=<\|eot_id\|>|<\|start_header_id\|>|\Z)",
        r"<start_of_turn>user[ \t]*\n?([\s\S]*?)(?=<end_of_turn>|<start_of_turn>|\Z)",
        r"<[|\uFF5C]User[|\uFF5C]>([\s\S]*?)"
        r"(?=<[|\uFF5C](?:Assistant|end\u2581of\u2581sentence)[|\uFF5C]>|<[|\uFF5C]User[|\uFF5C]>|\Z)",
        r"<\|user\|>\n?([\s\S]*?)(?=<\|end\|>|<\|assistant\|>|\Z)",
        r"\[INST\]([\s\S]*?)(?=\[/INST\]|\Z)",
    )
]
_SYS_BLOCK = re.compile(r"<<SYS>>[\s\S]*?<</SYS>>")
_BLANK_LINES = re.compile(r"\n{3,}")


def strip_chat_tokens(text: str) -> str:
    """Every control token and role header replaced by a line break, then both ends trimmed."""
    if "<" not in text and "[" not in text:
        return text.strip()
    text = _TOKEN_RE.sub("\n", _HEADER_RE.sub("\n", text))
    return _BLANK_LINES.sub("\n\n", text).strip()


def last_user_turn(prompt: str) -> Optional[str]:
    """The last user turn of a chat-templated prompt, or None when it has no recognisable one."""
    best: Optional[Tuple[int, str]] = None
    for pattern in _USER_TURNS:
        for m in pattern.finditer(prompt):
            if best is None or m.start() > best[0]:
                best = (m.start(), m.group(1) or "")
    if best is None:
        return None
    return strip_chat_tokens(_SYS_BLOCK.sub("", best[1]))


def _parts_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    texts = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        text, refusal = part.get("text"), part.get("refusal")
        if isinstance(text, str) and text != "":
            texts.append(text)
        elif isinstance(refusal, str) and refusal != "":
            texts.append(refusal)
    return "\n".join(texts)


def question_from_prompt(prompt: Any) -> str:
    """A prompt as slime sends it: a chat-templated string's last user turn (else the string without
    control tokens), or a chat's last user message, else every message's text."""
    if isinstance(prompt, str):
        turn = last_user_turn(prompt)
        return turn if turn is not None else strip_chat_tokens(prompt)
    messages = list(prompt)
    for m in reversed(messages):
        if isinstance(m, Mapping) and m.get("role") == "user":
            return strip_chat_tokens(_parts_text(m.get("content")))
    return strip_chat_tokens(
        "\n".join(_parts_text(m.get("content")) for m in messages if isinstance(m, Mapping))
    )


def label_parts(label: Any) -> Tuple[str, Optional[str]]:
    """(ground truth, question or None) from a label: the ground truth, `{ground_truth, question?}`, or
    that object as a JSON string. The server validates both."""
    if isinstance(label, Mapping):
        return label.get("ground_truth"), label.get("question")  # type: ignore[return-value]
    if isinstance(label, str):
        trimmed = label.strip()
        if trimmed.startswith("{") and trimmed.endswith("}"):
            try:
                parsed = json.loads(trimmed)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict) and "ground_truth" in parsed:
                return parsed.get("ground_truth"), parsed.get("question")
    return label, None


# The server's `traceOpenedBy` under REASONING_FORMAT=auto (the default): a `<think>` / `<thinking>` /
# `<reasoning>` opener, or a harmony analysis/commentary header, at the very end of the prompt.
_OPEN_TAG_AT_END = re.compile(r"<\s*(?:think|thinking|reasoning)\s*>\s*\Z", re.IGNORECASE)
_HARMONY_OPEN_AT_END = re.compile(r"<\|channel\|>\s*(?:analysis|commentary)\b[^<]*<\|message\|>\s*\Z")


def trace_opened_by(prompt: Any) -> Optional[str]:
    """The reasoning-trace opener a chat-templated prompt ends with (`<think>\\n` from a Qwen3-thinking or
    DeepSeek-R1 template's generation prompt, a harmony analysis header), or None (also for chat messages:
    their template is applied elsewhere)."""
    if not isinstance(prompt, str):
        return None
    for pattern in (_OPEN_TAG_AT_END, _HARMONY_OPEN_AT_END):
        m = pattern.search(prompt)
        if m is not None:
            return m.group(0)
    return None


def with_prompt_trace(candidate: str, opener: Optional[str]) -> str:
    """The rollout as the server reads it after a prompt that opened a trace: the opener put back in front,
    so a rollout cut off inside the trace is `truncated_reasoning` (a real 0) instead of judged as an idea."""
    return candidate if opener is None else opener + candidate


def message_text(message: Any) -> str:
    """A chat message's text: its string content, or its text parts (and refusals) joined by newlines."""
    if not isinstance(message, Mapping):
        return str(message)
    return _parts_text(message.get("content"))


def completion_answer(completion: Any) -> str:
    """The idea a rollout proposes, by the server's `/verify` rule: the completion string, or for a chat
    completion its last message when that is the assistant's, even when empty (an empty answer is judged
    `empty`, a real 0). Nothing earlier is ever the answer: not a preamble before a tool call, not a tool's
    output (a search tool returning the paper's abstract), not an earlier turn. A completion that ends on a
    tool message (the turn after the tool was cut off) has no answer: "" as well."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return message_text(completion)
    if isinstance(completion, Sequence):
        messages = list(completion)
        if not messages:
            return ""
        last = messages[-1]
        if isinstance(last, Mapping) and last.get("role", "assistant") != "assistant":
            return ""
        return message_text(last)
    raise TypeError(f"unsupported completion type {type(completion).__name__}")


# --- the final assistant turn of a multi-turn rollout (issue 39 item 2) ---------------------------------
# A trainer's multi-turn rollout (verl's ToolAgentLoop) is decoded whole: earlier assistant turns, tool calls
# and the tool responses the environment appended (a search tool may return the paper's abstract). Only the
# final assistant text is the answer, as for `/verify` and the TRL adapter.

# A turn that is not the assistant's, with its control tokens (the rollout decoded with special tokens).
_OTHER_TURN = re.compile(
    r"<\|im_start\|>\s*(?!assistant\b)[A-Za-z_]+"
    r"|<\|start_header_id\|>\s*(?!assistant\b)[A-Za-z_]+\s*<\|end_header_id\|>"
    r"|<start_of_turn>\s*(?!model\b)[A-Za-z_]+"
    r"|<\|start\|>(?!assistant\b)[^<]*"
    r"|<[|\uFF5C]tool\u2581outputs?\u2581begin[|\uFF5C]>|<[|\uFF5C]User[|\uFF5C]>"
    r"|\[TOOL_RESULTS\]|\[INST\]|<\|observation\|>|<\|user\|>"
)
# The header that opens the assistant's next turn.
_ASSISTANT_TURN = re.compile(
    r"<\|im_start\|>assistant[ \t]*\n?"
    r"|<\|start_header_id\|>assistant<\|end_header_id\|>\n*"
    r"|<start_of_turn>model[ \t]*\n?"
    r"|<\|start\|>assistant"
    r"|<[|\uFF5C]Assistant[|\uFF5C]>|<[|\uFF5C]tool\u2581outputs?\u2581end[|\uFF5C]>"
    r"|\[/TOOL_RESULTS\]|\[/INST\]|<\|assistant\|>\n?"
)
# Decoded without special tokens (verl's reward managers: `skip_special_tokens=True`): the Hermes-style tool
# response block of Qwen2.5/Qwen3/QwQ/Hermes templates (plain-text tags), then the role word left of the
# next assistant header.
_TOOL_RESPONSE_OPEN = re.compile(r"<tool_response>")
_TOOL_RESPONSE_CLOSE = re.compile(r"</tool_response>")
_LEADING_ROLE = re.compile(r"\A\s*(?:assistant|model)[ \t]*\n")


def split_final_assistant(text: str) -> Tuple[str, bool]:
    """(the final assistant turn of a decoded multi-turn rollout, whether the text has turns): what follows the
    last turn that is not the assistant's (a tool, user or system turn with its chat tokens; a Mistral
    `[INST]`) or the last `</tool_response>` (decoded without them); "" when the rollout ends inside such a
    turn (cut off after a tool call: nothing was answered). A single-turn rollout is returned as is."""
    last_other = None
    for m in _OTHER_TURN.finditer(text):
        last_other = m
    if last_other is not None:
        reply = _ASSISTANT_TURN.search(text, last_other.end())
        return ("" if reply is None else text[reply.end():]), True
    closes = list(_TOOL_RESPONSE_CLOSE.finditer(text))
    opens = list(_TOOL_RESPONSE_OPEN.finditer(text))
    if not opens and not closes:
        return text, False
    if opens and (not closes or opens[-1].start() > closes[-1].start()):
        return "", True  # a tool response that never closed: the rollout was cut off inside it
    return _LEADING_ROLE.sub("", text[closes[-1].end():], count=1), True


def final_assistant_text(text: str) -> str:
    """The final assistant turn of a decoded multi-turn rollout (`split_final_assistant`)."""
    return split_final_assistant(text)[0]
