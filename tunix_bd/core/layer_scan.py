# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Tunix decoder's layers compiled once: one `jax.lax.scan` over them.

Tunix's decoders loop over `model.layers` in Python, so XLA compiles the
layer once per layer (28 times for Qwen3-0.6B). `scanned(model)` is a copy
of the model whose `layers` is one `ScannedLayers`: the model's own
`__call__` (embedder, final norm, head, qwix's LoRA interception) runs
unchanged around a scan of Tunix's own `DecoderLayer.__call__` (so
`model.remat` applies per layer as in the loop). The layers' states are
stacked inside the traced call, so the model, its optimizer state,
checkpoints and LoRA parameters keep Tunix's per-layer layout: the gradient
of a stack is the unstack. docs/design.md "Layers compiled once".
"""

from __future__ import annotations

from typing import Any

from flax import nnx
import jax
import jax.numpy as jnp
from tunix_bd.core import families


def same_structure(layers) -> bool:
  """Whether `layers` are at least two modules of one graphdef."""
  if len(layers) < 2:
    return False
  first = nnx.graphdef(layers[0])
  return all(nnx.graphdef(layer) == first for layer in layers[1:])


def scan(layers, call, x):
  """`x` through every layer of `same_structure` in one `jax.lax.scan`.

  `call(layer, x) -> x` is traced once, on a layer merged from one slice of
  the layers' states, stacked here.
  """
  graphdef = nnx.graphdef(layers[0])

  def body(x, state):
    layer = nnx.merge(graphdef, state)
    x = call(layer, x)
    after = nnx.state(layer)
    if jax.tree.structure(after) != jax.tree.structure(state) or any(
        a is not b
        for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state))
    ):
      # The loop would keep such an update; a scan body drops it.
      raise ValueError(
          "a layer of this model updates its own state when called (e.g."
          " quantization statistics), which a scan over the layers cannot"
          " keep; set model.scan_layers=False."
      )
    return x, None

  states = jax.tree.map(
      lambda *xs: jnp.stack(xs), *[nnx.state(layer) for layer in layers]
  )
  return jax.lax.scan(body, x, states)[0]


class ScannedLayers(nnx.Module):
  """Every layer of a decoder as the one layer its `__call__` loops over.

  Called as a Tunix decoder layer without a cache, `(None, x) = layer(x,
  *args, **kwargs)`, the arguments the same for every layer.
  """

  def __init__(self, layers):
    self.layers = nnx.List(layers)

  def __call__(self, x, *args, **kwargs):
    call = lambda layer, x: layer(x, *args, **kwargs)[1]
    return None, scan(self.layers, call, x)


def _qwix_paths_of_first(layers) -> None:
  """Gives every layer's modules the qwix paths of the first layer's.

  qwix (LoRA) names each module by its path, `layers/<i>/...`: the only
  difference between otherwise identical layers. Its rules then see layer
  0's path for every layer: the same rule wherever the layers' LoRA
  parameters are alike (one rule, as `models.lora.apply_lora` makes).
  """
  first = dict(nnx.iter_modules(layers[0]))
  for layer in layers[1:]:
    for path, module in nnx.iter_modules(layer):
      if hasattr(module, "qwix_path") and path in first:
        module.qwix_path = first[path].qwix_path


def scanned(model: Any) -> Any:
  """`model`, or a copy of it whose layers run in one scan.

  The copy is made when `model` is a Tunix decoder of a supported family
  (`families`) with at least two layers of one structure (one graphdef);
  anything else (another callable, layers that differ) is returned as it
  is, its Python loop exact as before. Call it inside the traced function:
  the copy shares the model's parameter values, not its Variables. The
  copy takes no KV cache.
  """
  model_type = getattr(type(model), "_unquantized_type", type(model))
  if model_type not in families.MODEL_CLASSES.values():
    return model
  if len(model.layers) < 2:
    return model
  copy = nnx.merge(*nnx.split(model))
  layers = list(copy.layers)
  _qwix_paths_of_first(layers)
  if not same_structure(layers):
    return model
  copy.layers = nnx.List([ScannedLayers(layers)])
  return copy
