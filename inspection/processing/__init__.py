"""Processing of inspection data: the per-run context and (later) the pipeline."""
