"""Documents longer than the model's window: split into overlapping windows, each decoded as a
document by any engine, and their spans merged back at the original offsets."""
