"""The network: BERT as the paper builds it, its heads and variants (pre-LN, rotary positions, ALiBi, gated
feed-forward, ModernBERT's shape, ELECTRA). It reads and writes no file (modelfiles/ does) and imports nothing
above it; parallelism, compilation and device placement are the loops'.

    config        ModelConfig and the named sizes
    variants      position schemes, attention biases, feed-forward kinds, norm styles: a record each, in registries
    bert          the paper's network, top to bottom, and its pre-training heads (MLM, NSP)
    blocks        the variants' blocks, each a bert.py block with one thing changed, chosen when a model is built
    positions     the position arithmetic the exported modeling file repeats byte for byte (torch alone)
    heads         the fine-tuning heads: sequence, multiple choice, sentence embedding, token, QA
    dropout       dropout with a cheaper CPU mask
    unpadding     a padded batch run on its real tokens only, its sequences packed into fewer rows
    electra       ELECTRA's generator and discriminator, and the discriminator's head
    vocabulary    a model's vocabulary grown by whole words, new rows at the mean of their old pieces
"""
