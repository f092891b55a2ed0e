-- Write :rows rows: one INSERT of :rows new rows. New keys come from a sequence, so they never
-- collide across clients, client counts or re-runs, and stay in this target's key space.
-- Each new value is :value_bytes bytes (dataset.value_bytes), as the loaded rows' are: one md5
-- of a random number at the default 32 bytes; otherwise distinct md5s of the new key, cut to
-- size (a repeated md5 would compress to almost nothing on the disk).
\if :value_bytes = 32
INSERT INTO kv (k, v)
SELECT :keybase + nextval('kv_new_key') * :nshards + :shard, md5(random()::text)
FROM generate_series(1, :rows);
\else
INSERT INTO kv (k, v)
SELECT key, left((SELECT string_agg(md5(key::text || ':' || i), '' ORDER BY i)
                  FROM generate_series(1, (:value_bytes + 31) / 32) AS i), :value_bytes)
FROM (SELECT :keybase + nextval('kv_new_key') * :nshards + :shard AS key
      FROM generate_series(1, :rows) AS g) AS s;
\endif
