"""`bertforge serve`: a model's answers over HTTP, batched dynamically, bounded, measured.

config    ServeConfig: where it listens, how it batches, what one request may ask for
schema    what a request body may hold: checked field by field, each fault a status and one line
answers   one object per answer kind (embeddings, masked LM, classification, tags, spans): its engine, its
          endpoints' schemas, its batched engine call, its responses
batching  the queue: requests' texts batched by a token budget and a short wait, bounded, run by one thread
metrics   Prometheus' text format: requests, latency, batches, queue depth, tokens
app       the Starlette application: routes, limits, errors as JSON, health, info
server    uvicorn: one process or several sharing the port, a graceful stop on SIGTERM
"""
