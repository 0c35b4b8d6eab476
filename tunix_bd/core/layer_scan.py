# Copyright 2026 The tunix_bd Authors.
# SPDX-License-Identifier: Apache-2.0
"""A Tunix decoder's layers compiled once: one `jax.lax.scan` over them.

`scanned(model)` is a copy of the model whose `layers` is one
`ScannedLayers`, so the model's own `__call__` (embedder, final norm, head,
qwix's LoRA interception) runs unchanged around a scan of Tunix's own
decoder-layer call. The layers' states are stacked inside the traced
function, so the model keeps Tunix's per-layer layout everywhere else; a KV
cache scans with the layers stacked (`stack_cache`). The why and the
trade-offs: docs/design.md "Layers compiled once".
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


# The key of a stacked KV cache (`stack_cache`): one entry, every layer's
# `k`, `v` and `end_index` with a leading layer axis.
STACKED = "stacked_layers"


def stack_states(layers) -> tuple[Any, Any]:
  """`(graphdef, states)` of layers of `same_structure`: the first one's
  graphdef and every layer's state stacked on a leading axis.

  The stacked Variables keep each layer's sharding metadata, one axis
  short: fine while nothing shards them eagerly (a stack lives inside a
  traced call).
  """
  states = _stacked(nnx.state(layer) for layer in layers)
  return nnx.graphdef(layers[0]), states


def _stacked(trees) -> Any:
  """Pytrees of one structure as one, each leaf stacked on a new axis 0."""
  return jax.tree.map(lambda *xs: jnp.stack(xs), *trees)


def scan_stacked(graphdef, states, call, x, caches=None):
  """`x` through stacked layers (`stack_states`) in one `jax.lax.scan`.

  `call(layer, x, cache) -> (x, new_cache)` is traced once, on a layer
  merged from one slice of `states`, and the matching slice of `caches` (a
  pytree with a leading layer axis, or None).

  Returns:
    `(x, new_caches)`, the new caches stacked as `caches` (None if None).
  """

  def body(x, inputs):
    state, cache = inputs
    layer = nnx.merge(graphdef, state)
    x, new_cache = call(layer, x, cache)
    after = nnx.state(layer)
    if jax.tree.structure(after) != jax.tree.structure(state) or any(
        a is not b
        for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(state))
    ):
      # The loop would keep such an update; a scan body drops it.
      raise ValueError(
          "a layer of this model updates its own state when called (e.g."
          " quantization statistics), which a scan over the layers cannot"
          " keep; set scan_layers=False (model.scan_layers in a recipe)."
      )
    return x, new_cache

  return jax.lax.scan(body, x, (states, caches))


def _is_layer_cache(value) -> bool:
  """Whether `value` is a Tunix layer's KV cache (`k`, `v`, `end_index`)."""
  return isinstance(value, dict) and "end_index" in value


def stack_cache(kv: dict) -> dict:
  """A Tunix KV cache (`layer_0`, `layer_1`, ...) stacked: `{STACKED: {k:
  [layers, ...], v: ..., end_index: [layers, batch]}}`, the layout a
  `scanned` model's calls read and write (`call_stacked`)."""
  return {STACKED: _stacked(kv[f"layer_{i}"] for i in range(len(kv)))}


def is_stacked(kv) -> bool:
  """Whether `kv` is a `stack_cache` cache."""
  return isinstance(kv, dict) and STACKED in kv


def call_stacked(model, kv: dict, call):
  """`call(scanned model, kv)` on a `stack_cache` cache: the model's layers
  in one scan over the stacked cache. `call(model, kv) -> (values,
  new_kv)` is a Tunix decoder call; returns `(values, new stacked kv)`."""
  copy = scanned(model)
  if not is_scanned(copy):
    raise ValueError(
        "a stacked KV cache (init_block_cache(scan_layers=True)) needs a"
        " model whose layers scan (at least two of one structure), not this"
        f" {type(model).__name__} of {len(getattr(model, 'layers', ()))}."
    )
  # The scanned model is one layer, `layer_0`, of the whole stack.
  values, new_kv = call(copy, {"layer_0": kv[STACKED]})
  return values, {STACKED: new_kv["layer_0"]}


class ScannedLayers(nnx.Module):
  """Every layer of a decoder as the one layer its `__call__` loops over.

  Holds the layers' states stacked (`stack_states`), once per copy: a loop
  that calls a `scanned` model many times (decoding) reads the stack it
  made once, not a new one per call. Called as a Tunix decoder layer,
  `(new_cache, x) = layer(x, *args, **kwargs)`, the arguments the same for
  every layer but the layer cache (Tunix's `k`, `v`, `end_index`): without
  one, `new_cache` is None; with one, its leaves have a leading layer axis,
  scanned with the layers.
  """

  def __init__(self, layers):
    self.num_layers = len(layers)
    self.graphdef, states = stack_states(layers)
    self.states = nnx.data(states)

  def __call__(self, x, *args, **kwargs):
    if any(_is_layer_cache(value) for value in kwargs.values()):
      raise ValueError("ScannedLayers takes a layer cache positionally.")
    where = [i for i, arg in enumerate(args) if _is_layer_cache(arg)]
    at = where[0] if where else None
    if at is not None and any(
        jnp.ndim(leaf) == 0 or jnp.shape(leaf)[0] != self.num_layers
        for leaf in jax.tree.leaves(args[at])
    ):
      raise ValueError(
          f"a scanned model of {self.num_layers} layers takes its KV cache"
          " stacked on a leading layer axis (layer_scan.stack_cache)."
      )

    def call(layer, x, cache):
      if at is None:
        return layer(x, *args, **kwargs)[1], None
      with_cache = args[:at] + (cache,) + args[at + 1 :]
      new_cache, x = layer(x, *with_cache, **kwargs)
      return x, new_cache

    caches = None if at is None else args[at]
    x, new_caches = scan_stacked(self.graphdef, self.states, call, x, caches)
    return new_caches, x


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


def is_scanned(model: Any) -> bool:
  """Whether `model` is a `scanned` copy."""
  layers = getattr(model, "layers", ())
  return len(layers) == 1 and isinstance(layers[0], ScannedLayers)


def can_scan(model: Any) -> bool:
  """Whether `scanned(model)` runs its layers in one scan (nothing is
  stacked to find out)."""
  return is_scanned(model) or _scannable_copy(model) is not None


def _scannable_copy(model: Any) -> Any:
  """A copy of `model` whose layers can scan (qwix paths made the first
  layer's), or None; it shares the model's arrays."""
  model_type = getattr(type(model), "_unquantized_type", type(model))
  if model_type not in families.MODEL_CLASSES.values():
    return None
  if len(model.layers) < 2:
    return None
  copy = nnx.merge(*nnx.split(model))
  _qwix_paths_of_first(list(copy.layers))
  return copy if same_structure(list(copy.layers)) else None


def scanned(model: Any) -> Any:
  """`model`, or a copy of it whose layers run in one scan.

  The copy is made when `model` is a Tunix decoder of a supported family
  (`families`) with at least two layers of one structure (one graphdef);
  a `scanned` copy is returned as it is, and anything else (another
  callable, layers that differ) too, its Python loop exact as before. Call
  it inside the traced function: the copy shares the model's parameter
  values, not its Variables, its layers' stacked once per copy. The copy
  takes a KV cache only as `stack_cache` lays it out (`call_stacked`).
  """
  copy = None if is_scanned(model) else _scannable_copy(model)
  if copy is None:
    return model
  copy.layers = nnx.List([ScannedLayers(list(copy.layers))])
  return copy
