-- Write :rows rows: one INSERT of :rows new rows. New keys come from a sequence, so they never
-- collide across clients, client counts or re-runs, and stay in this target's key space.
INSERT INTO kv (k, v)
SELECT :keybase + nextval('kv_new_key') * :nshards + :shard, md5(random()::text)
FROM generate_series(1, :rows);
