"""What a model is on disk: everything that reads, validates, converts or writes what `model/` computes, above the
network and the families. A model directory is read here once, through the one boundary, and written whole.

    directory     model directories: read once (`read_model_files`), loaded checked, saved whole; ours or
                  `transformers`'
    schema        what a model directory's config.json may hold, checked once when it is read
    vocabulary    a tokenizer checked against the model it is read with (ids, segments, a padded table)
    header        a safetensors file's index from its header's bytes alone, never mapping the file
    heads         a task model's labels, and its head carried through `pretrain --init-from` and `tokenizer extend`
    hf            our weights and configs as a `transformers` family's and back, through its record (families/)
    card          the model card (README.md) of every model directory
    sentence      sentence-transformers' modules (pooling, Normalize): read, and written back
    origin        what a model read from a directory goes back out with: its class, modules and card
    exported      an export's layout (its graph's path, what config.json records of it): what tells it from a
                  model with weights; what it computes and how it is served is serving/'s
"""
