"""The extraction engine: model loading, prompting, greedy decoding and checking its output."""
