-- Read 1 row: a point SELECT on a random existing key of this target's key space.
-- Keys held by target `shard` of `nshards` are shard, shard + nshards, shard + 2*nshards, ...
\set k random(0, :shard_rows - 1) * :nshards + :shard
SELECT k, v FROM kv WHERE k = :k;
