"""The training recipe, tiny and stand-in models, and the shipped demo model's build."""
