"""Sinks that deliver the output topics elsewhere."""
