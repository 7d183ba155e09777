"""A model prepared for serving outside PyTorch.

export    a model directory as an ONNX graph (any family, variant and head), checked against PyTorch, optionally
          int8; model/onnx.py serves such a directory to `embed`, `classify`, `tag` and `answer`
"""
