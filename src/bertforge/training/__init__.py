"""Pre-training: the loop and what it needs.

    config        TrainConfig and the recipes
    plan          what a pretrain command trains: a recipe, a resumed run, or a starting model
    trainer       the loop: steps, accumulation, mixed precision, DDP, evaluation, checkpoints, exact resume
    loader        the order the data is read in, and the DataLoader
    rundir        the run directory, its checkpoints and its policy
    objectives    BERT's or ELECTRA's model for a run
    metrics       running sums of losses and accuracies
    flops         FLOPs per token, for MFU
    continued     continued pre-training from a model directory
    evaluate      `evaluate`: held-out MLM loss, accuracy and perplexity

Never imports tasks/, nor tasks/ this.
"""
