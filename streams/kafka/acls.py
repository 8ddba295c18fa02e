"""The ACLs a worker's principal needs on a broker that enforces them, and granting them.

Exactly these, nothing cluster-wide (topics are created beforehand by an admin, e.g. with
`seqstream topics create` run as the admin):

- READ on the raw topic (READ implies DESCRIBE), and READ on the consumer group `worker.app_id`;
- WRITE on each output topic: fields, review, alerts, dead letters, audit (WRITE implies DESCRIBE);
- with `worker.delivery=exactly_once`, also WRITE on the worker's transactional id (the producer's
  transactions; offsets sent to a transaction are authorised by the READ on the group): the literal
  id when `worker.transactional_id` is set, else every id prefixed `<app_id>-`, because the default
  id ends in the worker's pid, which the admin granting the ACL cannot know.

Nothing for Faust's internal topics: with `topic_disable_leader` and no tables the app creates
none (tests/test_security.py runs the worker with exactly these). An app that adds a table would
also need ALL on topics prefixed `<app_id>-`.

An idempotent producer needs no IDEMPOTENT_WRITE on the cluster when it may WRITE a topic (KIP-679).
"""

from __future__ import annotations

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from streams.kafka.clients import client_config
from streams.settings import Settings, transactional_id_prefix


def allow(
    principal: str,
    kind: ResourceType,
    name: str,
    operation: AclOperation,
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> AclBinding:
    """One ALLOW ACL on the resource named (or every one it prefixes), from any host."""
    return AclBinding(kind, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)


def worker_acl_bindings(settings: Settings, principal: str) -> list[AclBinding]:
    """`principal` as Kafka writes it, e.g. `User:seqstream-worker`."""
    t = settings.topics
    outputs = (t.fields, t.review, t.alerts, t.dead_letter, t.audit)
    bindings = [
        allow(principal, ResourceType.TOPIC, t.raw, AclOperation.READ),
        allow(principal, ResourceType.GROUP, settings.worker.app_id, AclOperation.READ),
        *(allow(principal, ResourceType.TOPIC, name, AclOperation.WRITE) for name in outputs),
    ]
    if settings.worker.delivery == "exactly_once":
        if settings.worker.transactional_id:
            name, pattern = settings.worker.transactional_id, ResourcePatternType.LITERAL
        else:
            name, pattern = transactional_id_prefix(settings.worker), ResourcePatternType.PREFIXED
        bindings.append(allow(principal, ResourceType.TRANSACTIONAL_ID, name, AclOperation.WRITE, pattern))
    return bindings


def grant_worker_acls(settings: Settings, principal: str, timeout_s: float = 30.0) -> list[AclBinding]:
    """Create the worker's ACLs with the credentials in `settings` (a principal allowed to ALTER the
    cluster, e.g. a super user). Safe to run again: an existing ACL is simply kept."""
    bindings = worker_acl_bindings(settings, principal)
    admin = AdminClient(client_config(settings))
    for future in admin.create_acls(bindings, request_timeout=timeout_s).values():
        future.result(timeout=timeout_s)  # raises KafkaException, e.g. when we may not alter ACLs
    return bindings
