"""What the load client needs from a service profile beyond its URL (edge: reads tokenizer files).

Generic OpenAI-compatible servers may take no token ids (text prompts, chat messages) and may send
no token counts (re-tokenized counting); both need the profile's declared tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from harness.errors import SpecError
from harness.inputs.corpus import Case
from harness.inputs.spec import ClientLimits, ServiceProfile
from harness.inputs.tokenizer import load_tokenizer
from harness.load.client import StreamLimits
from harness.load.driver import LoadClient, OpenAIOptions, Transport
from harness.load.workers import WorkerLoadClient

PromptText = Callable[[Case], str]


def _needs_text(profile: ServiceProfile) -> bool:
    p = profile.wire_protocol
    return p == "openai-chat" or (p == "openai-completions" and profile.openai.prompt_format == "text")


def openai_options(profile: ServiceProfile) -> OpenAIOptions:
    """The client options of ``profile`` (a tokenizer is loaded when one is declared)."""
    o = profile.openai
    tokenize = None
    if profile.tokenizer is not None:
        tok = load_tokenizer(profile.tokenizer)

        def tokenize(text: str) -> int:
            return len(tok.encode(text, add_special_tokens=False).ids)

    if o.count_method == "retokenized" and tokenize is None:
        raise SpecError(f"service {profile.name}: count_method retokenized needs 'tokenizer'",
                        hint="declare the tokenizer the server uses (a tokenizer.json or its directory)")
    return OpenAIOptions(prompt_format=o.prompt_format, continuous_usage_stats=o.continuous_usage_stats,
                         return_token_ids=o.return_token_ids, send_cache_salt=o.send_cache_salt,
                         tokenize=tokenize, count_method=None if o.count_method == "auto" else o.count_method)


def prompt_texts(profile: ServiceProfile) -> PromptText | None:
    """Case -> prompt text (decoded once per case with the declared tokenizer), or None when the
    profile sends token ids. SpecError when text is needed and no tokenizer is declared."""
    if not _needs_text(profile):
        return None
    if profile.tokenizer is None:
        raise SpecError(f"service {profile.name}: {profile.wire_protocol} with text prompts needs 'tokenizer' "
                        "to decode the corpus token ids",
                        hint="set tokenizer: to the tokenizer the corpus was built with (corpora/tokenizers/...)")
    tok = load_tokenizer(profile.tokenizer)

    @lru_cache(maxsize=4096)
    def text_of(ids: tuple[int, ...]) -> str:
        return str(tok.decode(list(ids), skip_special_tokens=False))

    def texts(case: Case) -> str:
        return text_of(tuple(int(i) for i in case.input_ids))

    return texts


def load_client(url: str, profile: ServiceProfile, *, concurrency: int, timeout_s: float,
                limits: ClientLimits | None = None, workers: int = 1, pin_cpus: bool = False,
                transport: Transport | None = None) -> LoadClient:
    """A ``LoadClient`` speaking ``profile``'s protocol to ``url``, every request bounded by ``limits``
    (the spec's ``client`` section; its defaults when None); with ``workers`` > 1 its waves run in
    that many processes (``harness.load.workers``); ``transport`` as ``LoadClient``'s."""
    lim = limits or ClientLimits()
    stream_limits = StreamLimits(deadline_factor=lim.deadline_factor, deadline_grace_s=lim.deadline_grace_s,
                                 max_event_bytes=lim.max_event_bytes)
    if workers > 1:
        return WorkerLoadClient(url, workers=workers, pin_cpus=pin_cpus, protocol=profile.wire_protocol,
                                concurrency=concurrency, model=profile.identity.served_model_name, timeout_s=timeout_s,
                                openai=openai_options(profile), limits=stream_limits, transport=transport)
    return LoadClient(url, protocol=profile.wire_protocol, concurrency=concurrency,
                      model=profile.identity.served_model_name, timeout_s=timeout_s, openai=openai_options(profile),
                      limits=stream_limits, transport=transport)
