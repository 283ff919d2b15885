"""What `logitscope run` writes: a turn's tokens as plain text or as JSON lines, loading news, and
the one-line messages on stderr.

Everything written here that came from a model, a file or a user (token text, a prompt, a model
name in a reason) is printed made visible (`engine.core.settings.printable`): a terminal escape in it
(OSC 52 writes the clipboard) is shown, never obeyed. JSON lines hold no NaN or infinity.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any, Callable, TextIO

from engine.core import strictjson
from engine.core.api import (LoadProgress, Message, ProgressCallback, SamplingParams, Scored, TokenEvent, TurnFinished,
                             perplexity)
from engine.core.settings import printable, printable_json, shortened

PREFIX = "logitscope: "  # every line we write to stderr starts so
MAX_LINE = 500  # characters: a value echoed back (a 20 MB [model] default) is cut to fit


def _number(value: float | None) -> float | None:
    """JSON has no NaN or infinity; an impossible token's logprob (-inf) becomes null. The local
    engine never sends a NaN (NaN logits end the turn with an error); another engine might. None
    (what a remote server cannot tell, see engine.core.api) is null too."""
    return value if value is not None and math.isfinite(value) else None


def token_record(turn: int, event: TokenEvent) -> dict[str, Any]:
    """One token as its --json line."""
    return {
        "type": "token", "turn": turn, "index": event.index, "id": event.id, "text": event.text,
        "piece": event.piece, "logprob": _number(event.logprob), "sampled_prob": _number(event.sampled_prob),
        "rank": event.rank, "entropy": _number(event.entropy),
        "candidates": [
            {"id": c.id, "text": c.text, "logprob": _number(c.logprob), "sampled_prob": _number(c.sampled_prob)}
            for c in event.candidates
        ],
    }


def turn_record(turn: int, done: TurnFinished, params: SamplingParams,
                recommended: dict[str, Any] | None = None, reply_perplexity: float | None = None) -> dict[str, Any]:
    """One finished turn as its --json line, with the parameters and the seed it ran with: the
    flags ``--seed S`` plus ``params`` reproduce it; ``recommended``: what the model ships
    (generation_config.json, GGUF general.sampling.*), beside them; ``perplexity``: the reply's
    own, exp(-mean logprob) of its tokens as they were generated (the logprobs printed per token)."""
    return {"perplexity": _number(reply_perplexity), 
        "type": "turn", "turn": turn, "prompt_ids": list(done.prompt_ids), "prompt_tokens": done.prompt_tokens,
        "reused_tokens": done.reused_tokens, "prefilled_tokens": done.prefilled_tokens,
        "generated_tokens": done.generated_tokens, "ttft_s": done.ttft_s, "prefill_tps": done.prefill_tps,
        "decode_tps": done.decode_tps, "finish_reason": done.finish_reason, "text": done.text,
        "seed": params.seed, "params": asdict(params), "recommended": dict(recommended or {}),
        "perplexity": _number(reply_perplexity),
    }


class Printer:
    """Writes a turn's tokens as they come: plain text, or one JSON object per line."""

    def __init__(self, out: TextIO, as_json: bool, err: TextIO | None = None, turns: int = 1) -> None:
        """`out` is flushed after every write so a pipe reader sees tokens as they arrive; notes
        (a reply cut by the length limit) go to `err`. With several `turns`, plain output shows
        each prompt before its reply, so the turns can be told apart."""
        self.out = out
        self.as_json = as_json
        self.err = err
        self.turns = turns
        self.on_token: Callable[[TokenEvent], None] | None = None  # --save records each token
        self._texts: list[str] = []  # the reply's text written so far (plain output)
        self.recommended: dict[str, Any] = {}  # the model's recommended sampling settings, once loaded
        self._logprobs: list[float] = []  # the reply's tokens' logprobs so far (its perplexity)

    def started(self, turn: int, prompt: str) -> None:
        """Before a reply: with several turns, plain output shows ``>>> the prompt`` (after a blank
        line between turns)."""
        if self.as_json or self.turns < 2:
            return
        lines = printable(prompt).splitlines() or [""]
        self.out.write(("\n" if turn > 1 else "") + "".join(f">>> {line}\n" for line in lines))
        self.out.flush()

    def token(self, turn: int, event: TokenEvent, previews: list[dict[str, Any]] | None = None) -> None:
        """One token: its completed text, or its --json line (with `previews`, `--preview`'s list).
        The text is the model's: a terminal escape in it (OSC 52 writes the clipboard) is printed
        made visible, never obeyed."""
        if self.on_token is not None:
            self.on_token(event)
        self._logprobs.append(event.logprob)
        if self.as_json:
            record = token_record(turn, event) | ({"previews": previews} if previews is not None else {})
            self.out.write(printable_json(strictjson.dumps(record, ensure_ascii=False)) + "\n")
        else:
            self._texts.append(event.text)
            self.out.write(printable(event.text))
        self.out.flush()

    def finished(self, turn: int, done: TurnFinished, params: SamplingParams) -> None:
        """The end of a turn: what the stream held back and a newline after the reply (and a note
        on stderr when the length limit cut it), or the turn's --json line."""
        reply_perplexity, self._logprobs = perplexity(self._logprobs), []
        if self.as_json:
            record = turn_record(turn, done, params, self.recommended, reply_perplexity)
            self.out.write(printable_json(strictjson.dumps(record, ensure_ascii=False)) + "\n")
        else:
            self.out.write(printable(held_back(self._texts, done.text)) + "\n")
            self._texts = []
        self.out.flush()
        if not self.as_json and done.finish_reason == "length" and self.err is not None:
            say(self.err, f"note: reply {turn} was cut at the length limit ({params.max_tokens} tokens, --max-tokens)")


    def scored(self, scored: Scored, messages: list[Message]) -> None:
        """The chat read back (--score): its perplexity and each message's, as one JSON line, or
        one line on stderr."""
        record = score_record(scored, messages)
        if self.as_json:
            self.out.write(printable_json(strictjson.dumps(record, ensure_ascii=False)) + "\n")
            self.out.flush()
        elif self.err is not None:
            parts = [f"{m['index']} {m['role']} {_shown(m['perplexity'])}" for m in record["messages"]]
            say(self.err, f"perplexity: chat {_shown(record['perplexity'])}; " + ", ".join(parts))


def score_record(scored: Scored, messages: list[Message]) -> dict[str, Any]:
    """The chat's teacher-forced perplexities (`EngineAPI.score`) as run --score's JSON line."""
    return {
        "type": "score", "perplexity": _number(scored.perplexity), "tokens": len(scored.ids),
        "reused_tokens": scored.reused_tokens, "seconds": scored.seconds,
        "messages": [{"index": m.message + 1, "role": messages[m.message].role, "tokens": m.scored,
                      "perplexity": _number(m.perplexity)} for m in scored.messages],
    }


def _shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def held_back(texts: list[str], whole: str) -> str:
    """The end of a reply's `whole` text that no token's text carried: the bytes of a character
    the reply was cut inside (``\\xe4``), which only the finished stream can write."""
    shown = "".join(texts)
    return whole[len(shown):] if whole.startswith(shown) else ""


def progress_printer(err: TextIO) -> ProgressCallback:
    """Loading news on one rewritten stderr line, only when a person is watching."""
    if not err.isatty():
        return lambda progress: None

    def show(progress: LoadProgress) -> None:
        """Rewrite the line in place (``\\r`` + clear) rather than scroll a log of percentages."""
        percent = f" {progress.fraction:.0%}" if progress.fraction is not None else ""
        err.write(f"\r\033[K{printable(progress.message)}{percent}")
        err.flush()

    return show


def say(err: TextIO, message: str) -> None:
    """One line for the user on stderr: the one prefix, control characters made visible (a reason
    may quote a model name or a path) and at most `MAX_LINE` characters, however long a value it
    echoes."""
    err.write(shortened(PREFIX + printable(" ".join(message.split())), MAX_LINE) + "\n")
    err.flush()
