"""One micro-batch's path: the driver, the pipeline, isolated batches and routing."""
