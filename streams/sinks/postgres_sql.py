"""The PostgreSQL sink's tables and statements: the schema a DBA can create by hand (SCHEMA_DDL),
and the few statements the sink runs, each `{schema}`-qualified (streams/sinks/postgres.py fills it)."""

TABLES_DDL = """
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {schema}.doc_fields (
    doc_id          text PRIMARY KEY,
    record          jsonb NOT NULL,       -- the FieldRecord as the worker wrote it
    kafka_topic     text NOT NULL,
    kafka_partition integer NOT NULL,
    kafka_offset    bigint NOT NULL,      -- a record replaces this row only with a higher offset
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS {schema}.sink_offsets (
    kafka_topic     text NOT NULL,
    kafka_partition integer NOT NULL,
    next_offset     bigint NOT NULL,      -- where the sink resumes: written with the rows it covers
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kafka_topic, kafka_partition)
);
"""

# One row per extracted value, over any `doc_fields` with the record as jsonb: the sink's, or a view
# over Kafka Connect's table (ops/connect/worker.py), so that the same BI queries read either.
FIELD_VALUES_VIEW = """
CREATE OR REPLACE VIEW {schema}.field_values AS
SELECT d.doc_id,
       f.label,
       s.span ->> 'text'                              AS value,
       s.span -> 'normalised' ->> 'value'             AS normalised,
       s.span -> 'normalised' ->> 'kind'              AS normalised_kind,
       (s.span ->> 'confidence')::double precision    AS confidence,
       (s.span ->> 'start')::integer                  AS span_start,
       (s.span ->> 'end')::integer                    AS span_end,
       -- the rest of the normal form: a range's end, what an amount is per, its currency; and the
       -- whole of it as jsonb, so a part added to Normalised later is not lost on the way to BI.
       -- Appended after the first columns: CREATE OR REPLACE VIEW may add columns only at the end.
       s.span -> 'normalised' ->> 'end'               AS normalised_end,
       s.span -> 'normalised' ->> 'unit'              AS normalised_unit,
       s.span -> 'normalised' ->> 'currency'          AS normalised_currency,
       s.span -> 'normalised'                         AS normalised_json,
       -- Money typed for BI: an amount's or a salary's low and high end (one amount: both the same;
       -- an open salary such as 8000元以上: no high end) and its period (month, year, day, hour).
       CASE WHEN s.span -> 'normalised' ->> 'kind' IN ('amount', 'salary')
            THEN (s.span -> 'normalised' ->> 'value')::numeric END AS low,
       CASE s.span -> 'normalised' ->> 'kind'
            WHEN 'salary' THEN (s.span -> 'normalised' ->> 'end')::numeric
            WHEN 'amount' THEN coalesce(s.span -> 'normalised' ->> 'end', s.span -> 'normalised' ->> 'value')::numeric
       END                                            AS high,
       CASE WHEN s.span -> 'normalised' ->> 'kind' IN ('amount', 'salary')
            THEN s.span -> 'normalised' ->> 'unit' END AS period
FROM {schema}.doc_fields AS d
CROSS JOIN LATERAL jsonb_each(d.record -> 'fields') AS f(label, spans)
CROSS JOIN LATERAL jsonb_array_elements(f.spans) AS s(span);
"""

SCHEMA_DDL = TABLES_DDL + FIELD_VALUES_VIEW
# The view's last column: where a view lacks it, an older sink made it (streams/sinks/postgres.py).
NEWEST_VIEW_COLUMN = "period"

TABLES = ("doc_fields", "sink_offsets", "field_values")

UPSERT = """
INSERT INTO {schema}.doc_fields AS d (doc_id, record, kafka_topic, kafka_partition, kafka_offset)
SELECT u.doc_id, u.record::jsonb, u.topic, u.part, u.off
FROM unnest(%s::text[], %s::text[], %s::text[], %s::integer[], %s::bigint[]) AS u(doc_id, record, topic, part, off)
ON CONFLICT (doc_id) DO UPDATE
SET record = EXCLUDED.record, kafka_topic = EXCLUDED.kafka_topic, kafka_partition = EXCLUDED.kafka_partition,
    kafka_offset = EXCLUDED.kafka_offset, updated_at = now()
WHERE d.kafka_offset < EXCLUDED.kafka_offset
"""

DELETE = """
DELETE FROM {schema}.doc_fields AS d
USING unnest(%s::text[], %s::bigint[]) AS t(doc_id, off)
WHERE d.doc_id = t.doc_id AND d.kafka_offset < t.off
"""

# Each transaction first locks its partitions' rows: two sinks that both think they own a
# partition (one evicted but still running) take turns, and the second skips what the first did.
LOCK_OFFSETS = """
SELECT o.kafka_topic, o.kafka_partition, o.next_offset
FROM {schema}.sink_offsets AS o
JOIN unnest(%s::text[], %s::integer[]) AS p(topic, part) ON o.kafka_topic = p.topic AND o.kafka_partition = p.part
FOR UPDATE OF o
"""

STORE_OFFSETS = """
INSERT INTO {schema}.sink_offsets AS o (kafka_topic, kafka_partition, next_offset)
SELECT * FROM unnest(%s::text[], %s::integer[], %s::bigint[])
ON CONFLICT (kafka_topic, kafka_partition) DO UPDATE
SET next_offset = GREATEST(o.next_offset, EXCLUDED.next_offset), updated_at = now()
"""

# A partition's row exists from its first assignment on, so that LOCK_OFFSETS always has a row to lock.
SEED_OFFSETS = """
INSERT INTO {schema}.sink_offsets (kafka_topic, kafka_partition, next_offset)
SELECT * FROM unnest(%s::text[], %s::integer[], %s::bigint[])
ON CONFLICT (kafka_topic, kafka_partition) DO NOTHING
"""
