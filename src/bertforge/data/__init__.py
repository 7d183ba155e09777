"""From text to training data: tokenizers trained on a corpus, prepared data directories, pre-training instances,
masking, and text batches for fine-tuning and inference.

    vocabulary    `tokenizer train`: a tokenizer trained on a corpus, its accents decided from the corpus
    prepare       `prepare`: a corpus streamed into a data directory, written whole or not at all
    directory     the data directory's format: token memmap, sentence and document offsets, meta.json
    instances     sentence-pair and packed instances
    masking       BERT's 15% and 80/10/10, whole words, mask-rate schedules
    batching      texts tokenized and batched by length, or in windows, for the tasks and inference
    show          `data show`: instances as the model sees them
"""
