"""Message contracts (msgspec structs) and their exported JSON Schemas."""
