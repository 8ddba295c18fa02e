"""`seqstream-ops demo` and the seeded sample documents it and the tests use."""
