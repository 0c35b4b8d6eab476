"""CPU stand-in for the two `flash_attn` kernels SDAR's modeling code calls.

SDAR's `modeling_sdar.py` imports `flash_attn` unconditionally (its RMSNorm
is `flash_attn.ops.triton.layer_norm.rms_norm_fn`, and every decoding
forward whose attention mask is all ones calls `flash_attn_func`). Neither
kernel runs on a CPU, so `make_fixtures.py` puts this package on `sys.path`
when the real one is missing. Each function computes the kernel's math in
float32 with plain torch ops; nothing else of `flash_attn` is provided.
"""

import torch


def flash_attn_func(
    q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **unused
):
  """Non-causal attention in flash_attn's layout.

  Args:
    q: [batch, q_len, heads, head_dim].
    k: [batch, kv_len, kv_heads, head_dim]; heads % kv_heads == 0 (GQA).
    v: like k.
    dropout_p: must be 0 (inference only).
    softmax_scale: defaults to head_dim ** -0.5, as in flash_attn.
    causal: must be False (the only way SDAR calls it).
    **unused: other flash_attn keywords; a non-default one is refused.

  Returns:
    [batch, q_len, heads, head_dim] in q's dtype.
  """
  if causal or dropout_p or any(unused.values()):
    raise NotImplementedError(
        f"cpu flash_attn_func: causal={causal}, dropout_p={dropout_p}, "
        f"{unused} are not supported"
    )
  scale = q.shape[-1] ** -0.5 if softmax_scale is None else softmax_scale
  groups = q.shape[2] // k.shape[2]
  qh = q.transpose(1, 2).float()
  kh = k.transpose(1, 2).float().repeat_interleave(groups, dim=1)
  vh = v.transpose(1, 2).float().repeat_interleave(groups, dim=1)
  weights = torch.softmax(qh @ kh.transpose(-1, -2) * scale, dim=-1)
  return (weights @ vh).transpose(1, 2).to(q.dtype)


def flash_attn_varlen_func(*args, **kwargs):
  del args, kwargs
  raise NotImplementedError("cpu flash_attn: varlen attention is not provided")
