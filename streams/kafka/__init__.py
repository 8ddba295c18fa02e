"""Plain confluent-kafka clients, their security options, the topics, ACLs and replication watch."""
