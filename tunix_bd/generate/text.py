# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""Text in, text out: decoding strings with a converted block-diffusion model.

A thin layer over the token-level `denoise.Denoiser` (README.md, "Decoding
from Python"). A prompt is a user message (rendered with the tokenizer's
chat template), a whole conversation (`[{"role", "content"}, ...]`), a
string used as it is (`chat_template=False`: raw text, or what
`apply_chat_template(..., tokenize=False)` rendered), or token ids: a list
of ints, or the `BatchEncoding` that transformers 5's
`apply_chat_template(..., tokenize=True)` returns.

The denoiser's layout depends on the longest prompt, so prompts are padded
to a multiple of `prompt_bucket` tokens and one compiled program serves
every call whose longest prompt falls in the same bucket.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

import jax
import numpy as np

from tunix_bd.core import bd_config as bd_config_lib
from tunix_bd.data import chat
from tunix_bd.generate import denoise
from tunix_bd.generate import settings as settings_lib
from tunix_bd.models import converted

Prompt = Union[str, Sequence[Mapping[str, str]], Sequence[int], Mapping]


def load_model(
    checkpoint: str, mesh: jax.sharding.Mesh | None = None
) -> converted.ConvertedModel:
  """A converted checkpoint opened (`models.converted.open_converted`) and
  its model loaded to decode (its matrices in the compute dtype, float32)."""
  return converted.open_converted(checkpoint).load(mesh)


def prompt_ids(
    tokenizer: Any,
    prompt: Prompt,
    *,
    chat_template: bool,
    options: chat.ChatOptions = chat.ChatOptions(),
) -> list:
  """The token ids of one prompt (see the module docstring for the forms).

  Chat prompts are rendered with `options`, the template switches the model
  was trained with (`data.enable_thinking`).
  """
  if isinstance(prompt, Mapping):  # A BatchEncoding (transformers >= 5).
    if "input_ids" not in prompt:
      raise ValueError(
          f"a mapping prompt must hold 'input_ids', got keys {list(prompt)}."
      )
    prompt = prompt["input_ids"]
  if isinstance(prompt, str):
    if chat_template:
      message = {"role": "user", "content": prompt}
      return list(chat.encode_prompt(tokenizer, [message], options))
    return list(tokenizer.encode(prompt, add_special_tokens=False))
  if hasattr(prompt, "tolist"):  # A NumPy or JAX array.
    prompt = prompt.tolist()
  items = list(prompt)
  if items and all(isinstance(m, Mapping) for m in items):
    return list(chat.encode_prompt(tokenizer, items, options))
  if len(items) == 1 and isinstance(items[0], list):  # A [1, length] batch.
    items = items[0]
  if all(isinstance(i, (int, np.integer)) for i in items):
    return [int(i) for i in items]
  raise ValueError(
      "a prompt must be a string, a list of chat messages, token ids or a"
      f" BatchEncoding with input_ids; got {type(prompt).__name__}."
  )


class TextGenerator:
  """Decodes lists of prompts to completion strings; reusable."""

  def __init__(
      self,
      model: Any,
      tokenizer: Any,
      *,
      bd: bd_config_lib.BlockDiffusionConfig,
      max_new_tokens: int = 64,
      chat_template: bool = True,
      enable_thinking: bool | None = None,
      prompt_bucket: int = 32,
      **rule_settings,
  ):
    """Checks the settings; compiles lazily, once per prompt bucket.

    Args:
      tokenizer: the model's tokenizer (EOS stops a row; pad fills the rest).
      chat_template: render string prompts as a user message with the chat
        template (True), or use them as they are (False).
      enable_thinking: passed to the chat template (Qwen3's thinking
        switch), as `data.enable_thinking` was in training; None passes
        nothing.
      prompt_bucket: prompt lengths are rounded up to a multiple of this.
      **rule_settings: `denoise.Sampling` fields (`threshold`, `rule`,
        `temperature`, `use_cache`, ...) and `extra_stop_ids`, as
        `settings.denoise_config` takes them.
    """
    self.model, self.tokenizer, self.bd = model, tokenizer, bd
    self.chat_template = chat_template
    self.options = chat.ChatOptions(enable_thinking=enable_thinking)
    self._bucket = prompt_bucket
    self._settings = dict(rule_settings, max_new_tokens=max_new_tokens)
    # Fails now, naming the setting, rather than at the first call.
    settings_lib.denoise_config(tokenizer, prompt_bucket, **self._settings)
    self._denoisers: dict[int, denoise.Denoiser] = {}

  @classmethod
  def from_checkpoint(cls, checkpoint: str, **settings) -> TextGenerator:
    """Loads a converted checkpoint; `settings` as in `__init__`.

    `enable_thinking` defaults to the one the checkpoint was trained with,
    and another value is refused (`chat.trained_options`).
    """
    loaded = load_model(checkpoint)
    settings["enable_thinking"] = chat.trained_options(
        loaded.chat_options.to_dict(),
        chat.ChatOptions(enable_thinking=settings.get("enable_thinking")),
    ).enable_thinking
    return cls(loaded.model, loaded.tokenizer, bd=loaded.bd, **settings)

  def generate(
      self, prompts: Sequence[Prompt], *, seeds: Sequence[int] | None = None
  ) -> tuple[list[str], denoise.DenoiseOutput]:
    """`(completions, the denoiser's full output)` of a batch of prompts.

    Completions exclude the stop token; `seeds` (one per row) are needed
    when temperature > 0.
    """
    if isinstance(prompts, (str, Mapping)):
      raise ValueError("prompts must be a list of prompts, not one prompt.")
    ids = [
        prompt_ids(
            self.tokenizer,
            p,
            chat_template=self.chat_template,
            options=self.options,
        )
        for p in prompts
    ]
    if not ids:
      raise ValueError("no prompts to decode.")
    width = -(-max(len(p) for p in ids) // self._bucket) * self._bucket
    if width not in self._denoisers:
      config = settings_lib.denoise_config(
          self.tokenizer, width, **self._settings
      )
      self._denoisers[width] = denoise.Denoiser(
          self.model, bd=self.bd, config=config
      )
    out = self._denoisers[width](ids, seeds=seeds)
    texts = [self.tokenizer.decode(c.tolist()) for c in out.completions]
    return texts, out

  def __call__(
      self, prompts: Sequence[Prompt], *, seeds: Sequence[int] | None = None
  ) -> list[str]:
    """The completion strings of `prompts`; see `generate`."""
    return self.generate(prompts, seeds=seeds)[0]
