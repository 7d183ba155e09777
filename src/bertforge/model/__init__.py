"""The network: BERT as the paper builds it, its heads and variants (pre-LN, rotary positions, ALiBi, gated
feed-forward, ModernBERT's shape, ELECTRA), their Hugging Face layouts, and model directories on disk.
Imports nothing above it; parallelism, compilation and device placement are the loops'.

    config        ModelConfig and the named sizes
    variants      position schemes and attention biases, one object each, in one registry
    bert          the network, top to bottom, and its pre-training heads (MLM, NSP, ELECTRA's)
    heads         the fine-tuning heads: sequence, multiple choice, sentence embedding, token, QA
    dropout       dropout with a cheaper CPU mask
    unpadding     a padded batch run on its real tokens only, its sequences packed into fewer rows
    electra       ELECTRA's generator and discriminator
    hf            our weights and configs to and from transformers' BERT, RoBERTa-PreLayerNorm and ModernBERT
    directory     model directories: saved whole, loaded checked, ours or transformers'
    sentence      sentence-transformers' modules (pooling, Normalize): read, and written back
    origin        what a model read from a directory goes back out with: its class, modules and card
"""
