"""A byte-level BPE model directory, for measuring how `tokenizer extend` cuts text with a BPE tokenizer
(experiments/continued.md): an 8,192-token byte-level BPE trained on the first 20 MB of a corpus (BERT's
special-token names), beside a random ModernBERT-shaped mini. No learning is measured, only how text is cut.

    python experiments/bpe_model.py ../shared/data/gutenberg/train.txt bpe-books
    bertforge tokenizer extend bpe-books TASK_TEXT.txt --add 1000 --out bpe-tweets --json
"""

import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from bertforge import BertForPreTraining, ModelConfig, save_model
from bertforge.families import MODERNBERT_SHAPE

corpus, out = sys.argv[1], sys.argv[2]
lines = [line for line in open(corpus, encoding="utf-8").read(20_000_000).split("\n") if line.strip()]
tok = Tokenizer(models.BPE(unk_token="[UNK]"))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
tok.train_from_iterator(
    lines,
    trainers.BpeTrainer(
        vocab_size=8192,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    ),
)
tok.post_processor = processors.TemplateProcessing(
    single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
)
config = ModelConfig(
    vocab_size=tok.get_vocab_size(),
    hidden_size=256,
    num_layers=4,
    num_heads=4,
    intermediate_size=680,
    **MODERNBERT_SHAPE,
    norm_bias=False,
    linear_bias=False,
)
save_model(BertForPreTraining(config), out, tok)
