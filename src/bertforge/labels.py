"""Label conventions shared by the data pipeline, the losses and evaluation.

They follow Hugging Face, so our batches and `transformers` models agree:
  IGNORE_INDEX  -100 in an MLM (or token-classification) label: no prediction at this position
  IS_NEXT       NSP class 0: B really follows A
  NOT_NEXT      NSP class 1: B comes from another document
  IN_ORDER      SOP class 0 (ALBERT's sentence-order prediction): A then B, as written
  SWAPPED       SOP class 1: the same two segments, B first
"""

IGNORE_INDEX = -100
IS_NEXT, NOT_NEXT = 0, 1
IN_ORDER, SWAPPED = 0, 1
