-- Write 1 row: INSERT of one new row. New keys come from a sequence, so they never collide
-- across clients, client counts or re-runs, and stay in this target's key space.
INSERT INTO kv (k, v)
VALUES (:keybase + nextval('kv_new_key') * :nshards + :shard, md5(random()::text));
