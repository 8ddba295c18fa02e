"""`seqstream-ops eval`: accuracy against ground truth, the rule baseline, the table."""
