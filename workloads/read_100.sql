-- Read 100 rows: one SELECT returning the 100 consecutive keys of this target's key space
-- that start at a random existing key (an index range scan on every topology).
\set k random(0, :shard_rows - 100) * :nshards + :shard
SELECT k, v FROM kv WHERE k >= :k ORDER BY k LIMIT 100;
