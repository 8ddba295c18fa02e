"""Readiness and the operations HTTP pages."""
