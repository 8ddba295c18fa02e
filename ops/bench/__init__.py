"""Benchmarks: the engines, the pipeline under load, drafts, windows, the GPU check."""
