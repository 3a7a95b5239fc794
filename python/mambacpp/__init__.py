# SPDX-License-Identifier: MIT
"""mambacpp: Mamba-family language and sequence models in C++, from Python.

Load a Hugging Face checkpoint folder or a llama.cpp GGUF file and generate text, or run a
Mamba backbone over numpy feature sequences::

    import mambacpp
    model = mambacpp.Model("data/demo-model")
    print(model.generate("The state space model", max_tokens=8, temperature=0))
    for piece in model.generate("Once", max_tokens=8, stream=True):
        print(piece, end="")

Every result is exact: a sequence's output is the same bit for bit alone or in a batch, in one
call or split over several with a carried state, on 1 thread or many. Errors the engine
reports (a malformed file, a token id outside the vocabulary, a bad sampling value) raise
mambacpp.Error, a ValueError, with the engine's message. Computation releases the GIL, and
Ctrl-C stops a generation between tokens.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _mambacpp
from ._mambacpp import Error, State

__all__ = ["Model", "State", "Error", "Llama"]
__version__ = getattr(_mambacpp, "__version__", "0.1.0")

Prompt = Union[str, Sequence[int]]


def _body(**fields: Any) -> str:
    """A request body with the fields that were given (None means the engine's default)."""
    return json.dumps({key: value for key, value in fields.items() if value is not None})


class Model(_mambacpp.Model):
    """A loaded checkpoint: weights, tokenizer and chat template.

    Args:
        path: a Hugging Face folder (config.json, safetensors, tokenizer.json) or a GGUF file.
        device: "cpu", "vulkan" or "vulkan:N".
        dtype: weight storage, e.g. "f32", "bf16", "f16", "q8_0", "q4_0", "q4_k"; None keeps
            what the checkpoint stores.
        threads: compute threads; 0 uses every core.

    Sequence-model use (checkpoints with an input projection take feature rows):
        forward(features [T, input_dim] float32, output="all"|"last"|"mean", state=None)
        forward_batch(list of feature arrays, output=...), one pass over the weights
    Language models:
        tokenize, detokenize, logits, generate, create_completion, create_chat_completion
        embed(str | ids | list of either, pooling="mean"|"last", normalize=True): float32
            [d_model] or [inputs, d_model], the same vectors as /v1/embeddings and mb_embed
    """

    def __init__(self, path: str, device: str = "cpu", dtype: Optional[str] = None, threads: int = 0):
        super().__init__(str(path), device, dtype, threads)

    def __repr__(self) -> str:
        return (f"mambacpp.Model({self.path!r}, device={self.device!r}, dtype={self.dtype!r}, "
                f"threads={self.threads})")

    def _request(self, kind: str, body: str, stream: bool, max_context: int = 0):
        """Runs a request body ("completion" or "chat") and returns the response dict, or with
        stream=True an iterator of chunk dicts. max_context > 0 is a context window, as
        `mambacpp serve -c`: a prompt must be shorter, and max_tokens is cut to the room left."""
        if not stream:
            return json.loads(self._complete(kind, body, max_context))
        # The request is validated and queued now, so bad arguments raise here, not at the
        # first chunk; the generator cancels it when closed early.
        completion = self._stream(kind, body, max_context)

        def chunks() -> Iterator[Dict[str, Any]]:
            try:
                for text in completion:
                    yield json.loads(text)
            finally:
                completion.close()

        return chunks()

    def generate(self, prompt: Prompt, max_tokens: int = 16, temperature: float = 0.8, top_k: int = 40,
                 top_p: float = 0.95, min_p: float = 0.05, repeat_penalty: float = 1.0,
                 seed: Optional[int] = None, stop: Optional[Union[str, List[str]]] = None,
                 stream: bool = False, ignore_eos: bool = False) -> Union[str, Iterator[str]]:
        """Generates a continuation of `prompt` (text, or token ids).

        Returns the generated text, or with stream=True an iterator of text pieces as they
        become final. temperature=0 is greedy; `seed` fixes the random draws (one is drawn
        when None); generation stops at an end-of-text token, at `max_tokens`, or at a stop
        string (which is not included); ignore_eos=True generates past end-of-text tokens.
        """
        if isinstance(prompt, (bytes, bytearray)):
            prompt = prompt.decode("utf-8")
        if not isinstance(prompt, str):
            prompt = [int(token) for token in prompt]
        body = _body(prompt=prompt, max_tokens=max_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                     min_p=min_p, repeat_penalty=repeat_penalty, seed=seed, stop=stop,
                     ignore_eos=ignore_eos or None)
        if not stream:
            return self._request("completion", body, False)["choices"][0]["text"]
        chunks = self._request("completion", body, True)

        def pieces() -> Iterator[str]:
            for chunk in chunks:
                for choice in chunk.get("choices", []):
                    if choice.get("text"):
                        yield choice["text"]

        return pieces()

    def create_completion(self, prompt: Prompt, max_tokens: Optional[int] = 16, temperature: float = 0.8,
                          top_p: float = 0.95, min_p: float = 0.05, top_k: int = 40,
                          stop: Optional[Union[str, List[str]]] = None, seed: Optional[int] = None,
                          repeat_penalty: float = 1.0, logprobs: Optional[int] = None, stream: bool = False,
                          model: Optional[str] = None) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """An OpenAI-style text completion, as `mambacpp serve` answers /v1/completions.

        Returns the response dict ({"id", "object": "text_completion", "choices": [{"text",
        "finish_reason", ...}], "usage"}), or with stream=True an iterator of chunk dicts.
        """
        if not isinstance(prompt, str):
            prompt = [int(token) for token in prompt]
        body = _body(prompt=prompt, max_tokens=max_tokens, temperature=temperature, top_p=top_p, min_p=min_p,
                     top_k=top_k, stop=stop, seed=seed, repeat_penalty=repeat_penalty, logprobs=logprobs,
                     model=model)
        return self._request("completion", body, stream)

    def create_chat_completion(self, messages: List[Dict[str, Any]], temperature: float = 0.2,
                               top_p: float = 0.95, top_k: int = 40, min_p: float = 0.05,
                               stop: Optional[Union[str, List[str]]] = None, seed: Optional[int] = None,
                               max_tokens: Optional[int] = None, repeat_penalty: float = 1.0,
                               logprobs: Optional[bool] = None, top_logprobs: Optional[int] = None,
                               stream: bool = False, model: Optional[str] = None,
                               tools: Optional[List[Dict[str, Any]]] = None,
                               chat_template_kwargs: Optional[Dict[str, Any]] = None
                               ) -> Union[Dict[str, Any], Iterator[Dict[str, Any]]]:
        """An OpenAI-style chat completion, as `mambacpp serve` answers /v1/chat/completions.

        `messages` are OpenAI message dicts ({"role", "content"}, with tool_calls, tool_call_id
        and any other keys), rendered with the checkpoint's chat template (or the documented
        plain format when it has none) as transformers' apply_chat_template(messages,
        tools=tools, add_generation_prompt=True, **chat_template_kwargs) renders them. Returns
        the response dict ({"choices": [{"message": {"role": "assistant", "content"},
        "finish_reason"}], "usage"}; a tool call the model writes stays in the content, as
        text), or with stream=True an iterator of "chat.completion.chunk" dicts. A follow-up
        turn that repeats the conversation resumes from its cached state.
        """
        body = _body(messages=messages, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
                     stop=stop, seed=seed, max_tokens=max_tokens, repeat_penalty=repeat_penalty,
                     logprobs=logprobs, top_logprobs=top_logprobs, model=model, tools=tools,
                     chat_template_kwargs=chat_template_kwargs)
        return self._request("chat", body, stream)


from .llama import Llama  # noqa: E402  (it builds on Model, defined above)
