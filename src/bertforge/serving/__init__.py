"""The serving unit: a model as a graph that ONNX Runtime serves alone, checked before it is written and again
before it runs, and the one loader of the verbs that answer (embed, classify, tag, answer, choose).

    export      `bertforge export`: a model directory as an ONNX graph, checked against PyTorch, held to its
                precision's gate, written whole
    kinds       one object per kind of answer (masked LM, sequence, tokens, spans, choice, encoder): its graph's
                outputs, their widths and bounds, its check texts, how the int8 gate reads it, its served call
    precisions  one record per precision (fp32, int8): how the model is readied, how the graph is converted,
                what the check must show
    fused       BERT's attention as ONNX Runtime's fused operator, for the int8 graph
    smoothing   activation outliers moved into the weights before int8 (SmoothQuant)
    graph       an exported graph checked against its config, its recorded digest and the verb's head
    served      the served graph (`ServedGraph`), each run bounded in time, its answers checked; `load_served`

Above modelfiles/ (whose loading gives a network, never a graph) and below the tasks and the answers, which load
through `load_served`. The HTTP service that puts those answers on the network is service/, above them all.
"""
