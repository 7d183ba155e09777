#!/usr/bin/env bash
# sentence-transformers with its ONNX backend (optimum), and CTranslate2, in an environment of their own, for
# bench_serve.py's race:
# optimum pins a transformers older than bertforge's tests use, so it cannot share .venv.
#
#   bash benchmarks/st_env.sh .st-env
#   python benchmarks/bench_serve.py --model MODEL --st-python .st-env/bin/python
set -euo pipefail
ENV=${1:-.st-env}
python3 -m venv "$ENV"
"$ENV/bin/pip" install -q torch==2.13.0  # the CPU build, as the Makefile pins it
# pinned: unpinned, `sentence-transformers[onnx]` sent pip backtracking through optimum's releases for 25 minutes
"$ENV/bin/pip" install -q "sentence-transformers==5.7.0" "transformers==4.57.6" "optimum==2.1.0" \
    "optimum-onnx[onnxruntime]==0.1.0"
"$ENV/bin/pip" install -q "ctranslate2==4.8.5"  # CTranslate2's int8 encoder; its converter reads transformers' files
"$ENV/bin/python" -c "import optimum, sentence_transformers, transformers; print('sentence-transformers',
    sentence_transformers.__version__, '| transformers', transformers.__version__)"
