# SPDX-License-Identifier: MIT
"""mambacpp.Llama: the interface of llama-cpp-python's `llama_cpp.Llama`, over mambacpp.Model.

Code written for llama-cpp-python runs with its import changed::

    from mambacpp import Llama
    with Llama(model_path="data/demo-model", n_ctx=2048, n_threads=4, seed=1, verbose=False) as llm:
        out = llm("Q: Name the planets. A:", max_tokens=32, stop=["Q:"], echo=True)
        print(out["choices"][0]["text"])

Completions and chat completions go through the same request path as `mambacpp serve` (its
validation, chat template rendering, prefix cache and response shapes); what llama-cpp-python
adds on top of the OpenAI body (echo, n choices, the constructor's n_ctx and seed) is done here.
"""

from __future__ import annotations

import random
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from . import _checks as check
from ._mambacpp import Error

# The most tokens one request may generate: max_tokens=None (or <= 0) asks for "until the
# context is full", and the request path cuts this to the room left under n_ctx.
_UNBOUNDED_TOKENS = 2**31 - 1

Response = Dict[str, Any]


def _body(**fields: Any) -> Dict[str, Any]:
    """The request fields that were given (None means the engine's default)."""
    return {key: value for key, value in fields.items() if value is not None}


def _merge_choices(responses: List[Response]) -> Response:
    """One response holding every request's choice, indexed in order, as OpenAI reports n > 1:
    the prompt counted once, the completions' tokens summed."""
    merged = dict(responses[0])
    merged["choices"] = []
    for index, response in enumerate(responses):
        for choice in response["choices"]:
            merged["choices"].append(dict(choice, index=index))
    usage = dict(responses[0].get("usage") or {})
    if usage:
        completion = sum(r["usage"]["completion_tokens"] for r in responses)
        usage["completion_tokens"] = completion
        usage["total_tokens"] = usage["prompt_tokens"] + completion
        merged["usage"] = usage
    return merged


# llama-cpp-python's LLAMA_POOLING_TYPE_* values that mambacpp computes.
_POOLING_TYPES = {-1: "mean", 1: "mean", 3: "last"}


def _pooling_name(pooling_type: Any) -> str:
    if isinstance(pooling_type, str) and pooling_type in ("mean", "last"):
        return pooling_type
    if isinstance(pooling_type, int) and not isinstance(pooling_type, bool) and pooling_type in _POOLING_TYPES:
        return _POOLING_TYPES[pooling_type]
    raise Error(f"pooling_type must be 'mean' or 'last' (or LLAMA_POOLING_TYPE_MEAN = 1, _LAST = 3), "
                f"got {pooling_type!r}")


class Llama:
    """A model loaded with llama-cpp-python's constructor and calls (`llama_cpp.Llama`).

    Args:
        model_path: a Hugging Face checkpoint folder or a GGUF file.
        n_ctx: the context window: a prompt must be shorter, and generation stops when prompt
            plus output fill it (max_tokens is cut to the room left). 0 means no limit.
        n_threads: compute threads; None uses every core.
        n_batch: accepted for compatibility and ignored: the engine prefills in chunks of its
            own, and the chunk size changes no result.
        seed: the default seed of calls that give none: each such call draws its seed from a
            generator seeded with it, so a script's sequence of calls is reproducible. None or
            -1 draws a random seed per call.
        verbose: print one line about the loaded model to stderr.
        device: "cpu", "vulkan" or "vulkan:N" (mambacpp's; llama-cpp-python's n_gpu_layers,
            a per-layer split, is refused: a model runs wholly on one device).
        dtype: weight storage ("f32", "bf16", "q8_0", "q4_k", ...); None keeps the file's.
        pooling_type: how embed() pools the hidden states: "mean" or "last", or
            llama-cpp-python's constants (LLAMA_POOLING_TYPE_MEAN = 1, _LAST = 3; -1,
            unspecified, is mean).

    Calls: llm(prompt, ...) (= create_completion), create_completion, create_chat_completion,
    tokenize, detokenize, embed, create_embedding, n_ctx, n_vocab, n_embd, token_eos, close;
    `with Llama(...) as llm:` closes it at the end. The loaded mambacpp.Model is `llm.model`.
    """

    def __init__(self, model_path: Any, *, n_ctx: int = 512, n_threads: Optional[int] = None,
                 n_batch: int = 512, seed: Optional[int] = None, verbose: bool = True,
                 n_gpu_layers: int = 0, device: str = "cpu", dtype: Optional[str] = None,
                 pooling_type: Union[int, str] = "mean"):
        from . import Model  # here, not at import time: mambacpp/__init__.py imports this module

        self.model_path = check.check_path("model_path", model_path)
        self._n_ctx = check.check_int("n_ctx", n_ctx)
        if self._n_ctx < 0:
            raise Error(f"n_ctx must be >= 0 (0 = no limit), got {self._n_ctx}")
        threads = check.check_int("n_threads", n_threads, allow_none=True)
        if check.check_int("n_batch", n_batch) < 1:
            raise Error(f"n_batch must be >= 1, got {n_batch}")
        if check.check_int("n_gpu_layers", n_gpu_layers) != 0:
            raise Error("n_gpu_layers is not supported: mambacpp runs the whole model on one device; "
                        "pass device='vulkan' instead")
        seed = check.check_int("seed", seed, allow_none=True)
        self._seeds = None if seed is None or seed == -1 else random.Random(seed)
        check.check_bool("verbose", verbose)
        check.check_str("device", device)
        check.check_str("dtype", dtype, allow_none=True)
        self._pooling = _pooling_name(pooling_type)
        self._model = Model(self.model_path, device=device, dtype=dtype, threads=threads or 0)
        if verbose:
            m = self._model
            print(f"mambacpp: loaded {self.model_path}: {m.n_layer} layers, d_model {m.d_model}, "
                  f"vocab {m.vocab_size}, {m.dtype} weights on {m.device}, {m.threads} threads, "
                  f"n_ctx {self._n_ctx or 'unlimited'}", file=sys.stderr)

    # Lifetime.

    @property
    def model(self):
        """The loaded mambacpp.Model (logits, forward, states); Error once closed."""
        if self._model is None:
            raise Error("this Llama is closed")
        return self._model

    def close(self) -> None:
        """Releases the model (its memory goes once no state or stream still uses it). Calls on
        a closed Llama raise mambacpp.Error. Closing twice is harmless."""
        self._model = None

    def __enter__(self) -> "Llama":
        """`with Llama(...) as llm:` closes the model when the block ends."""
        self.model  # a closed Llama cannot be entered
        return self

    def __exit__(self, *exc_info: Any) -> None:
        """Closes the model."""
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._model is None else f"n_ctx={self._n_ctx}"
        return f"mambacpp.Llama(model_path={self.model_path!r}, {state})"

    # Sizes and tokens.

    def n_ctx(self) -> int:
        """The context window given at construction (0 = no limit)."""
        return self._n_ctx

    def n_vocab(self) -> int:
        """The vocabulary size (rows of the output head)."""
        return self.model.vocab_size

    def n_embd(self) -> int:
        """The width of the hidden state, and of embed()'s vectors."""
        return self.model.d_model

    def token_eos(self) -> int:
        """The first end-of-text token id, or -1 when the model names none."""
        ids = self.model.eos_token_ids
        return ids[0] if ids else -1

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> List[int]:
        """The token ids of `text` (UTF-8 bytes, as llama-cpp-python takes it, or a str).

        These are the ids generation feeds the model. add_bos and special are accepted for
        compatibility: the tokenizer adds no BOS (Mamba's GPT-NeoX tokenizer has none, and
        prompts are fed without one), and added special tokens in the text are always
        recognised, as Hugging Face's tokenizer does.
        """
        text = check.check_text_bytes("text", text)
        check.check_bool("add_bos", add_bos)
        check.check_bool("special", special)
        return self.model.tokenize(text)

    def detokenize(self, tokens: List[int], prev_tokens: Optional[List[int]] = None,
                   special: bool = False) -> bytes:
        """The UTF-8 bytes of `tokens` (special tokens left out unless special=True).

        With prev_tokens, the bytes that `tokens` add after them (a word's leading space
        depends on what precedes it). A token that ends inside a UTF-8 character is decoded
        lossily (U+FFFD), as the engine's decoder works on whole characters.
        """
        ids = check.check_ids("tokens", tokens)
        check.check_bool("special", special)
        if prev_tokens is None:
            return self.model.detokenize(ids, skip_special=not special).encode("utf-8")
        before = check.check_ids("prev_tokens", prev_tokens)
        whole = self.model.detokenize(before + ids, skip_special=not special).encode("utf-8")
        head = self.model.detokenize(before, skip_special=not special).encode("utf-8") if before else b""
        return whole[len(head):] if whole.startswith(head) else whole

    # Generation.

    def _call_seeds(self, seed: Optional[int], n: int) -> List[Optional[int]]:
        """One seed per choice: the call's seed for the first and the next ones after it, else
        draws from the constructor's seed, else None (the engine draws)."""
        if seed is not None and seed != -1:
            return [(seed + i) % 2**64 for i in range(n)]
        if self._seeds is not None:
            return [self._seeds.getrandbits(63) for _ in range(n)]
        return [None] * n

    def _run(self, kind: str, fields: Dict[str, Any], seed: Optional[int], n: int, stream: bool,
             echo_text: Optional[str] = None) -> Union[Response, Iterator[Response]]:
        import json

        model = self.model
        n = check.check_int("n", n)
        if n < 1:
            raise Error(f"n must be >= 1, got {n}")
        bodies = [json.dumps(_body(**fields, seed=s)) for s in self._call_seeds(seed, n)]
        if not stream:
            responses = [model._request(kind, body, False, self._n_ctx) for body in bodies]
            if echo_text is not None:
                for response in responses:
                    for choice in response["choices"]:
                        choice["text"] = echo_text + choice["text"]
            return _merge_choices(responses)
        # Requests are validated as they are queued: the first raises now, not at the first chunk.
        first = model._request(kind, bodies[0], True, self._n_ctx)
        return self._chunks(kind, first, bodies[1:], echo_text)

    def _chunks(self, kind: str, first: Iterator[Response], rest: List[str],
                echo_text: Optional[str]) -> Iterator[Response]:
        """The chunks of every choice in turn, each chunk's choices given their choice's index;
        with echo, each choice starts with a chunk holding the prompt."""
        for index in range(1 + len(rest)):
            chunks = first if index == 0 else self.model._request(kind, rest[index - 1], True, self._n_ctx)
            for position, chunk in enumerate(chunks):
                if echo_text is not None and position == 0:
                    echo = {key: chunk[key] for key in ("id", "object", "created", "model")}
                    yield dict(echo, choices=[{"text": echo_text, "index": index, "logprobs": None,
                                               "finish_reason": None}])
                chunk["choices"] = [dict(choice, index=index) for choice in chunk.get("choices", [])]
                yield chunk

    def create_completion(self, prompt: Union[str, List[int]], suffix: Optional[str] = None,
                          max_tokens: Optional[int] = 16, temperature: float = 0.8, top_p: float = 0.95,
                          min_p: float = 0.05, logprobs: Optional[int] = None, echo: bool = False,
                          stop: Optional[Union[str, List[str]]] = None, frequency_penalty: float = 0.0,
                          presence_penalty: float = 0.0, repeat_penalty: float = 1.0, top_k: int = 40,
                          stream: bool = False, seed: Optional[int] = None, model: Optional[str] = None,
                          n: int = 1) -> Union[Response, Iterator[Response]]:
        """A text completion, in llama-cpp-python's (OpenAI's) shape.

        Returns {"id": "cmpl-...", "object": "text_completion", "created", "model", "choices":
        [{"text", "index", "logprobs", "finish_reason": "stop"|"length"}], "usage":
        {"prompt_tokens", "completion_tokens", "total_tokens"}}, or with stream=True an
        iterator of chunks of the same shape holding the new text. `prompt` is text or token
        ids; max_tokens None or <= 0 generates until the context (n_ctx) is full or the model
        ends the text; temperature 0 is greedy; stop strings end the text and are not included;
        echo=True puts the prompt before the text; n > 1 gives n choices (with a seed, choice i
        uses seed + i). presence_penalty and frequency_penalty (-2 to 2) are OpenAI's, over the
        tokens generated so far; suffix (infilling) is not supported. Wrong types raise TypeError naming the argument,
        bad values mambacpp.Error.
        """
        prompt = check.check_prompt(prompt)
        if check.check_str("suffix", suffix, allow_none=True) is not None:
            raise Error("suffix is not supported (mambacpp does not fill in the middle)")
        max_tokens = check.check_int("max_tokens", max_tokens, allow_none=True)
        if max_tokens is None or max_tokens <= 0:
            max_tokens = _UNBOUNDED_TOKENS
        logprobs = check.check_int("logprobs", logprobs, allow_none=True)
        if check.check_bool("echo", echo) and logprobs is not None:
            raise Error("echo and logprobs cannot be combined: the prompt's tokens have no logprobs here")
        fields = dict(prompt=prompt, max_tokens=max_tokens, logprobs=logprobs, stop=check.check_stop(stop),
                      model=check.check_str("model", model, allow_none=True),
                      **self._sampling(temperature, top_p, min_p, top_k, repeat_penalty, presence_penalty,
                                       frequency_penalty))
        echo_text = None
        if echo:
            echo_text = prompt if isinstance(prompt, str) else self.model.detokenize(prompt)
        return self._run("completion", fields, check.check_int("seed", seed, allow_none=True), n,
                         check.check_bool("stream", stream), echo_text)

    def __call__(self, prompt: Union[str, List[int]], **kwargs: Any) -> Union[Response, Iterator[Response]]:
        """llm(prompt, ...) is llm.create_completion(prompt, ...)."""
        return self.create_completion(prompt, **kwargs)

    @staticmethod
    def _sampling(temperature: Any, top_p: Any, min_p: Any, top_k: Any, repeat_penalty: Any,
                  presence_penalty: Any, frequency_penalty: Any) -> Dict[str, Any]:
        """The sampling fields, type-checked; their values are checked by the engine."""
        return dict(temperature=check.check_number("temperature", temperature),
                    top_p=check.check_number("top_p", top_p), min_p=check.check_number("min_p", min_p),
                    top_k=check.check_int("top_k", top_k),
                    repeat_penalty=check.check_number("repeat_penalty", repeat_penalty),
                    presence_penalty=check.check_number("presence_penalty", presence_penalty),
                    frequency_penalty=check.check_number("frequency_penalty", frequency_penalty))

    def create_chat_completion(self, messages: List[Dict[str, Any]], tools: Optional[List[Dict[str, Any]]] = None,
                               tool_choice: Optional[str] = None, temperature: float = 0.2, top_p: float = 0.95,
                               top_k: int = 40, min_p: float = 0.05, stream: bool = False,
                               stop: Optional[Union[str, List[str]]] = None, seed: Optional[int] = None,
                               response_format: Optional[Dict[str, Any]] = None,
                               max_tokens: Optional[int] = None, presence_penalty: float = 0.0,
                               frequency_penalty: float = 0.0, repeat_penalty: float = 1.0,
                               model: Optional[str] = None, logprobs: Optional[bool] = None,
                               top_logprobs: Optional[int] = None, n: int = 1,
                               chat_template_kwargs: Optional[Dict[str, Any]] = None
                               ) -> Union[Response, Iterator[Response]]:
        """A chat completion, in llama-cpp-python's (OpenAI's) shape, rendered with the model's
        chat template as `mambacpp serve` renders it.

        Returns {"id": "chatcmpl-...", "object": "chat.completion", "created", "model",
        "choices": [{"index", "message": {"role": "assistant", "content"}, "logprobs",
        "finish_reason"}], "usage"}, or with stream=True an iterator of "chat.completion.chunk"
        dicts. max_tokens None generates until the context (n_ctx) is full or the model ends
        its turn. tools and chat_template_kwargs go to the template; tool_choice may be
        "auto". response_format (JSON mode, schemas) is not supported yet and is refused.
        A follow-up turn that repeats the conversation resumes from its cached state.
        """
        messages = check.check_messages(messages)
        if response_format is not None:
            raise Error("response_format is not supported yet (no constrained decoding: JSON mode and "
                        "schemas are future work); leave it out")
        logprobs = None if logprobs is None else check.check_bool("logprobs", logprobs)
        fields = dict(messages=messages, tools=tools, tool_choice=check.check_str("tool_choice", tool_choice,
                                                                                   allow_none=True),
                      stop=check.check_stop(stop), max_tokens=check.check_int("max_tokens", max_tokens,
                                                                               allow_none=True),
                      model=check.check_str("model", model, allow_none=True), logprobs=logprobs,
                      top_logprobs=check.check_int("top_logprobs", top_logprobs, allow_none=True),
                      chat_template_kwargs=chat_template_kwargs,
                      **self._sampling(temperature, top_p, min_p, top_k, repeat_penalty, presence_penalty,
                                       frequency_penalty))
        return self._run("chat", fields, check.check_int("seed", seed, allow_none=True), n,
                         check.check_bool("stream", stream))

    # Embeddings.

    def embed(self, input: Union[str, List[str]], normalize: bool = True, truncate: bool = True,
              return_count: bool = False) -> Union[List[float], List[List[float]], Tuple[Any, int]]:
        """Embeddings of text: the final hidden state (after the last norm), pooled over the
        text's tokens as pooling_type says (mean by default, or the last token's) and
        L2-normalised (normalize=False keeps the pooled vector). Model.embed computes them: the
        same float32 values /v1/embeddings and mb_embed give, as Python floats.

        A str gives one list of n_embd() floats, a list of str one such list per text, all
        computed in one pass over the weights. A text longer than n_ctx tokens is cut to its
        first n_ctx tokens (truncate=False raises mambacpp.Error instead). return_count=True
        also returns the number of tokens read.
        """
        single = isinstance(input, str)
        texts = [input] if single else input
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"input must be a str or a list of str, got {check.type_name(input)}")
        check.check_bool("normalize", normalize)
        check.check_bool("truncate", truncate)
        model = self.model
        pages = []
        for i, text in enumerate(texts):
            ids = model.tokenize(text)
            if not ids:
                raise Error(f"input {i} is empty (it encodes to no tokens)")
            if self._n_ctx and len(ids) > self._n_ctx:
                if not truncate:
                    raise Error(f"input {i} has {len(ids)} tokens, more than n_ctx ({self._n_ctx}); "
                                "pass truncate=True to embed its first n_ctx tokens")
                ids = ids[:self._n_ctx]
            pages.append(ids)
        rows = model.embed(pages, pooling=self._pooling, normalize=normalize) if pages else []
        vectors = [row.tolist() for row in rows]
        result: Any = vectors[0] if single else vectors
        return (result, sum(len(p) for p in pages)) if return_count else result

    def create_embedding(self, input: Union[str, List[str]], model: Optional[str] = None) -> Response:
        """Embeddings in OpenAI's shape: {"object": "list", "data": [{"object": "embedding",
        "embedding", "index"}], "model", "usage": {"prompt_tokens", "total_tokens"}}, each
        vector as embed() makes it."""
        vectors, count = self.embed(input, return_count=True)
        if isinstance(input, str):
            vectors = [vectors]
        return {"object": "list", "model": check.check_str("model", model, allow_none=True) or self.model_path,
                "data": [{"object": "embedding", "embedding": v, "index": i} for i, v in enumerate(vectors)],
                "usage": {"prompt_tokens": count, "total_tokens": count}}
