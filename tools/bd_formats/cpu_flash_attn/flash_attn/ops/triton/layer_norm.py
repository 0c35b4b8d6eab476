"""`rms_norm_fn` of flash_attn's Triton layer norm, in float32 torch ops."""

import torch


def rms_norm_fn(x, weight, bias=None, eps=1e-6, **unused):
  """y = x * rsqrt(mean(x^2, -1) + eps) * weight (+ bias), in x's dtype.

  Like the kernel, it normalizes and scales in float32 and casts once at the
  end. Residual, dropout and pre-norm options are refused.
  """
  if any(v not in (None, False, 0.0) for v in unused.values()):
    raise NotImplementedError(f"cpu rms_norm_fn: {unused} are not supported")
  x32 = x.float()
  y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
  y = y * weight.float()
  if bias is not None:
    y = y + bias.float()
  return y.to(x.dtype)
