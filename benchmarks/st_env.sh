#!/usr/bin/env bash
# sentence-transformers with its ONNX backend (optimum) in an environment of its own, for bench_serve.py's race:
# optimum pins a transformers older than bertforge's tests use, so it cannot share .venv.
#
#   bash benchmarks/st_env.sh .st-env
#   python benchmarks/bench_serve.py --model MODEL --st-python .st-env/bin/python
set -euo pipefail
ENV=${1:-.st-env}
python3 -m venv "$ENV"
"$ENV/bin/pip" install -q torch==2.13.0  # the CPU build, as the Makefile pins it
"$ENV/bin/pip" install -q "sentence-transformers[onnx]"
"$ENV/bin/python" -c "import optimum, sentence_transformers, transformers; print('sentence-transformers',
    sentence_transformers.__version__, '| transformers', transformers.__version__)"
