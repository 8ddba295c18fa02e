"""The two workers: the Faust agent and the exactly-once transactional loop."""
