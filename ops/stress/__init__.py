"""A worker under load and hostile input: the soak, hostile messages, the worker process."""
