"""Benchmarks: the engines, the pipeline under load, windows, the GPU check."""
