"""The model runner: BLOOM as plain modules, attention backends, the static KV cache, greedy decoding
and the engines that string them together."""
