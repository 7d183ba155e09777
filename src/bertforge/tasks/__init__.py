"""Fine-tuning: one loop (finetune) behind the Task protocol, and a module per task, each with its data, scores
and the answers of its fine-tuned models.

    registry       the tasks by name: one record each, the built-in ones and yours (register_task)
    config         FinetuneConfig
    finetune       the loop: epochs, dev scores, the best epoch's model, checkpoints to resume
    state          where a fine-tuning run is, saved for --resume
    classification one label, several, or a number per text (or pair)
    tagging        a tag per word (NER, part of speech)
    qa             extractive question answering (SQuAD)
    multiple_choice  one choice of several (SWAG)
    similarity     sentence embeddings trained on pairs
    targets, cuts  labels as the loss takes them, their metrics, and thresholds fitted on dev
"""
