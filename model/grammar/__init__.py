"""The answer grammar as a mask over the vocabulary: what greedy decoding may choose next."""
