"""The Faust app, its agent, micro-batching, routing and the command line."""
