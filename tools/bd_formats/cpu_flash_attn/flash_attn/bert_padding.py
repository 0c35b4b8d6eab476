"""Names SDAR imports from `flash_attn.bert_padding` (never called there)."""


def _missing(*args, **kwargs):
  del args, kwargs
  raise NotImplementedError("cpu flash_attn: bert_padding is not provided")


index_first_axis = pad_input = unpad_input = _missing
