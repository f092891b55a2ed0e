-- Write 100 rows: one INSERT of 100 new rows, keys from a sequence (never colliding).
INSERT INTO kv (k, v)
SELECT :keybase + nextval('kv_new_key') * :nshards + :shard, md5(random()::text)
FROM generate_series(1, 100);
